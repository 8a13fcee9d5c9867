"""The demo's weakest model run adaptively in the demo study against a real `itemeval
sim-server` on 127.0.0.1, then fully: the share of its items the adaptive run used, its
predicted full accuracy and interval, the accuracy the full run measured, and the calls and
dollars saved as the server counted them (`/_sim/stats`) and as the store holds them (`usd`).

    .venv/bin/python benchmarks/adaptive_study.py [--max-share 0.3] [--seeds 10]

configs/demo.yaml as it is (three models, four datasets, two prompts, three replications, a
scorer and three judges), against a sim-server this script starts (`--port 0`, 127.0.0.1),
each step on its own store and response cache, with `adaptive: {max_share, seed}` on sim/weak,
calibrated on this study (the other models' stored results). Steps:

1. the full study, every model on every item: the server's answers and the stored `usd`;
2. on a fresh store, `itemeval run` with sim/weak adaptive: strong and medium on every item,
   then sim/weak's two conditions adaptively; the server's answers and the stored `usd`;
3. `itemeval run --no-adaptive` on that store: the items sim/weak did not answer (the server
   answers only what was left: every answer of step 2 is reused; steps 2 and 3 together make
   the calls of step 1);
4. with everything stored, the adaptive run again with seeds 1..N-1 (the server answers
   nothing: stored cells make no call): how often the printed interval holds the full run's
   accuracy.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pyarrow.compute as pc
import yaml

from itemeval.config import load_study
from itemeval.irt import read_adaptive, study_responses
from itemeval.planning import make_plan
from itemeval.runtime import RunOptions, run_study
from itemeval.store import StudyStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_server import answered, sim_server, since

REPO = Path(__file__).resolve().parents[1]
OPTIONS = RunOptions(no_ray=True, yes=True, quiet=True)


def stored_usd(study_path: Path) -> float:
    """The `usd` of every stored row (solutions and grades, read without deduplication)."""
    store = StudyStore.open(load_study(study_path).store_url)
    total = 0.0
    for stage in ("solutions", "grades"):
        rows = store.read(stage, columns=["usd"], dedup=False)
        total += float(pc.sum(rows.column("usd")).as_py() or 0.0) if rows.num_rows else 0.0
    return total


def study_file(
    folder: Path, url: str, max_share: float | None, seed: int, name: str = "study"
) -> Path:
    data = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    for d in data["datasets"]:
        d["path"] = str(REPO / "configs" / d["path"])
    data["endpoints"]["sim-server"]["base_url"] = f"{url}/v1"
    data["runtime"] = {}
    data["store"] = str(folder / f"{name}-store")
    data["cache"] = {"enabled": True, "location": str(folder / f"{name}-cache")}
    if name == "others":  # the study without sim/weak's conditions (its judge stays)
        data["models"] = [m for m in data["models"] if m["id"] != "sim/weak"]
    for m in data["models"]:
        if m["id"] == "sim/weak" and max_share is not None:
            m["adaptive"] = {"calibration": "study", "max_share": max_share, "seed": seed}
    path = folder / f"{name}-{seed}.yaml"
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
    with sim_server() as url:
        full_path = study_file(folder, url, None, 0, "full")
        before = answered(url)
        run_study(load_study(full_path), OPTIONS)
        full_calls, full_usd = since(url, before), stored_usd(full_path)
        others_path = study_file(folder, url, None, 0, "others")
        before = answered(url)
        run_study(load_study(others_path), OPTIONS)
        others_calls, others_usd = since(url, before), stored_usd(others_path)

        path = study_file(folder, url, args.max_share, 0)
        study = load_study(path)
        items = make_plan(study, with_pending=False).items.num_rows
        before = answered(url)
        first = run_study(study, OPTIONS)
        adaptive_calls, adaptive_usd = since(url, before), stored_usd(path)
        print(first.message)
        weak_before = weak_counts(path)
        results = {r["slug"]: r for r in read_adaptive(make_plan(study, with_pending=False))}
        before = answered(url)
        rest = run_study(study, replace(OPTIONS, adaptive=False))
        rest_calls = since(url, before)
        after = weak_counts(path)
        actual = {s: k / n for s, (k, n, _) in after.items()}
        graded = sum(n for _, n, _ in weak_before.values())
        cells = sum(c for *_, c in weak_before.values())
        print(
            f"\n{items} items. Adaptive run of sim/weak: {graded:,} graded answers ({cells:,} "
            f"condition x item cells of {2 * items}); the full run then generated "
            f"{rest.stages['generate'].counts.planned:,} cells (sim/weak's rest: "
            f"{2 * items * 3 - graded:,} at 3 epochs)."
        )
        saved = full_calls["all"] - adaptive_calls["all"]
        weak_full = full_calls["all"] - others_calls["all"]
        weak_adaptive = adaptive_calls["all"] - others_calls["all"]
        weak_usd = (full_usd - others_usd, adaptive_usd - others_usd)
        print(
            f"\nCounted at the sim-server ({url}/_sim/stats):\n"
            f"  full study:             {full_calls['all']:,} answers {_models(full_calls)}, "
            f"stored usd ${full_usd:.4f}\n"
            f"  sim/weak adaptive:      {adaptive_calls['all']:,} answers "
            f"{_models(adaptive_calls)}, stored usd ${adaptive_usd:.4f}\n"
            f"  saved:                  {saved:,} answers ({saved / full_calls['all']:.0%}), "
            f"${full_usd - adaptive_usd:.4f} ({(full_usd - adaptive_usd) / full_usd:.0%})\n"
            f"  then --no-adaptive:     {rest_calls.get('all', 0):,} answers "
            f"{_models(rest_calls)}; adaptive + rest = "
            f"{adaptive_calls['all'] + rest_calls.get('all', 0):,} (full study: "
            f"{full_calls['all']:,}), stored usd ${stored_usd(path):.4f}\n"
            f"  without sim/weak:       {others_calls['all']:,} answers, stored usd "
            f"${others_usd:.4f}\n"
            f"  sim/weak's conditions (generate and grade): {weak_adaptive:,} answers adaptively "
            f"of {weak_full:,} fully ({weak_adaptive / weak_full:.0%}), ${weak_usd[1]:.4f} of "
            f"${weak_usd[0]:.4f} ({weak_usd[1] / weak_usd[0]:.0%})"
        )
        held = total = 0
        before = answered(url)
        for seed in range(args.seeds):
            if seed:
                study = load_study(study_file(folder, url, args.max_share, seed))
                run_study(study, OPTIONS)
                results = {
                    r["slug"]: r for r in read_adaptive(make_plan(study, with_pending=False))
                }
            for slug, r in sorted(results.items()):
                inside = r["low"] <= actual[slug] <= r["high"]
                held += inside
                total += 1
                print(
                    f"seed {seed} {slug}: {r['answered']} of {r['items']} items "
                    f"({r['share']:.0%}), {r['method']}, predicted {r['predicted']:.1%} "
                    f"[{r['low']:.1%}, {r['high']:.1%}], full run {actual[slug]:.1%}"
                    f"{'' if inside else '  OUTSIDE'}"
                )
        replay = since(url, before).get("all", 0)
        print(f"\nIntervals holding the full run's accuracy: {held} of {total}")
        print(f"Answers the server gave for seeds 1..{args.seeds - 1} (all stored): {replay}")


def _models(calls: dict[str, int]) -> str:
    return "(" + ", ".join(f"{k} {v:,}" for k, v in sorted(calls.items()) if k != "all") + ")"


if __name__ == "__main__":
    main()
