"""`export.stats`: the cluster bootstrap on known cases, Cohen's kappa on textbook examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from itemeval.statistics import agreement, bootstrap_proportion, cohen_kappa


def test_bootstrap_of_a_fair_coin_matches_the_binomial_interval():
    # 400 single-trial clusters, half correct: the 95% interval is about 0.5 +- 1.96 * 0.025.
    successes = np.array([1, 0] * 200)
    result = bootstrap_proportion(successes, np.ones(400), resamples=4000, seed=1)
    assert result.value == 0.5
    assert result.low == pytest.approx(0.451, abs=0.008)
    assert result.high == pytest.approx(0.549, abs=0.008)
    assert result.se == pytest.approx(0.025, abs=0.002)
    assert (result.clusters, result.successes, result.trials) == (400, 200, 400)


def test_bootstrap_matches_resampling_cluster_indices():
    # The multinomial shortcut must give the distribution of plain index resampling.
    rng = np.random.default_rng(7)
    trials = rng.integers(1, 4, size=300).astype(float)
    successes = np.array([rng.integers(0, t + 1) for t in trials], dtype=float)
    fast = bootstrap_proportion(successes, trials, resamples=4000, seed=3)
    picks = np.random.default_rng(11).integers(0, 300, size=(4000, 300))
    naive = successes[picks].sum(axis=1) / trials[picks].sum(axis=1)
    assert fast.value == pytest.approx(successes.sum() / trials.sum())
    assert fast.se == pytest.approx(naive.std(ddof=1), rel=0.06)
    assert fast.low == pytest.approx(np.quantile(naive, 0.025), abs=0.01)
    assert fast.high == pytest.approx(np.quantile(naive, 0.975), abs=0.01)


def test_epochs_of_an_item_stay_together():
    # 40 items answered 10 times each, every epoch giving the same verdict: there are only 40
    # independent observations, so the interval must be as wide as for 40 single answers.
    per_item = np.array([1, 0] * 20)
    clustered = bootstrap_proportion(per_item * 10, np.full(40, 10), seed=2)
    single = bootstrap_proportion(per_item, np.ones(40), seed=2)
    naive = bootstrap_proportion(np.repeat(per_item, 10), np.ones(400), seed=2)
    assert clustered.high - clustered.low == pytest.approx(single.high - single.low, abs=0.02)
    assert clustered.high - clustered.low > 2.5 * (naive.high - naive.low)


def test_bootstrap_edge_cases():
    everything = bootstrap_proportion([3, 3, 3], [3, 3, 3])
    assert (everything.value, everything.low, everything.high) == (1.0, 1.0, 1.0)
    nothing = bootstrap_proportion([0, 0], [2, 2])
    assert (nothing.value, nothing.low, nothing.high) == (0.0, 0.0, 0.0)
    one = bootstrap_proportion([2], [3])
    assert one.value == one.low == one.high == pytest.approx(2 / 3) and one.se == 0
    empty = bootstrap_proportion([], [])
    assert not empty.defined and math.isnan(empty.value) and not empty.covers(0.5)
    # Clusters without trials do not count.
    assert bootstrap_proportion([1, 0], [1, 0]).clusters == 1
    same = [bootstrap_proportion([1, 0, 1, 1], [1, 1, 1, 1], seed=5) for _ in range(2)]
    assert same[0] == same[1]
    for bad in (([2], [1]), ([-1], [1]), ([1, 1], [1])):
        with pytest.raises(ValueError):
            bootstrap_proportion(*bad)
    with pytest.raises(ValueError):
        bootstrap_proportion([1], [1], confidence=1.0)


def test_kappa_on_textbook_tables():
    # Wikipedia, "Cohen's kappa": 50 cases, yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> 0.4.
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    # The second example: 45 / 15 / 25 / 15 of 100 -> p_o 0.6, p_e 0.54, kappa 0.1304.
    a = [True] * 60 + [False] * 40
    b = [True] * 45 + [False] * 15 + [True] * 25 + [False] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.06 / 0.46)
    result = agreement(a, b)
    assert (result.n, result.rate) == (100, pytest.approx(0.6))
    assert (result.both_positive, result.only_first, result.only_second, result.both_negative) == (
        45,
        15,
        25,
        15,
    )


def test_kappa_edge_cases():
    assert cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == 1.0
    assert cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == -1.0
    assert math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))  # one label only: undefined
    assert math.isnan(cohen_kappa([], []))
    assert cohen_kappa(["A", "B", "C"], ["A", "B", "C"]) == 1.0  # any labels
    assert math.isnan(agreement([], []).rate)
    with pytest.raises(ValueError):
        cohen_kappa([1, 0], [1])
