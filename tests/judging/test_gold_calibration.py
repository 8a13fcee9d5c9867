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


SOLVERS = (0.85, 0.8, 0.65, 0.6, 0.45, 0.4)


def shared_answers_study(index: int, items: int = 40) -> tuple[np.ndarray, ...]:
    """The demo's shape through the simulator: six solvers answer each item directly in 3
    epochs (18 answers an item); right answers are one text, and the judge's verdict on one
    text of an item and epoch is one draw, so an item's answers err together. Returns judge,
    truth (gold on every answer), item, the true (sensitivity, specificity)."""
    from itemeval.providers import SimModelSpec, SimSettings
    from itemeval.scoring import parse_structured_verdict
    from itemeval.simulator import Simulator, solution_matches

    rng = np.random.default_rng(1000 + index)
    false_pass, false_fail = (float(x) for x in rng.uniform(0.02, 0.3, size=2))
    models = {f"s{i}": SimModelSpec(ability=a) for i, a in enumerate(SOLVERS)}
    models["judge"] = SimModelSpec(
        ability=0.5, judge_false_pass=false_pass, judge_false_fail=false_fail
    )
    sim = Simulator(SimSettings(seed=index, models=models))
    judge, truth, item_of = [], [], []
    for item in range(items):
        target = str(int(rng.integers(2, 999)))
        for epoch in range(3):
            hints = {"item_id": f"t{index}-{item}", "epoch": epoch, "target": target}
            hints["modality"] = "single-value"
            for solver in range(len(SOLVERS)):
                ask = [{"role": "user", "content": f"Item {item}: compute it."}]
                answer = sim.answer(f"sim/s{solver}", ask, hints=hints).text
                reply = sim.answer(
                    "sim/judge",
                    [{"role": "user", "content": f"Grade: {answer}"}],
                    hints=hints | {"role": "judge", "solution": answer},
                    structured=True,
                )
                score = parse_structured_verdict(reply.text, min_score=0, max_score=1).score
                judge.append(np.nan if score is None else float(score >= 1))
                truth.append(float(solution_matches(answer, target)))
                item_of.append(item)
    rates = np.array([1 - false_fail, 1 - false_pass])
    return np.array(judge), np.array(truth), np.array(item_of, dtype=np.int64), rates


def test_rate_intervals_resample_items_and_cover_the_simulators_true_rates():
    """Over 60 simulated studies whose judge errs together on an item's shared answers, the
    sensitivity and specificity intervals (Wilson at the effective number of answers the item
    bootstrap finds) hold the judge's true rates about 95% of the time; Wilson intervals that
    count every answer as independent (the rates' old intervals) hold the sensitivity far less
    often, and are narrower."""
    from itemeval.judging._calibration import error_rates

    covered = np.zeros(2)
    naive_covered = np.zeros(2)
    widths, naive_widths = [], []
    studies = 60
    for index in range(studies):
        judge, truth, item, true = shared_answers_study(index)
        result = calibrate(
            judge, truth, item, np.zeros(item.size, np.int64), groups=1, resamples=400, seed=index
        )
        naive = error_rates(judge, truth)
        for r, (rate, plain) in enumerate(
            [
                (result.rates.sensitivity, naive.sensitivity),
                (result.rates.specificity, naive.specificity),
            ]
        ):
            covered[r] += rate.low <= true[r] <= rate.high
            naive_covered[r] += plain.low <= true[r] <= plain.high
        widths.append(result.rates.sensitivity.high - result.rates.sensitivity.low)
        naive_widths.append(naive.sensitivity.high - naive.sensitivity.low)
        assert result.rates.sensitivity.design_effect >= 1.0
    # 95% coverage gives >= 52 of 60 in 99% of runs
    assert (covered >= 52).all(), covered
    assert naive_covered[0] <= 48, naive_covered
    assert np.median(np.array(widths) / np.array(naive_widths)) > 1.3


def test_cluster_by_clusters_are_resampled_whole():
    """Items whose judge errs alike within a cluster of ten: resampling the clusters (what
    `analysis.cluster_by` asks) gives wider rate and corrected intervals than resampling items."""
    rng = np.random.default_rng(3)
    clusters, per, epochs = 60, 10, 2
    false_fail = rng.beta(2, 8, clusters)  # each cluster's own rate
    truth = (rng.random((clusters, per, epochs)) < 0.7).astype(float)
    flip = np.where(
        truth == 1,
        rng.random(truth.shape) < false_fail[:, None, None],
        rng.random(truth.shape) < 0.1,
    )
    judge = np.where(flip, 1 - truth, truth).ravel()
    truth = truth.ravel()
    item = np.repeat(np.arange(clusters * per), epochs)
    cluster = item // per
    group = np.zeros(item.size, np.int64)
    by_item = calibrate(judge, truth, item, group, groups=1, resamples=400)
    by_cluster = calibrate(judge, truth, cluster, group, groups=1, resamples=400)
    se_item, se_cluster = by_item.rates.sensitivity, by_cluster.rates.sensitivity
    assert se_item.value == se_cluster.value
    assert se_cluster.high - se_cluster.low > 1.3 * (se_item.high - se_item.low)
    assert se_cluster.design_effect > se_item.design_effect


def test_the_wilson_interval_is_scipys_at_whole_counts():
    from scipy import stats

    from itemeval.judging import Rate

    for k, n in [(0, 5), (3, 10), (97, 100), (412, 500), (20, 20)]:
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        rate = Rate.of(k, n)
        assert (rate.low, rate.high) == pytest.approx((ci.low, ci.high), abs=1e-12)
    halved = Rate.of(40, 100, design_effect=2.0)  # as wide as 20 of 50
    ci = stats.binomtest(20, 50).proportion_ci(confidence_level=0.95, method="wilson")
    assert (halved.low, halved.high) == pytest.approx((ci.low, ci.high), abs=1e-12)
