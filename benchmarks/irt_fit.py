"""How fast and how right the IRT fit is: itemeval's numpy fit, and girth for comparison.

    .venv/bin/python benchmarks/irt_fit.py [--conditions 50] [--items 20000] [--epochs 3]
    PYTHONPATH=/path/to/girth .venv/bin/python benchmarks/irt_fit.py --girth-items 2000

A simulated bank (abilities ~ N(0,1), discriminations ~ lognormal(0, 0.3), difficulties ~ N(0,1),
binomial counts over the epochs). Prints, for the 1PL fit, the 2PL fit (started from the 1PL
one) and the held-out comparison `analyze irt` runs (at most 5,000 items): wall and CPU
seconds, iterations, and the rank correlation of the estimates with the truth.

With `--girth-items N`, girth's joint (`rasch_jml`, `twopl_jml`) and marginal (`twopl_mml`)
fits run on the first N items' first epoch (girth takes 0/1 answers, not counts) for
comparison; their time grows with the items, so compare per item.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import spearmanr

from itemeval.irt import HELD_OUT_ITEMS, fit_irt, held_out_loglik


def timed(fn):  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conditions", type=int, default=50)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--girth-items", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    theta = rng.normal(0, 1, args.conditions)
    a = rng.lognormal(0, 0.3, args.items)
    b = rng.normal(0, 1, args.items)
    p = 1 / (1 + np.exp(-(np.outer(theta, a) - a * b)))
    trials = np.full((args.conditions, args.items), args.epochs)
    correct = rng.binomial(trials, p)
    print(
        f"bank: {args.conditions} conditions x {args.items:,} items x {args.epochs} epochs "
        f"({args.conditions * args.items * args.epochs:,} answers)"
    )
    total_wall = total_cpu = 0.0
    one, wall, cpu = timed(lambda: fit_irt(correct, trials, "1pl"))
    total_wall, total_cpu = total_wall + wall, total_cpu + cpu
    print(
        f"itemeval 1PL: {wall:6.2f} s wall, {cpu:6.2f} s CPU, {one.iterations} sweeps; "
        f"rank corr. ability {spearmanr(one.theta, theta)[0]:.4f}, "
        f"difficulty {spearmanr(one.b, b)[0]:.4f}"
    )
    two, wall, cpu = timed(lambda: fit_irt(correct, trials, "2pl", start=one))
    total_wall, total_cpu = total_wall + wall, total_cpu + cpu
    print(
        f"itemeval 2PL: {wall:6.2f} s wall, {cpu:6.2f} s CPU, {two.iterations} sweeps; "
        f"rank corr. ability {spearmanr(two.theta, theta)[0]:.4f}, "
        f"difficulty {spearmanr(two.b, b)[0]:.4f}, discrimination {spearmanr(two.a, a)[0]:.4f}"
    )
    cols = np.arange(args.items)
    if args.items > HELD_OUT_ITEMS:
        cols = np.sort(np.random.default_rng(0).choice(args.items, HELD_OUT_ITEMS, replace=False))
    held, wall, cpu = timed(lambda: held_out_loglik(correct[:, cols], trials[:, cols]))
    total_wall, total_cpu = total_wall + wall, total_cpu + cpu
    h = held.per_answer
    print(
        f"held-out ({len(cols):,} items): {wall:6.2f} s wall, {cpu:6.2f} s CPU; "
        f"log-lik per answer: accuracy only {h['base']:.4f}, 1PL {h['1pl']:.4f}, "
        f"2PL {h['2pl']:.4f}"
    )
    print(f"all of `analyze irt`'s fitting: {total_wall:.2f} s wall, {total_cpu:.2f} s CPU")
    if args.girth_items:
        import girth

        n = args.girth_items
        binary = (rng.random((args.conditions, n)) < p[:, :n]).astype(int).T  # items x people
        ours, wall, cpu = timed(lambda: fit_irt(binary.T, np.ones_like(binary.T), "2pl"))
        print(f"\non {n:,} items, one epoch: itemeval 2PL {wall:.2f} s wall, {cpu:.2f} s CPU")
        for name in ("rasch_jml", "twopl_jml", "twopl_mml"):
            fit, wall, cpu = timed(lambda name=name: getattr(girth, name)(binary))
            corr = spearmanr(fit["Difficulty"], b[:n])[0]
            print(
                f"girth {name}: {wall:.2f} s wall, {cpu:.2f} s CPU, rank corr. difficulty "
                f"{corr:.4f} (itemeval 2PL {spearmanr(ours.b, b[:n])[0]:.4f})"
            )


if __name__ == "__main__":
    main()
