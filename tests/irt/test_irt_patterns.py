"""The fit over the items' distinct columns of counts against the plain fit over every item, on
simulated studies: the same estimates, standard errors and model choice; the joint MAP reached
(gradient 0) and its intervals equal to the dense joint information's; the item table's flags
and the numpy Benjamini-Hochberg against their definitions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import false_discovery_control

import itemeval.irt._fit as fit_module
from itemeval.irt import (
    Patterns,
    benjamini_hochberg,
    discrimination_q,
    fit_irt,
    held_out_loglik,
    item_flag,
    item_patterns,
)
from itemeval.irt._fit import A_MEAN, A_SD, D_SD, THETA_SD
from itemeval.irt._flags import normal_cdf
from itemeval.irt._items import ItemTable, item_table


def study(seed: int, conditions: int, items: int, epochs: int, missing: float = 0.1):
    """Answers from a 2PL (discriminations lognormal(0, 0.5)), some cells never answered."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, conditions)
    a = rng.lognormal(0, 0.5, items)
    b = rng.normal(0, 1, items)
    p = 1 / (1 + np.exp(-(np.outer(theta, a) - a * b)))
    trials = np.full((conditions, items), epochs)
    trials[rng.random(trials.shape) < missing] = 0
    return rng.binomial(trials, p).astype(float), trials.astype(float)


def identity(correct: np.ndarray, trials: np.ndarray) -> Patterns:
    """Every item its own pattern: the plain fit through the compressed code."""
    items = correct.shape[1]
    index = np.arange(items)
    return Patterns(
        np.asarray(correct, float), np.asarray(trials, float), np.ones(items), index, index
    )


SHAPES = [(4, 3000, 1), (5, 2000, 2), (8, 400, 3)]


@pytest.mark.parametrize(("conditions", "items", "epochs"), SHAPES)
@pytest.mark.parametrize("model", ["1pl", "2pl"])
def test_the_compressed_fit_is_the_plain_fit(conditions, items, epochs, model):
    correct, trials = study(conditions * items + epochs, conditions, items, epochs)
    patterns = item_patterns(correct, trials)
    # at most ((epochs + 1)(epochs + 2) / 2) ^ conditions columns: 81 for 4 conditions x 1 epoch
    assert len(patterns.count) <= min(items, ((epochs + 1) * (epochs + 2) // 2) ** conditions)
    assert patterns.count.sum() == items
    assert (patterns.correct[:, patterns.of_item] == correct).all()
    assert (patterns.trials[:, patterns.of_item] == trials).all()
    start_plain = fit_irt(correct, trials, "1pl", compress=False) if model == "2pl" else None
    start = fit_irt(correct, trials, "1pl") if model == "2pl" else None
    plain = fit_irt(correct, trials, model, compress=False, start=start_plain)
    packed = fit_irt(correct, trials, model, start=start)
    assert plain.converged and packed.converged
    assert plain.iterations == packed.iterations
    for name in ("theta", "a", "d", "b", "theta_se", "a_se", "d_se", "b_se", "theta_se_fixed"):
        np.testing.assert_allclose(
            getattr(packed, name), getattr(plain, name), rtol=1e-8, atol=1e-10, err_msg=name
        )
    np.testing.assert_allclose(packed.theta_cov, plain.theta_cov, rtol=1e-8, atol=1e-12)
    assert packed.loglik == pytest.approx(plain.loglik, rel=1e-12)
    z_plain, q_plain = discrimination_q(plain, correct, trials)
    z, q = discrimination_q(packed, correct, trials, patterns=patterns)
    np.testing.assert_allclose(z, z_plain, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(q, q_plain, rtol=1e-8, atol=1e-12)


def test_the_model_choice_is_the_same_compressed(monkeypatch):
    """The 5-fold choice fits each fold compressed; with every item its own pattern (the plain
    fit) it gives the same held-out log-likelihoods and choice."""
    correct, trials = study(7, 4, 3000, 1)
    packed = held_out_loglik(correct, trials, seed=0)
    monkeypatch.setattr(fit_module, "item_patterns", identity)
    plain = held_out_loglik(correct, trials, seed=0)
    assert packed.chosen == plain.chosen and packed.cells == plain.cells
    for model, value in plain.per_answer.items():
        assert packed.per_answer[model] == pytest.approx(value, rel=1e-9)
    assert packed.gain_se == pytest.approx(plain.gain_se, rel=1e-7)


def _log_posterior_gradient(fit, correct, trials):
    p = 1 / (1 + np.exp(-(np.outer(fit.theta, fit.a) + fit.d)))
    residual = correct - trials * p
    g_theta = residual @ fit.a - fit.theta / THETA_SD**2
    g_d = residual.sum(0) - fit.d / D_SD**2
    g_a = fit.theta @ residual - (fit.a - A_MEAN) / A_SD**2
    return g_theta, g_a if fit.model == "2pl" else np.zeros(1), g_d


@pytest.mark.parametrize("model", ["1pl", "2pl"])
def test_the_fit_reaches_the_joint_map(model):
    """At the estimates the log posterior's gradient is 0 (the fit stops where a Newton step
    would move nothing by more than the tolerance, so far closer than that)."""
    correct, trials = study(11, 6, 500, 3)
    fit = fit_irt(correct, trials, model, start=fit_irt(correct, trials, "1pl"))
    for gradient in _log_posterior_gradient(fit, correct, trials):
        assert np.abs(gradient).max() < 1e-6


def test_standard_errors_are_the_dense_joint_informations():
    """The abilities' and items' SEs equal the square roots of the diagonal of the inverse of
    the whole joint information matrix (every ability and item parameter at once, priors
    added), built densely on a small study whose items share columns: the items' error in the
    abilities sums over the real items, not the patterns."""
    correct, trials = study(3, 3, 60, 1, missing=0.0)
    assert len(item_patterns(correct, trials).count) < 60
    fit = fit_irt(correct, trials, "2pl", start=fit_irt(correct, trials, "1pl"))
    conditions, items = correct.shape
    p = 1 / (1 + np.exp(-(np.outer(fit.theta, fit.a) + fit.d)))
    w = trials * p * (1 - p)
    size = conditions + 2 * items
    info = np.zeros((size, size))
    ia, id_ = conditions + np.arange(items), conditions + items + np.arange(items)
    info[np.arange(conditions), np.arange(conditions)] = w @ fit.a**2 + 1 / THETA_SD**2
    info[ia, ia] = fit.theta**2 @ w + 1 / A_SD**2
    info[id_, id_] = w.sum(0) + 1 / D_SD**2
    info[ia, id_] = info[id_, ia] = fit.theta @ w
    for c in range(conditions):
        info[c, ia] = info[ia, c] = w[c] * fit.a * fit.theta[c]
        info[c, id_] = info[id_, c] = w[c] * fit.a
    se = np.sqrt(np.diag(np.linalg.inv(info)))
    np.testing.assert_allclose(fit.theta_se, se[:conditions], rtol=1e-8)
    np.testing.assert_allclose(fit.a_se, se[ia], rtol=1e-8)
    np.testing.assert_allclose(fit.d_se, se[id_], rtol=1e-8)


def test_patterns_of_counts_that_are_not_small_whole_numbers():
    """Counts too large for one integer key (or not whole) are grouped by their bytes."""
    rng = np.random.default_rng(5)
    trials = rng.choice([0.0, 1000.0, 5000.0], size=(12, 300))
    correct = np.floor(trials * rng.choice([0.0, 0.5], size=trials.shape))
    correct[0, 0] = 0.5  # not whole
    patterns = item_patterns(correct, trials)
    assert (patterns.correct[:, patterns.of_item] == correct).all()
    assert (patterns.trials[:, patterns.of_item] == trials).all()
    assert patterns.count.sum() == 300
    assert len(np.unique(np.concatenate([correct, trials]).T, axis=0)) == len(patterns.count)


def test_benjamini_hochberg_and_the_normal_cdf_are_scipys():
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.random(500), rng.random(50) * 1e-4, [0.0, 1.0, 0.3, 0.3]])
    np.testing.assert_allclose(benjamini_hochberg(p), false_discovery_control(p), rtol=1e-12)
    # distinct p-values with how many tests each stands for: the expanded list's adjustment
    tied = rng.choice(p[:40], 2000)
    values, inverse, counts = np.unique(tied, return_inverse=True, return_counts=True)
    shuffle = rng.permutation(len(values))
    packed = benjamini_hochberg(values[shuffle], counts[shuffle])[np.argsort(shuffle)]
    np.testing.assert_allclose(packed[inverse], false_discovery_control(tied), rtol=1e-12)
    z = np.concatenate([rng.normal(0, 4, 1000), [-40.0, 0.0, 40.0, np.nan]])
    np.testing.assert_allclose(normal_cdf(z), ndtr(z), rtol=1e-12, atol=1e-300)


def test_the_item_table_flags_and_lists_as_item_flag_does():
    correct, trials = study(9, 30, 300, 3)
    correct[:, :10] = trials[:, :10] - correct[:, :10]  # wrong keys
    correct[:, 10] = 0  # none right
    correct[:, 11] = trials[:, 11]  # all right
    trials[:, 12] = correct[:, 12] = 0  # never answered
    one = fit_irt(correct, trials, "1pl")
    two = fit_irt(correct, trials, "2pl", start=one)
    z, q = discrimination_q(two, correct, trials)
    import pyarrow as pa

    ids = [f"i{j}" for j in range(300)]
    keys = pa.table({"dataset": ["d"] * 300, "item_id": ids, "item_hash": [""] * 300})
    table = ItemTable(item_table(keys, two, one, correct, trials, z, q))
    expected = [
        item_flag(int(k), int(n), float(x))
        for k, n, x in zip(correct.sum(0), trials.sum(0), q, strict=True)
    ]
    assert table.table.column("flag").to_pylist() == expected
    assert [i.flag for i in table] == expected
    assert table[5].item_id == "i5" and table[-1].item_id == "i299"
    counts = {f: expected.count(f) for f in set(expected) if f}
    assert table.flag_counts() == counts and counts["negative discrimination"] >= 5
    listed = table.suspicious()
    negative = sorted(
        (i for i in table if i.flag == "negative discrimination"),
        key=lambda i: (i.discrimination_q, i.discrimination),
    )
    others = [i for i in table if i.flag in ("none right", "all right")]
    assert [i.item_id for i in listed] == [i.item_id for i in negative + others]
    assert [i.item_id for i in table.suspicious(3, flags=["negative discrimination"])] == [
        i.item_id for i in negative[:3]
    ]
