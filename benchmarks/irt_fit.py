"""How fast and how right the IRT fit is: speed, the ability intervals' coverage of known
abilities, and the figures of a real response matrix.

    .venv/bin/python benchmarks/irt_fit.py [--conditions 50] [--items 20000] [--epochs 3]
    .venv/bin/python benchmarks/irt_fit.py --coverage --seeds 50
    .venv/bin/python benchmarks/irt_fit.py --eee DIR     # Every Eval Ever *_samples.jsonl
    PYTHONPATH=/path/to/girth .venv/bin/python benchmarks/irt_fit.py --girth-items 2000

Speed (the default): a simulated bank (abilities ~ N(0,1), discriminations ~ lognormal(0, 0.3),
difficulties ~ N(0,1), binomial counts over the epochs). Prints, for the 1PL fit, the 2PL fit
(started from the 1PL one) and the 5-fold model choice `analyze irt` runs (at most 5,000
items): wall and CPU seconds, iterations, and the rank correlation of the estimates with the
truth; how many distinct columns of counts the items have (the fit runs over those), and the
process's peak RSS. `--plain` fits every item (no grouping of equal columns), for comparison;
`--conditions 4 --items 1250000 --epochs 1` is the shape of a 10M-row store of 4 models.

`--coverage`: simulated studies with known abilities, answers drawn from a 1PL, a 2PL or a 3PL
(a guessing floor no fitted model has); per scenario and seed the model choice, and for the
chosen model, each model, and each model with its items held fixed, how often the 95% interval
of the standardized ability (`IrtFit.standardized`) holds the truth's standard score. Also the
flags: studies with a false flag, and planted key errors found.

`--eee DIR`: every Every Eval Ever instance file (`*_samples.jsonl`) under DIR, one condition per
model, one item per evaluation and sample id, right when `evaluation.is_correct` (else score
>= 0.5): the model choice, the flags, the difficulties that -d/a would have given.

With `--girth-items N`, girth's joint (`rasch_jml`, `twopl_jml`) and marginal (`twopl_mml`)
fits run on the first N items' first epoch (girth takes 0/1 answers, not counts) for
comparison; their time grows with the items, so compare per item.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from itemeval.irt import (
    FLAG_Q,
    HELD_OUT_ITEMS,
    discrimination_q,
    fit_irt,
    held_out_loglik,
    item_patterns,
    standardize,
)

#: (name, conditions, items, epochs, answers' model, guessing floor)
SCENARIOS = [
    ("3 x 200 x 3, 2PL", 3, 200, 3, "2pl", 0.0),
    ("6 x 116 x 3, 2PL (the demo's shape)", 6, 116, 3, "2pl", 0.0),
    ("20 x 300 x 1, 1PL", 20, 300, 1, "1pl", 0.0),
    ("20 x 300 x 1, 2PL", 20, 300, 1, "2pl", 0.0),
    ("40 x 500 x 3, 2PL", 40, 500, 3, "2pl", 0.0),
    ("6 x 116 x 3, 3PL (guessing 0.25)", 6, 116, 3, "2pl", 0.25),
    ("20 x 300 x 1, 3PL (guessing 0.25)", 20, 300, 1, "2pl", 0.25),
    ("40 x 500 x 3, 3PL (guessing 0.25)", 40, 500, 3, "2pl", 0.25),
]


def timed(fn):  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def simulate(seed: int, conditions: int, items: int, epochs: int, model: str, guess: float):
    """Known abilities, the answers, and each item's discrimination (negated for planted key
    errors: the first item of every study of 20+ conditions has its answers flipped)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, conditions)
    a = np.ones(items) if model == "1pl" else rng.lognormal(0, 0.5, items)
    b = rng.normal(0, 1, items)
    p = guess + (1 - guess) / (1 + np.exp(-(np.outer(theta, a) - a * b)))
    trials = np.full((conditions, items), epochs)
    return theta, rng.binomial(trials, p), trials


def speed(args: argparse.Namespace) -> None:
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
    patterns, wall, cpu = timed(lambda: item_patterns(correct, trials))
    print(
        f"distinct columns of counts: {len(patterns.count):,} ({wall:.2f} s wall, {cpu:.2f} s CPU)"
    )
    compress = not args.plain
    one, wall, cpu = timed(lambda: fit_irt(correct, trials, "1pl", compress=compress))
    total_wall, total_cpu = total_wall + wall, total_cpu + cpu
    print(
        f"itemeval 1PL: {wall:6.2f} s wall, {cpu:6.2f} s CPU, {one.iterations} sweeps; "
        f"rank corr. ability {spearmanr(one.theta, theta)[0]:.4f}, "
        f"difficulty {spearmanr(one.b, b)[0]:.4f}"
    )
    two, wall, cpu = timed(lambda: fit_irt(correct, trials, "2pl", start=one, compress=compress))
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
        f"model choice ({held.folds}-fold, {len(cols):,} items): {wall:6.2f} s wall, "
        f"{cpu:6.2f} s CPU; log-lik per answer: accuracy only {h['base']:.4f}, "
        f"1PL {h['1pl']:.4f}, 2PL {h['2pl']:.4f}; chosen {held.chosen.upper()}"
    )
    print(f"all of `analyze irt`'s fitting: {total_wall:.2f} s wall, {total_cpu:.2f} s CPU")
    ratio = two.theta_se / two.theta_se_fixed
    print(
        f"2PL ability SE with the items' error / with the items fixed: {ratio.min():.2f}-"
        f"{ratio.max():.2f}"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:,.0f} MB")
    if args.girth_items:
        girth(args, rng, p, b)


def girth(args: argparse.Namespace, rng: np.random.Generator, p: np.ndarray, b: np.ndarray):
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


def covers(z: np.ndarray, se: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return np.abs(z - truth) <= 1.959963984540054 * se


def coverage(seeds: int) -> None:
    print(
        f"Coverage of known abilities by 95% intervals, {seeds} simulated studies per row "
        "(share of the conditions' intervals holding the truth). 'standardized': the ability "
        "as `analyze irt` reports it (standard scores among the conditions) against the "
        "truth's standard score; 'own scale': the fit's theta against the true theta. Each "
        "cell: SEs from the joint information / with the items held fixed. SE ratio: median "
        "joint / fixed on the own scale. Flags: studies with any false flag; planted key "
        "errors found (20+ conditions: item 0's answers flipped)\n"
    )
    print(
        "| answers | 2PL chosen | chosen, standardized | 1PL standardized | 2PL standardized "
        "| 1PL own scale | 2PL own scale | SE ratio 1PL, 2PL | false flags | planted found |"
    )
    print("| --- " + "| ---: " * 9 + "|")
    for name, conditions, items, epochs, model, guess in SCENARIOS:
        hits: dict[str, list[bool]] = {}
        chose_two = false_flags = found = 0
        ratios: dict[str, list[float]] = {"1pl": [], "2pl": []}
        planted = conditions >= 20
        for seed in range(seeds):
            theta, correct, trials = simulate(seed, conditions, items, epochs, model, guess)
            if planted:
                correct[:, 0] = trials[:, 0] - correct[:, 0]
            truth = (theta - theta.mean()) / theta.std(ddof=1)
            one = fit_irt(correct, trials, "1pl")
            two = fit_irt(correct, trials, "2pl", start=one)
            held = held_out_loglik(correct, trials, seed=seed)
            chose_two += held.chosen == "2pl"
            fits = {"1pl": one, "2pl": two}
            for key, fit in fits.items():
                fixed = replace(fit, theta_cov=np.diag(fit.theta_se_fixed**2))
                for label, f in (("joint", fit), ("fixed", fixed)):
                    hits.setdefault(f"{key} std {label}", []).extend(
                        covers(*f.standardized(), truth)
                    )
                    se = np.sqrt(np.diag(f.theta_cov))
                    hits.setdefault(f"{key} own {label}", []).extend(covers(f.theta, se, theta))
                ratios[key] += list(fit.theta_se / fit.theta_se_fixed)
            hits.setdefault("chosen", []).extend(covers(*fits[held.chosen].standardized(), truth))
            _, q = discrimination_q(two, correct, trials)
            flagged = q <= FLAG_Q
            false_flags += bool(flagged[int(planted) :].any())
            found += bool(planted and flagged[0])
        share = {k: f"{np.mean(v):.0%}" for k, v in hits.items()}

        def pair(key: str, share: dict[str, str] = share) -> str:
            return f"{share[key + ' joint']} / {share[key + ' fixed']}"

        print(
            f"| {name} | {chose_two}/{seeds} | {share['chosen']} | {pair('1pl std')} | "
            f"{pair('2pl std')} | {pair('1pl own')} | {pair('2pl own')} | "
            f"{np.median(ratios['1pl']):.2f}, {np.median(ratios['2pl']):.2f} | "
            f"{false_flags}/{seeds} | {f'{found}/{seeds}' if planted else '-'} |",
            flush=True,
        )


def read_eee(folder: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Every `*_samples.jsonl` under `folder` as (correct, trials, models)."""
    cells: dict[tuple[str, tuple[str, str]], int] = {}
    for path in sorted(folder.rglob("*_samples.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            evaluation = row.get("evaluation") or {}
            right = evaluation.get("is_correct")
            if right is None:
                score = evaluation.get("score")
                if score is None:
                    continue
                right = float(score) >= 0.5
            key = (row["model_id"], (row.get("evaluation_name", ""), str(row["sample_id"])))
            cells.setdefault(key, int(bool(right)))  # the first metric of a sample counts
    models = sorted({m for m, _ in cells})
    items = sorted({i for _, i in cells})
    row_of = {m: r for r, m in enumerate(models)}
    col_of = {i: c for c, i in enumerate(items)}
    correct = np.zeros((len(models), len(items)))
    trials = np.zeros_like(correct)
    for (model, item), right in cells.items():
        correct[row_of[model], col_of[item]] = right
        trials[row_of[model], col_of[item]] = 1
    return correct, trials, models


def real(folder: Path) -> None:
    correct, trials, models = read_eee(folder)
    print(f"{folder}: {len(models)} models x {correct.shape[1]:,} items")
    if len(models) < 3:
        print("fewer than 3 models: `analyze irt` refuses this matrix")
        return
    (one, w1, _), (two, w2, _) = (
        timed(lambda: fit_irt(correct, trials, "1pl")),
        timed(lambda: fit_irt(correct, trials, "2pl", start=fit_irt(correct, trials, "1pl"))),
    )
    cols = np.arange(correct.shape[1])
    if len(cols) > HELD_OUT_ITEMS:
        cols = np.sort(np.random.default_rng(0).choice(len(cols), HELD_OUT_ITEMS, replace=False))
    held, wall, _ = timed(lambda: held_out_loglik(correct[:, cols], trials[:, cols]))
    print(f"fits {w1:.1f} s (1PL), {w2:.1f} s (2PL); model choice {wall:.1f} s")
    print(f"chosen {held.chosen.upper()}: {held.reason}; per answer {held.per_answer}")
    raw = np.abs(two.b) > 10
    print(
        f"|-d/a| > 10 for {int(raw.sum()):,} items (largest {np.nanmax(np.abs(two.b)):,.0f}); "
        f"difficulty reported for {int(two.b_defined.sum()):,} items, largest |b| there "
        f"{np.abs(two.b[two.b_defined]).max(initial=0):.2f}"
    )
    _, q = discrimination_q(two, correct, trials)
    print(
        f"a < 0 for {int((two.a < 0).sum()):,} items; flagged (BH q <= {FLAG_Q}): "
        f"{int((q <= FLAG_Q).sum()):,}"
    )
    se = standardize(one.theta, one.theta_cov)[1]
    print(f"1PL standardized ability SE: {se.min():.3f}-{se.max():.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conditions", type=int, default=50)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--girth-items", type=int, default=0)
    parser.add_argument("--plain", action="store_true", help="fit every item, not its column")
    parser.add_argument("--coverage", action="store_true")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--eee", type=Path)
    args = parser.parse_args()
    if args.coverage:
        coverage(args.seeds)
    elif args.eee:
        real(args.eee)
    else:
        speed(args)


if __name__ == "__main__":
    main()
