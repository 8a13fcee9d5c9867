"""The 1PL/2PL fit against known truth: simulated banks whose abilities, difficulties and
discriminations are known, including items planted broken."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from itemeval.irt import FLAG_Q, discrimination_q, fit_irt, held_out_loglik, item_flag


def bank(seed: int, conditions: int = 30, items: int = 600, epochs: int = 3):
    rng = np.random.default_rng(seed)
    theta = np.sort(rng.normal(0, 1, conditions))
    a = rng.lognormal(0.0, 0.5, items)
    b = rng.normal(0, 1, items)
    a[:10] = -1.0  # planted: the weaker a condition, the likelier right (a wrong target)
    b[:10] = 0.0
    p = 1 / (1 + np.exp(-(np.outer(theta, a) - a * b)))
    trials = np.full((conditions, items), epochs)
    trials[rng.random(trials.shape) < 0.1] = 0  # some cells never answered
    return theta, a, b, rng.binomial(trials, p), trials


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_2pl_recovers_known_parameters(seed):
    theta, a, b, correct, trials = bank(seed)
    fit = fit_irt(correct, trials, "2pl")
    assert fit.converged
    assert spearmanr(fit.theta, theta)[0] > 0.97
    assert spearmanr(fit.a, a)[0] > 0.7
    ok = a > 0.5
    assert spearmanr(fit.b[ok], b[ok])[0] > 0.9
    # every planted item comes out with negative discrimination, and its test statistic below
    # every other item's; no item of positive discrimination is flagged
    assert (fit.a[:10] < 0).all()
    z, q = discrimination_q(fit, correct, trials)
    assert np.nanmax(z[:10]) < np.nanmin(z[10:])
    flags = [
        item_flag(int(k), int(n), float(x))
        for k, n, x in zip(correct.sum(0), trials.sum(0), q, strict=True)
    ]
    assert not any(f == "negative discrimination" for f in flags[10:])
    # a difficulty is given where the discrimination is clearly positive, and is bounded there
    assert not fit.b_defined[:10].any()
    assert np.abs(fit.b[fit.b_defined]).max() < 15


def test_held_out_prefers_2pl_when_discriminations_vary():
    _, _, _, correct, trials = bank(4)
    held = held_out_loglik(correct, trials, seed=0)
    assert held.per_answer["2pl"] > held.per_answer["1pl"] > held.per_answer["base"]
    assert held.chosen == "2pl" and held.gain > held.gain_se > 0
    assert held.cells == int((trials > 0).sum()) and held.answers == int(trials.sum())
    assert "better" in held.reason


def test_all_right_and_none_right_are_flagged_before_discrimination():
    assert item_flag(0, 6, 0.0) == "none right"
    assert item_flag(6, 6, 0.0) == "all right"
    assert item_flag(3, 6, FLAG_Q) == "negative discrimination"
    assert item_flag(3, 6, FLAG_Q * 1.01) is None  # not strong enough evidence
    assert item_flag(3, 6, float("nan")) is None
    assert item_flag(0, 0, 0.0) is None  # never answered: nothing known


def test_bad_shapes_and_models_are_refused():
    with pytest.raises(ValueError, match="model"):
        fit_irt(np.zeros((2, 2)), np.ones((2, 2)), "3pl")
    with pytest.raises(ValueError, match="shape"):
        fit_irt(np.zeros((2, 2)), np.ones((2, 3)))
