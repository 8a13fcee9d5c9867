"""Power planning: the formula, the conservative default, and the power reached at the planned
size on simulated studies (known truth)."""

from __future__ import annotations

import numpy as np
import pytest
from simulated import simulate, tallies_of

from itemeval.statistics import DesignVariance, compare, items_needed
from itemeval.statistics._components import components
from itemeval.statistics._power import power_plan


def test_the_formula_and_the_default():
    # (1.96 + 0.8416)^2 x 0.5 / 0.03^2 = 4,360.3 -> 4,361 items, however many epochs
    default = DesignVariance.default()
    assert items_needed(0.03, default) == 4361
    assert items_needed(0.03, default, epochs=5) == 4361
    # half the variance within items: epochs help, but never below tau^2 alone
    split = DesignVariance(between=0.1, within=0.1)
    needed = [items_needed(0.05, split, k) for k in (1, 4, 100)]
    assert needed[0] > needed[1] > needed[2]
    plan = power_plan(0.05, split, available_items=1000, usd_per_item_epoch=0.01)
    assert plan.least_items == pytest.approx(7.849 * 0.1 / 0.0025, abs=1)
    best = plan.recommended
    assert best is not None and best.fits and best.items <= 1000
    assert best.usd == pytest.approx(0.01 * best.items * best.epochs)
    assert all(r.answers_per_condition >= best.answers_per_condition for r in plan.rows if r.fits)
    with pytest.raises(ValueError):
        items_needed(0.0, split)


def test_components_tell_epochs_from_items():
    rng = np.random.default_rng(4)
    # deterministic items (each item right or wrong every time): all between, epochs add nothing
    fixed = (rng.uniform(size=400) < 0.6).astype(float)
    c = components("x", fixed * 4, fixed * 4, np.full(400, 4.0))
    assert c.between_share == pytest.approx(1.0) and c.effective == pytest.approx(400, rel=0.01)
    # independent answers (every item p = 0.6): all within, 4 epochs are worth 4 answers each
    draws = (rng.uniform(size=(400, 4)) < 0.6).astype(float)
    c = components("y", draws.sum(1), draws.sum(1), np.full(400, 4.0))
    assert c.within_share > 0.9 and c.effective == pytest.approx(1600, rel=0.15)


def test_power_reached_at_the_planned_size():
    """Plan from one pilot's variance, then run 300 studies of the planned size: the paired test
    detects the true difference about as often as planned (80%)."""
    rng = np.random.default_rng(11)
    abilities = [0.62, 0.55]
    pilot, _ = simulate(abilities, 4000, 1, rng)
    d = pilot[:, 0, 0] - pilot[:, 0, 1]
    variance = DesignVariance.from_pairs([d], [float("nan")], 1.0)
    truth_rng = np.random.default_rng(12)
    _, p = simulate(abilities, 200_000, 1, truth_rng)
    truth = float(p[:, 0].mean() - p[:, 1].mean())
    n = items_needed(truth, variance, 1, power=0.8, alpha=0.05)
    detected = 0
    studies = 300
    for s in range(studies):
        answers, _ = simulate(abilities, n, 1, rng)
        pair = compare(tallies_of(answers), resamples=50, seed=s).pair(0, 1)
        detected += pair.p_value < 0.05 and pair.difference > 0
    assert 0.72 <= detected / studies <= 0.88, (n, detected / studies)
