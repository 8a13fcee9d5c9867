"""Adaptive runs on simulated banks of known truth: the prediction's interval, the strata, the
seed, the thin-calibration fallback and the time to choose a shard."""

from __future__ import annotations

import time

import numpy as np

from itemeval.irt import Adaptive, Bank, choose, fit_irt


def world(seed: int, items: int = 800, models: int = 8):
    rng = np.random.default_rng(seed)
    strata = rng.integers(0, 4, items)
    a = rng.lognormal(0, 0.4, items)
    b = rng.normal(0, 1, items)
    ability = np.linspace(-1.2, 1.5, models)
    p = 1 / (1 + np.exp(-a * (ability[:, None] - b)))
    return (rng.random(p.shape) < p).astype(float), strata


def run(answers, strata, model, calibration, seed=0, max_share=0.3):
    fit = fit_irt(answers[calibration], np.ones_like(answers[calibration]), "2pl")
    adaptive = Adaptive(
        Bank(fit.a, fit.d, strata, len(calibration)),
        target_se=0.0,
        max_share=max_share,
        seed=seed,
    )
    while not adaptive.done:
        shard = adaptive.next_shard()
        adaptive.record(shard, answers[model, shard], np.ones(len(shard)))
    return adaptive


def test_predicted_accuracy_intervals_hold_the_full_run_accuracy():
    inside, errors = [], []
    for seed in range(6):
        answers, strata = world(seed)
        for model in (0, 4, 7):
            others = [m for m in range(len(answers)) if m != model]
            est = run(answers, strata, model, others, seed).last
            assert est.method == "irt"
            low, high = est.interval
            actual = answers[model].mean()
            inside.append(low <= actual <= high)
            errors.append(abs(est.predicted - actual))
    assert np.mean(inside) >= 0.8
    assert np.mean(errors) < 0.03


def test_shards_are_stratified_reproducible_and_within_the_share():
    answers, strata = world(1)
    first = run(answers, strata, 3, [0, 1, 2, 4, 5, 6, 7], seed=5, max_share=0.2)
    again = run(answers, strata, 3, [0, 1, 2, 4, 5, 6, 7], seed=5, max_share=0.2)
    assert (first.answered == again.answered).all()
    assert first.answered.sum() <= 0.2 * len(strata)
    share = np.bincount(strata[first.answered], minlength=4) / first.answered.sum()
    assert np.abs(share - np.bincount(strata) / len(strata)).max() < 0.03


def test_thin_calibration_falls_back_to_a_stratified_sample():
    answers, strata = world(2)
    adaptive = run(answers, strata, 3, [0, 7])  # 2 calibrating models: too few
    est = adaptive.last
    assert est.method == "sample" and np.isnan(est.ability)
    low, high = est.interval
    assert low < answers[3].mean() < high
    assert not adaptive.drawn.any()  # no item chosen by an untrusted calibration


def test_choosing_a_shard_of_a_20000_item_bank_takes_well_under_a_second():
    rng = np.random.default_rng(0)
    n = 20_000
    bank = Bank(rng.lognormal(0, 0.4, n), rng.normal(0, 1, n), rng.integers(0, 57, n), 50)
    answered = rng.random(n) < 0.1
    started = time.process_time()
    chosen = choose(bank, answered, 0.3, 100, rng)
    assert time.process_time() - started < 1.0
    assert len(chosen) == 100 and not answered[chosen].any()


def test_information_weighted_draws_predict_without_bias_where_the_bank_misfits():
    """The bank says its hard items are hard; they are coin flips. The draw favours the items
    near the ability (so it rarely draws the hard ones): weighting each residual by its draw
    probability keeps the prediction unbiased (ignoring the probabilities: -2.8 points), and
    the intervals hold about as often as they claim."""
    rng = np.random.default_rng(7)
    n = 400
    strata = rng.integers(0, 4, n)
    a, d = rng.lognormal(0, 0.3, n), rng.normal(0, 2.5, n)
    truth = np.where(d < -1.0, 0.5, 1 / (1 + np.exp(-d)))
    answers = (rng.random(n) < truth).astype(float)
    bank = Bank(a, d, strata, 9)
    errors, inside = [], []
    for seed in range(150):
        run = Adaptive(bank, target_se=0.0, max_share=0.2, shard_size=20, floor=0.2, seed=seed)
        while not run.done:
            shard = run.next_shard()
            run.record(shard, answers[shard], np.ones(len(shard)))
        errors.append(run.last.predicted - answers.mean())
        low, high = run.last.interval
        inside.append(low <= answers.mean() <= high)
    assert abs(np.mean(errors)) < 3 * np.std(errors) / np.sqrt(len(errors))
    assert np.mean(inside) >= 0.88
