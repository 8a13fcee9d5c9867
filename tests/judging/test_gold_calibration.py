"""Calibration against gold, checked against known truth: a judge with declared error rates
grades answers whose truth is known; a sample of them has gold."""

from __future__ import annotations

import numpy as np
import pytest

from itemeval.judging import calibrate
from itemeval.judging._calibration import rogan_gladen


def study(rng, *, items=400, epochs=2, accuracy=0.7, false_pass=0.2, false_fail=0.1, gold=150):
    truth = (rng.random((items, epochs)) < accuracy).ravel().astype(float)
    flip = np.where(
        truth == 1, rng.random(truth.size) < false_fail, rng.random(truth.size) < false_pass
    )
    judge = np.where(flip, 1 - truth, truth)
    labelled = np.full(truth.size, np.nan)
    chosen = rng.choice(truth.size, size=gold, replace=False)
    labelled[chosen] = truth[chosen]
    cluster = np.repeat(np.arange(items), epochs)
    return truth, judge, labelled, cluster


def test_the_formula_inverts_the_judges_errors() -> None:
    se, sp, a = 0.9, 0.8, 0.7
    raw = se * a + (1 - sp) * (1 - a)
    assert rogan_gladen(np.array([raw]), np.array([se]), np.array([sp]))[0] == pytest.approx(a)
    assert np.isnan(rogan_gladen(np.array([0.5]), np.array([0.5]), np.array([0.52]))[0])


def test_rates_and_corrected_accuracy_on_one_large_study() -> None:
    rng = np.random.default_rng(11)
    truth, judge, gold, cluster = study(rng, items=5000, gold=4000)
    result = calibrate(
        judge, gold, cluster, np.zeros(truth.size, dtype=np.int64), groups=1, resamples=300
    )
    assert result.rates.false_pass == pytest.approx(0.2, abs=0.03)
    assert result.rates.false_fail == pytest.approx(0.1, abs=0.02)
    overall = result.groups[0]
    assert overall.corrected.low <= truth.mean() <= overall.corrected.high
    assert overall.raw.value == pytest.approx(0.9 * 0.7 + 0.2 * 0.3, abs=0.01)
    assert overall.bias.value == pytest.approx(0.69 - 0.7, abs=0.015)
    assert not overall.raw.low <= truth.mean() <= overall.raw.high  # the raw figure is off


def test_the_corrected_interval_covers_the_truth_across_studies() -> None:
    """60 small studies (the benchmark runs 500+): coverage of the corrected interval is near
    95%, that of the raw judged one far below it."""
    rng = np.random.default_rng(5)
    covered = raw_covered = 0
    for _ in range(60):
        truth, judge, gold, cluster = study(rng, accuracy=0.5, false_pass=0.3, false_fail=0.05)
        result = calibrate(
            judge,
            gold,
            cluster,
            np.zeros(truth.size, dtype=np.int64),
            groups=1,
            resamples=400,
            seed=int(rng.integers(1 << 30)),
        )
        line = result.groups[0]
        covered += line.corrected.low <= truth.mean() <= line.corrected.high
        raw_covered += line.raw.low <= truth.mean() <= line.raw.high
    assert covered >= 53  # 88%: with 60 studies, 95% coverage gives >= 53 in 99% of runs
    assert raw_covered <= 40
