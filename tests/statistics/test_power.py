"""Power planning: the formula, the conservative default, the power reached at the planned
size on simulated studies (known truth), the pair a plan is for, and the plans it flags."""

from __future__ import annotations

import numpy as np
import pytest
from simulated import simulate, study_cells, tallies_of

from itemeval.statistics import DesignVariance, compare, items_needed
from itemeval.statistics._components import components
from itemeval.statistics._planning import choose_pair, pair_variances
from itemeval.statistics._power import MOST_EPOCHS, flag_budget, power_plan


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


def test_the_plan_is_for_the_hardest_close_pair_and_gives_it_its_power():
    """Two strong conditions that agree on nearly every item and two weak ones that disagree on
    many, 35 points apart. Planned from a pilot for the weak pair's true difference, the default
    takes the weak pair (the hardest within twice the difference) and a paired test at that size
    detects it about 80% of the time; planned for the strong pair (another close pair, the
    easiest), it would detect the weak pair's difference far less often."""
    rng = np.random.default_rng(21)
    abilities = [0.9, 0.88, 0.5, 0.46]
    pilot, _ = simulate(abilities, 4000, 1, rng)
    stored = pair_variances(study_cells(pilot, judge=False))
    _, p = simulate(abilities, 200_000, 1, np.random.default_rng(22))
    truth = float(p[:, 2].mean() - p[:, 3].mean())
    chosen, assumed = choose_pair(stored, truth, None)
    assert {chosen.first, chosen.second} == {"m1_p0", "m1_p1"}, assumed
    assert "hardest realistic pair" in assumed[0] and "left out" in assumed[1]
    n = items_needed(truth, chosen.variance)
    strong = next(p for p in stored.pairs if {p.first, p.second} == {"m0_p0", "m0_p1"})
    n_strong = items_needed(truth, strong.variance)
    assert n_strong < 0.8 * n

    def detected(size: int, studies: int = 200) -> float:
        hits = 0
        for s in range(studies):
            answers, _ = simulate(abilities, size, 1, rng)
            pair = compare(tallies_of(answers[:, :, 2:]), resamples=50, seed=s).pair(0, 1)
            hits += pair.p_value < 0.05 and pair.difference > 0
        return hits / studies

    assert 0.72 <= detected(n) <= 0.88
    assert detected(n_strong) < 0.7


def test_a_named_pair_a_family_and_the_closest_pair():
    rng = np.random.default_rng(3)
    pilot, _ = simulate([0.9, 0.88, 0.5, 0.46], 2000, 1, rng)
    stored = pair_variances(study_cells(pilot, judge=False))
    named, words = choose_pair(stored, 0.05, {frozenset(("m0_p0", "m0_p1"))})
    assert (named.first, named.second) == ("m0_p0", "m0_p1")
    assert words[0].startswith("the pair named: m0_p0 vs m0_p1")
    family = {frozenset((a, b)) for a in ("m0_p0", "m1_p0") for b in ("m0_p1", "m1_p1")}
    hardest, words = choose_pair(stored, 0.05, family)
    assert words[0].startswith("the hardest of the 4 pairs")
    assert hardest.one_epoch == max(
        p.one_epoch for p in stored.pairs if frozenset((p.first, p.second)) in family
    )
    closest, words = choose_pair(stored, 0.001, None)  # no pair that close: the closest
    assert abs(closest.difference) == min(abs(p.difference) for p in stored.pairs)
    assert words[0].startswith("no pair's observed difference is within 2 x 0.001")
    nothing, words = choose_pair(stored, 0.05, {frozenset(("x", "y"))})
    assert nothing is None and "conservative default" in words[0]


def test_absurd_plans_are_flagged():
    tiny = power_plan(
        0.0001, DesignVariance(0.2, 0.0), available_items=1000, usd_per_item_epoch=0.01
    )
    assert tiny.warnings and "more than 1,000,000 answers per condition" in tiny.warnings[0]
    assert tiny.recommended is None
    fine = power_plan(0.05, DesignVariance(0.2, 0.0), available_items=1000, usd_per_item_epoch=1.0)
    assert not fine.warnings
    flag_budget(fine, {"budget.max_usd": 10.0, "budget.study_max_usd": None})
    assert len(fine.warnings) == 1 and "more than budget.max_usd ($10.00)" in fine.warnings[0]
    # the fewest epochs that fit are offered up to MOST_EPOCHS, never a thousand epochs
    spread = power_plan(
        0.001, DesignVariance(0.0, 0.25), available_items=100, usd_per_item_epoch=None
    )
    assert max(r.epochs for r in spread.rows) <= MOST_EPOCHS
