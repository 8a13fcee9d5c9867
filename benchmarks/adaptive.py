"""Adaptive runs on simulated banks: how few items give how good a prediction.

    .venv/bin/python benchmarks/adaptive.py [--items 2000] [--models 10] [--seed 0]
        [--seeds 1] [--target-se 0.015] [--max-share 0.2] [--shard 20]
        [--weight 1pl|2pl] [--floor 0.5] [--thin 3 ...]

The bank: `--items` items in 8 subjects; each item has a discrimination (lognormal), a
difficulty, and, for the multiple-choice half of the subjects, a guessing floor of 0.25. Each of
`--models` models has an ability (spread evenly from -1.5 to 2) and a skill per subject (its
ability plus N(0, 0.4)). A model's answer to an item is drawn once from this 3PL model with
per-subject skill, which is richer than the 2PL model with one ability that is fitted.

For each of `--seeds` banks, for each model in turn: calibrate the 2PL on the other models'
full runs (`fit_irt`), then run it adaptively (`itemeval.irt.adaptive`, the draw weighted by
`--weight` mixed with a uniform `--floor`; `--floor 1` is a uniform draw within strata),
answering with the same draws as its full run. Prints, per bank and over all of them, the share
of items used, the mean absolute error of the predicted full accuracy against the actual
full-run accuracy, how many 95% intervals hold the full-run accuracy, their mean half-width,
Kendall's tau between the predicted and the full ranking, and the calls and dollars saved
(counted in this process, at a nominal $0.0039 a call: 300 input and 200 output tokens at $3
and $15 per million; `benchmarks/adaptive_study.py` counts them at a real sim-server). Then,
for each `--thin K`, the same with K calibrating models drawn at random: the IRT prediction
made whatever `MIN_CALIBRATION` says, and, below it, the stratified sample the run falls back to.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import kendalltau

from itemeval.irt.adaptive import FLOOR, MIN_CALIBRATION, WEIGHT, Adaptive, Bank, Estimate
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
    seed: int,
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
        floor=args.floor,
        weight=args.weight,
        seed=seed * 1000 + model,
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


@dataclass
class Tally:
    """Predictions against the full runs' accuracies, over models and seeds."""

    errors: list[float] = field(default_factory=list)
    inside: list[bool] = field(default_factory=list)
    half: list[float] = field(default_factory=list)
    taus: list[float] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"MAE {100 * np.mean(self.errors):.2f} points, intervals holding the full accuracy "
            f"{sum(self.inside)}/{len(self.inside)} ({np.mean(self.inside):.0%}), mean 95% "
            f"half-width {100 * np.mean(self.half):.2f} points, tau {np.mean(self.taus):.3f} "
            f"(min {min(self.taus):.3f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--seeds", type=int, default=1, help="banks simulated, seed after seed")
    parser.add_argument("--target-se", type=float, default=0.015)
    parser.add_argument("--max-share", type=float, default=0.2)
    parser.add_argument("--shard", type=int, default=20)
    parser.add_argument(
        "--floor", type=float, default=FLOOR, help="uniform part of the draw (1: uniform)"
    )
    parser.add_argument("--weight", choices=["1pl", "2pl"], default=WEIGHT)
    parser.add_argument(
        "--thin",
        type=int,
        nargs="*",
        default=[3],
        help="also calibrate on this many other models (the IRT prediction made anyway)",
    )
    args = parser.parse_args()
    print(
        f"bank: {args.items:,} items, {SUBJECTS} subjects, {args.models} models; target SE "
        f"{args.target_se}, max share {args.max_share:.0%}, shards of {args.shard}, "
        f"weight {args.weight}, floor {args.floor}; seeds {args.seed}..{args.seed + args.seeds - 1}"
    )
    tally = Tally()
    thin = {k: Tally() for k in args.thin}
    fallback = {k: Tally() for k in args.thin if k < MIN_CALIBRATION}
    slowest = 0.0
    used_all = calls_full = 0
    for seed in range(args.seed, args.seed + args.seeds):
        answers, subject = simulate(args.items, args.models, seed)
        actual = answers.mean(1)
        rng = np.random.default_rng(seed)
        rows = []
        for m in range(args.models):
            others = [o for o in range(args.models) if o != m]
            rows.append(run_one(answers, subject, m, others, args, seed))
        ests, used = [r[0] for r in rows], [r[1] for r in rows]
        _add(tally, ests, actual)
        slowest = max([slowest, *(r[2] for r in rows)])
        used_all += sum(used)
        calls_full += args.items * args.models
        if args.seeds == 1:
            print("\nmodel  full acc.  predicted [95% interval]   items used  inside")
            for m, (est, n_used, _) in enumerate(rows):
                low, high = est.interval
                print(
                    f"{m:5d}  {actual[m]:9.3f}  {est.predicted:9.3f} [{low:.3f}, {high:.3f}]  "
                    f"{n_used:6d} ({n_used / args.items:4.0%})  "
                    f"{'yes' if low <= actual[m] <= high else 'NO'}"
                )
        errors, inside = tally.errors[-args.models :], tally.inside[-args.models :]
        print(
            f"seed {seed}: items used {sum(used) / (args.items * args.models):.1%}, MAE "
            f"{100 * np.mean(errors):.2f} points, intervals {sum(inside)}/{len(inside)}, "
            f"tau {tally.taus[-1]:.3f}"
        )
        for k in args.thin:
            few = [
                sorted(rng.choice([o for o in range(args.models) if o != m], k, replace=False))
                for m in range(args.models)
            ]
            got = [
                run_one(answers, subject, m, few[m], args, seed, 1)[0] for m in range(args.models)
            ]
            _add(thin[k], got, actual)
            if k in fallback:
                got = [
                    run_one(answers, subject, m, few[m], args, seed)[0] for m in range(args.models)
                ]
                _add(fallback[k], got, actual)
    share = used_all / calls_full
    print(f"\nshare of items used: {share:.1%} (max share {args.max_share:.0%}; target <= 20%)")
    print(f"all models, calibrated on the other {args.models - 1}: {tally.line()}")
    print("  (targets: MAE <= 2 points, tau >= 0.9)")
    print(
        f"calls: {used_all:,} of {calls_full:,} ({calls_full - used_all:,} saved); dollars "
        f"${used_all * USD_PER_CALL:.2f} of ${calls_full * USD_PER_CALL:.2f} "
        f"(${(calls_full - used_all) * USD_PER_CALL:.2f} saved, at ${USD_PER_CALL:.4f} a call; "
        "counted in this process: benchmarks/adaptive_study.py counts at the sim-server)"
    )
    print(f"slowest choice of a shard: {1000 * slowest:.1f} ms")
    for k in args.thin:
        print(f"calibrated on {k} other models, the IRT prediction: {thin[k].line()}")
        if k in fallback:
            print(
                f"  (< {MIN_CALIBRATION}: the run falls back to a stratified random sample of "
                f"{args.max_share:.0%}: {fallback[k].line()})"
            )


def _add(tally: Tally, estimates: list[Estimate], actual: np.ndarray) -> None:
    predicted = np.array([e.predicted for e in estimates])
    tally.errors += list(np.abs(predicted - actual))
    tally.inside += [
        e.interval[0] <= x <= e.interval[1] for e, x in zip(estimates, actual, strict=True)
    ]
    tally.half += [(e.interval[1] - e.interval[0]) / 2 for e in estimates]
    tally.taus.append(float(kendalltau(predicted, actual)[0]))


if __name__ == "__main__":
    main()
