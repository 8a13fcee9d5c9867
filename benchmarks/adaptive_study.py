"""The demo's weakest model run adaptively in the demo study, then fully: the share of its items
the adaptive run used, its predicted full accuracy and interval, the accuracy the full run
measured, and what the full run still had to call.

    .venv/bin/python benchmarks/adaptive_study.py [--max-share 0.3] [--seeds 10]

configs/demo.yaml as it is (three models, four datasets, two prompts, three replications, a
scorer and three judges), with the simulated provider in this process instead of the
sim-server, and `adaptive: {max_share, seed}` on sim/weak, calibrated on this study (the other
models' stored results). Steps:

1. `itemeval run`: strong and medium on every item, then sim/weak's two conditions adaptively;
2. `itemeval run --no-adaptive`: the items sim/weak did not answer (what it counts as planned
   is what was left: every answer of step 1 is reused);
3. with everything stored, the adaptive run again with seeds 1..N-1 (stored cells make no
   call): how often the printed interval holds the full run's accuracy.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

import yaml

from itemeval.config import load_study
from itemeval.irt.analysis import study_responses
from itemeval.irt.study_run import read_adaptive
from itemeval.planning.plan import make_plan
from itemeval.runtime.driver import RunOptions, run_study

REPO = Path(__file__).resolve().parents[1]
OPTIONS = RunOptions(no_ray=True, yes=True, quiet=True)


def study_file(folder: Path, max_share: float, seed: int) -> Path:
    data = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    for d in data["datasets"]:
        d["path"] = str(REPO / "configs" / d["path"])
    data["endpoints"]["sim-server"] = {"kind": "sim", "max_concurrency": 128}
    data["runtime"] = {}
    data["store"] = str(folder / "store")
    data["cache"] = {"enabled": True, "location": str(folder / "cache")}
    for m in data["models"]:
        if m["id"] == "sim/weak":
            m["adaptive"] = {"calibration": "study", "max_share": max_share, "seed": seed}
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def weak_counts(path: Path) -> dict[str, tuple[int, int, int]]:
    """Per sim/weak condition: right answers, graded answers, items answered."""
    table, _, _ = study_responses(make_plan(load_study(path), with_pending=False), hashed=False)
    out = {}
    for slug, model, k, n in zip(
        table.column("slug").to_pylist(),
        table.column("model").to_pylist(),
        table.column("correct").to_pylist(),
        table.column("trials").to_pylist(),
        strict=True,
    ):
        if model == "weak":
            a, b, c = out.get(slug, (0, 0, 0))
            out[slug] = (a + k, b + n, c + 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-share", type=float, default=0.3)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="adaptive-study-"))
    path = study_file(folder, args.max_share, 0)
    study = load_study(path)
    items = make_plan(study, with_pending=False).items.num_rows
    first = run_study(study, OPTIONS)
    print(first.message)
    before = weak_counts(path)
    results = {r["slug"]: r for r in read_adaptive(make_plan(study, with_pending=False))}
    full = run_study(study, replace(OPTIONS, adaptive=False))
    after = weak_counts(path)
    actual = {s: k / n for s, (k, n, _) in after.items()}
    answers = sum(n for _, n, _ in before.values())
    print(
        f"\n{items} items. Adaptive run of sim/weak: {answers:,} graded answers "
        f"({sum(c for *_, c in before.values()):,} condition x item cells of {2 * items}); "
        f"the full run then generated {full.stages['generate'].counts.planned:,} cells "
        f"(sim/weak's rest: {2 * items * 3 - answers:,} at 3 epochs)."
    )
    held = total = 0
    for seed in range(args.seeds):
        if seed:
            study = load_study(study_file(folder, args.max_share, seed))
            run_study(study, OPTIONS)
            results = {r["slug"]: r for r in read_adaptive(make_plan(study, with_pending=False))}
        for slug, r in sorted(results.items()):
            inside = r["low"] <= actual[slug] <= r["high"]
            held += inside
            total += 1
            print(
                f"seed {seed} {slug}: {r['answered']} of {r['items']} items ({r['share']:.0%}), "
                f"{r['method']}, predicted {r['predicted']:.1%} "
                f"[{r['low']:.1%}, {r['high']:.1%}], full run {actual[slug]:.1%}"
                f"{'' if inside else '  OUTSIDE'}"
            )
    print(f"\nIntervals holding the full run's accuracy: {held} of {total}")


if __name__ == "__main__":
    main()
