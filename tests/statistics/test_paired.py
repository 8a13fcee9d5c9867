"""Paired comparisons, multiplicity and tiers: textbook cases and known truth from simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest, false_discovery_control
from simulated import simulate, tallies_of

from itemeval.statistics import MCNEMAR, PAIRED_T, Tallies, bootstrap_proportion, compare
from itemeval.statistics._multiplicity import adjust, holm, tiers
from itemeval.statistics._paired import mcnemar_exact


def test_mcnemar_exact_is_the_binomial_test():
    for b, c in [(10, 2), (0, 0), (5, 5), (3, 17), (1, 0), (40, 25)]:
        expected = 1.0 if b + c == 0 else binomtest(b, b + c, 0.5).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9)
    assert mcnemar_exact(10, 2) == pytest.approx(0.0386, abs=1e-4)  # the textbook example


def test_holm_and_bh_match_their_definitions():
    rng = np.random.default_rng(3)
    for m in (1, 2, 5, 17):
        p = rng.uniform(0, 0.2, m)
        order = np.argsort(p)
        brute = np.empty(m)
        running = 0.0
        for rank, i in enumerate(order):  # step-down: (m - rank) p, never decreasing
            running = max(running, min(1.0, (m - rank) * p[i]))
            brute[i] = running
        np.testing.assert_allclose(holm(p), brute)
        np.testing.assert_allclose(adjust(p, "bh"), false_discovery_control(p))
    assert math.isnan(holm([0.01, math.nan])[1]) and holm([0.01, math.nan])[0] == 0.01
    with pytest.raises(ValueError, match="unknown adjustment"):
        adjust([0.1], "bonferroni-ish")


def test_tiers_group_what_cannot_be_told_apart_from_the_best():
    estimates = [0.9, 0.89, 0.7, 0.69, 0.3]
    apart = {(0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4), (2, 4), (3, 4)}
    adjusted = {(a, b): (0.001 if (a, b) in apart else 0.5) for a in range(5) for b in range(5)}
    assert tiers(estimates, adjusted) == [1, 1, 2, 2, 3]
    assert tiers([0.5, math.nan], {}) == [1, 2]


def test_identical_conditions_are_not_distinguishable_and_a_real_gap_is():
    rng = np.random.default_rng(0)
    answers, _ = simulate([0.7, 0.7, 0.3], 300, 1, rng)
    answers[:, :, 1] = answers[:, :, 0]  # the same verdicts: no discordant pair
    family = compare(tallies_of(answers), resamples=500)
    same = family.pair(0, 1)
    assert same.test == MCNEMAR and same.discordant == (0, 0) and same.p_value == 1.0
    assert same.low == same.high == same.difference == 0.0
    gap = family.pair(0, 2)
    assert gap.real() and gap.low > 0.25
    assert family.tiers == [1, 1, 2]
    assert list(family.rank_low) == [1, 1, 3] and list(family.rank_high) == [1, 1, 3]


def test_epochs_use_the_cluster_t_test_and_stay_with_their_item():
    rng = np.random.default_rng(1)
    answers, _ = simulate([0.6, 0.55], 200, 3, rng)
    family = compare(tallies_of(answers), resamples=500)
    pair = family.pair(0, 1)
    assert pair.test == PAIRED_T and pair.clusters == 200 and pair.first_answers == 600
    # the t statistic's SE agrees with the bootstrap's spread (both are cluster-level)
    width = pair.high - pair.low
    assert width / (2 * 1.96 * pair.se) == pytest.approx(1.0, abs=0.15)


def test_paired_intervals_cover_the_true_difference_and_are_narrower():
    """Known truth: 200 simulated studies, items of varied difficulty. The paired interval
    covers the true difference about 95% of the time and is much narrower than what two
    unpaired intervals imply."""
    rng = np.random.default_rng(7)
    abilities = [0.6, 0.56]
    covered, ratios = 0, []
    studies = 200
    for s in range(studies):
        answers, p = simulate(abilities, 150, 1, rng)
        truth = float(p[:, 0].mean() - p[:, 1].mean())  # these items' expected difference
        family = compare(tallies_of(answers), resamples=400, seed=s)
        pair = family.pair(0, 1)
        covered += pair.low <= truth <= pair.high
        unpaired = [
            bootstrap_proportion(answers[:, 0, j], np.ones(150), resamples=400, seed=s)
            for j in range(2)
        ]
        half = [(u.high - u.low) / 2 for u in unpaired]
        ratios.append((pair.high - pair.low) / (2 * math.hypot(*half)))
    coverage = covered / studies
    assert 0.90 <= coverage <= 0.99, coverage
    assert np.median(ratios) < 0.75


def test_clusters_make_intervals_honest():
    """Items in groups of 10 share a difficulty: the conditions' gap varies by cluster. An
    item-level interval is too narrow; the cluster-level one is wider."""
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(30), 10)
    shift = rng.normal(0, 0.15, 30)[groups]
    difficulty = rng.uniform(0, 1, 30)[groups]
    p = np.stack([1 / (1 + np.exp(-8 * (0.6 + shift - difficulty))), np.full(300, 0.55)], 1)
    answers = (rng.uniform(size=(300, 1, 2)) < p[:, None, :]).astype(np.float64)
    items = compare(tallies_of(answers), resamples=800).pair(0, 1)
    clustered = compare(tallies_of(answers, groups), resamples=800).pair(0, 1)
    assert clustered.test == PAIRED_T and clustered.clusters == 30
    assert clustered.high - clustered.low > 1.3 * (items.high - items.low)


def test_units_that_graded_different_items_are_compared_on_the_common_ones():
    rng = np.random.default_rng(2)
    answers, _ = simulate([0.6, 0.6, 0.6], 100, 1, rng)
    cells = [(i, j) for i in range(100) for j in range(3) if not (j == 2 and i < 40)]
    rows = [(i, j, answers[i, 0, j]) for i, j in cells]
    item, unit, value = (np.array(c) for c in zip(*rows, strict=True))
    family = compare(
        Tallies.from_rows(["a", "b", "c"], unit, item, value, binary=True), resamples=300
    )
    pair = family.pair(0, 2)
    assert pair.clusters == 60 and pair.first_answers == 60
    assert pair.first_value == pytest.approx(answers[40:, 0, 0].mean())
    assert family.pair(0, 1).clusters == 100


def test_units_that_share_no_item_are_never_paired():
    """Conditions on two benchmarks' items (A and B on items 0-9, C on items 10-19): A and B
    are compared; neither is paired with C, and the adjustment counts one pair."""
    unit = np.repeat([0, 1, 2], 10)
    cluster = np.concatenate([np.arange(10), np.arange(10), np.arange(10, 20)])
    values = np.concatenate([np.ones(10), np.r_[np.zeros(8), np.ones(2)], np.zeros(10)])
    family = compare(
        Tallies.from_rows(["a", "b", "c"], unit, cluster, values, binary=True), resamples=200
    )
    assert [(p.first, p.second) for p in family.pairs] == [(0, 1)]
    pair = family.pairs[0]
    assert pair.clusters == 10 and pair.adjusted == pair.p_value == mcnemar_exact(8, 0)
    assert family.estimates.tolist() == [1.0, 0.2, 0.0]  # every unit keeps its own estimate


def test_a_family_of_units_on_other_items_says_so():
    from itemeval.statistics import verdict

    unit, cluster = np.repeat([0, 1], 5), np.arange(10)  # no item in common
    family = compare(
        Tallies.from_rows(["a", "b"], unit, cluster, np.ones(10), binary=True), resamples=50
    )
    assert family.pairs == [] and "no two units share an item" in verdict(family)
