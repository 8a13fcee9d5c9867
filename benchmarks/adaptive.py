"""Adaptive runs on a simulated bank: how few items give how good a prediction.

    .venv/bin/python benchmarks/adaptive.py [--items 2000] [--models 10] [--seed 0]
        [--target-se 0.015] [--max-share 0.2] [--shard 20]

The bank: `--items` items in 8 subjects; each item has a discrimination (lognormal), a
difficulty, and, for the multiple-choice half of the subjects, a guessing floor of 0.25. Each of
`--models` models has an ability (spread evenly from -1.5 to 2) and a skill per subject (its
ability plus N(0, 0.4)). A model's answer to an item is drawn once from this 3PL model with
per-subject skill, which is richer than the 2PL model with one ability that is fitted.

For each model in turn: calibrate the 2PL on the other models' full runs (`fit_irt`), then run
it adaptively (`itemeval.irt.adaptive`), answering with the same draws as its full run. Prints
the share of items used, the mean absolute error of the predicted full accuracy against the
actual full-run accuracy, Kendall's tau between the adaptive and the full ranking, and the calls
and dollars saved (calls counted in this process; dollars at a nominal $0.0039 a call: 300
input and 200 output tokens at $3 and $15 per million). Then the same with only 3 calibrating
models (too few: the run falls back to a stratified random sample with an ordinary interval)
and what the IRT prediction would have been.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import kendalltau

from itemeval.irt.adaptive import MIN_CALIBRATION, Adaptive, Bank, Estimate
from itemeval.irt.fit import fit_irt

USD_PER_CALL = 300 * 3e-6 + 200 * 15e-6
SUBJECTS = 8


def simulate(items: int, models: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Answers (models x items, 0/1) and each item's subject."""
    rng = np.random.default_rng(seed)
    subject = rng.integers(0, SUBJECTS, items)
    a = rng.lognormal(0.0, 0.5, items)
    b = rng.normal(0.0, 1.2, items)
    guess = np.where(subject % 2 == 0, 0.25, 0.0)[np.arange(items)]
    ability = np.linspace(-1.5, 2.0, models)
    skill = ability[:, None] + rng.normal(0.0, 0.4, (models, SUBJECTS))
    theta = skill[:, subject]  # models x items
    p = guess + (1 - guess) / (1 + np.exp(-a * (theta - b)))
    return (rng.random(p.shape) < p).astype(np.float64), subject


def run_one(
    answers: np.ndarray,
    subject: np.ndarray,
    model: int,
    calibration: list[int],
    args: argparse.Namespace,
    min_calibration: int = MIN_CALIBRATION,
) -> tuple[Estimate, int, float]:
    """Calibrate on `calibration`, run `model` adaptively: its estimate, items used, and the
    slowest choice of a shard (seconds)."""
    ones = np.ones_like(answers[calibration])
    fit = fit_irt(answers[calibration], ones, "2pl")
    bank = Bank(fit.a, fit.d, subject, len(calibration), min_calibration)
    run = Adaptive(
        bank,
        target_se=args.target_se,
        max_share=args.max_share,
        shard_size=args.shard,
        at_random=args.at_random,
        seed=args.seed + model,
    )
    slowest = 0.0
    while not run.done:
        started = time.perf_counter()
        shard = run.next_shard()
        slowest = max(slowest, time.perf_counter() - started)
        if not len(shard):
            break
        run.record(shard, answers[model, shard], np.ones(len(shard)))
    assert run.last is not None
    return run.last, int(run.answered.sum()), slowest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target-se", type=float, default=0.015)
    parser.add_argument("--max-share", type=float, default=0.2)
    parser.add_argument("--shard", type=int, default=20)
    parser.add_argument("--at-random", type=float, default=1.0, help="share of a shard at random")
    args = parser.parse_args()
    answers, subject = simulate(args.items, args.models, args.seed)
    actual = answers.mean(1)
    rng = np.random.default_rng(args.seed)
    rows = []
    thin = []
    for m in range(args.models):
        others = [o for o in range(args.models) if o != m]
        est, used, slowest = run_one(answers, subject, m, others, args)
        three = sorted(rng.choice(others, 3, replace=False).tolist())
        fallback, used3, _ = run_one(answers, subject, m, three, args)
        would = run_one(answers, subject, m, three, args, min_calibration=1)[0]  # not shown
        rows.append((m, est, used, slowest))
        thin.append((fallback, used3, would))
    print(
        f"bank: {args.items:,} items, {SUBJECTS} subjects, {args.models} models; "
        f"target SE {args.target_se}, max share {args.max_share:.0%}, shards of {args.shard}"
    )
    print("\nmodel  full acc.  predicted [95% interval]   items used  inside")
    inside = 0
    for m, est, used, _ in rows:
        low, high = est.interval
        hit = low <= actual[m] <= high
        inside += hit
        print(
            f"{m:5d}  {actual[m]:9.3f}  {est.predicted:9.3f} [{low:.3f}, {high:.3f}]  "
            f"{used:6d} ({used / args.items:4.0%})  {'yes' if hit else 'NO'}"
        )
    predicted = np.array([r[1].predicted for r in rows])
    used_all = sum(r[2] for r in rows)
    share = used_all / (args.items * args.models)
    mae = float(np.abs(predicted - actual).mean())
    tau = kendalltau(predicted, actual)[0]
    calls_full = args.items * args.models
    print(f"\nshare of items used: {share:.1%} (target <= 20%)")
    print(f"mean absolute error of the predicted full accuracy: {100 * mae:.2f} points (<= 2)")
    print(f"intervals holding the full-run accuracy: {inside}/{len(rows)}")
    print(f"Kendall's tau, adaptive vs full ranking: {tau:.3f} (target >= 0.9)")
    print(
        f"calls: {used_all:,} of {calls_full:,} ({calls_full - used_all:,} saved); dollars "
        f"${used_all * USD_PER_CALL:.2f} of ${calls_full * USD_PER_CALL:.2f} "
        f"(${(calls_full - used_all) * USD_PER_CALL:.2f} saved, at ${USD_PER_CALL:.4f} a call)"
    )
    print(f"slowest choice of a shard: {1000 * max(r[3] for r in rows):.1f} ms")
    fb = np.array([t[0].predicted for t in thin])
    would = np.array([t[2].predicted for t in thin])
    print(
        f"\nwith 3 calibrating models (< {MIN_CALIBRATION}: the run falls back to a stratified "
        f"random sample of {args.max_share:.0%}):"
    )
    print(
        f"  fallback sample accuracy: MAE {100 * np.abs(fb - actual).mean():.2f} points, "
        f"tau {kendalltau(fb, actual)[0]:.3f}, mean 95% half-width "
        f"{100 * 1.96 * np.mean([t[0].predicted_se for t in thin]):.2f} points"
    )
    print(
        f"  the IRT prediction it declines to make: MAE {100 * np.abs(would - actual).mean():.2f}"
        f" points, tau {kendalltau(would, actual)[0]:.3f}"
    )


if __name__ == "__main__":
    main()
