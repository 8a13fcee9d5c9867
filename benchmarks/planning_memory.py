"""Planning's memory by phase: the driver's resident set while it plans N items x 2 models.

    .venv/bin/python benchmarks/planning_memory.py --items 100000 1000000
    .venv/bin/python benchmarks/planning_memory.py --items 300000 --store stored
    .venv/bin/python benchmarks/planning_memory.py --items 1000000 --store ungraded

The driver's peak at a million items is the end of planning (`memory_sweep.py` traces it), so
this measures planning alone, each case in a fresh process: `make_plan` (the scan of every
item, the pending sets, the calibration, the estimate), then what the driver does before its
first shard (`_release_planning_memory`, `commit_plan`), then the driver's side of the grade
stage: its pending set (`grade pending`) and every grade shard made in dispatch's order, each
dropped at once (`grade shards`: the solution index of each generate condition; a lower bound,
since dispatch holds up to its capacity of shards in flight). A sampler reads the process's
resident set from /proc every 10 ms and keeps the peak of each phase (a phase is the time inside
one of planning's steps; `+` marks the time after it until the next).

`--store` is what the store holds before planning (each prepared by a run with the simulated
provider in one process, generate and inline grades):

* `empty` (the default): a first run; nothing to grade;
* `stored`: every cell, so the pending sets stream 2N solutions and 2N grades: a re-run, a run
  after a crash, and the grade stage of a first run (whose generate shards graded inline);
* `ungraded`: every solution and no grade (the grades removed), so every solution gets a grade
  shard: the grade stage after a generate-only run, or of a judge.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from generated_data import write_dataset

PAGE = os.sysconf("SC_PAGE_SIZE")
#: planning's steps, timed as phases (looked up at call time by `make_plan`)
STEPS = ("_scan_datasets", "_pending", "_calibrate", "build_estimate")  # token tables: the scan


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * PAGE / 2**20


class PhaseSampler(threading.Thread):
    """The peak resident set of each phase, sampled every 10 ms."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.phase = "imports"
        self.peaks: dict[str, float] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.01):
            self.note()

    def note(self) -> None:
        phase, now = self.phase, rss_mb()
        self.peaks[phase] = max(self.peaks.get(phase, 0.0), now)

    def enter(self, phase: str) -> None:
        self.note()
        self.phase = phase
        self.note()

    def finish(self) -> None:
        self.note()
        self._halt.set()
        self.join()


def _study(folder: Path) -> Path:
    study = {
        "study": "planning",
        "store": str(folder / "store"),
        "datasets": [{"name": "sweep", "path": str(folder / "sweep")}],
        "endpoints": {"sim": {"kind": "sim", "max_concurrency": 512}},
        "models": [{"id": "sim/strong", "endpoint": "sim"}, {"id": "sim/weak", "endpoint": "sim"}],
        "facets": {"scorer": ["auto"]},
        "cache": {"enabled": False},
        "runtime": {"shard_size": 512, "workers": 2},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


STORES = ("empty", "stored", "ungraded")


def prepare(folder: Path, items: int, store: str) -> None:
    """The dataset, and the store `store` names (in a process of its own)."""
    write_dataset(folder / "sweep", items)
    path = _study(folder)
    if store != "empty":
        from itemeval.config import load_study
        from itemeval.runtime import RunOptions, run_study

        outcome = run_study(load_study(path), RunOptions(yes=True, quiet=True, no_ray=True))
        assert outcome.exit_code == 0, outcome.message
    if store == "ungraded":
        shutil.rmtree(folder / "store" / "grades")


def measure(folder: Path, study_file: Path | None = None) -> dict[str, Any]:
    """Plan the study in `folder` as `itemeval run` does, phase by phase (a fresh process);
    `study_file`: that study over its store as it is, read only (no commit)."""
    sampler = PhaseSampler()
    sampler.start()
    from itemeval._util.heap import limit_malloc_arenas
    from itemeval.config import load_study
    from itemeval.planning import _plan as planning
    from itemeval.runtime import _driver as driver

    limit_malloc_arenas()  # as the command's process does
    base = rss_mb()

    def timed(name: str, step: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            sampler.enter(name)
            try:
                return step(*args, **kwargs)
            finally:
                sampler.enter(name + "+")

        return run

    for name in STEPS:
        setattr(planning, name, timed(name, getattr(planning, name)))
    started = time.perf_counter()
    sampler.enter("load")
    study = load_study(study_file or folder / "study.yaml")
    plan = planning.make_plan(study, keep_items=True)
    planned = time.perf_counter() - started
    sampler.enter("release")
    driver._release_planning_memory(plan)
    if study_file is None:
        sampler.enter("commit")
        planning.commit_plan(plan)
    sampler.enter("grade pending")
    pending = driver._pending(plan, "grade")
    sampler.enter("grade shards")
    shards, cells, _ = driver._shards(plan, "grade", pending, first_id=0)
    made = sum(1 for _ in shards)
    sampler.finish()
    return {
        "items": plan.item_count,
        "plan_s": planned,
        "base_mb": base,
        "peak_mb": max(sampler.peaks.values()),
        "phases": sampler.peaks,
        "grade_cells": cells,
        "grade_shards": made,
    }


def _one(items: int, store: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="itemeval-planning-") as tmp:
        folder = Path(tmp)
        script = str(Path(__file__).resolve())
        for step in ("prepare", "measure"):  # each in a fresh process
            done = subprocess.run(
                [sys.executable, script, f"--{step}", str(folder), str(items), store],
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise SystemExit(f"{step} failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument(
        "--store", choices=STORES, default="empty", help="what the store holds first"
    )
    parser.add_argument(
        "--study",
        type=Path,
        help="measure this study over its store as it is (read only: nothing committed), "
        "say a store `big_store.py` built",
    )
    parser.add_argument("--prepare", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare:
        prepare(Path(args.prepare[0]), int(args.prepare[1]), args.prepare[2])
        return
    if args.measure:
        study_file = Path(args.measure[2]) if args.measure[2].endswith(".yaml") else None
        print(json.dumps(measure(Path(args.measure[0]), study_file)))
        return
    if args.study:
        script = str(Path(__file__).resolve())
        done = subprocess.run(  # a fresh process, as for a size
            [sys.executable, script, "--measure", str(args.study.parent), "0", str(args.study)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise SystemExit(f"measure failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        phases = ", ".join(f"{k} {v:.0f}" for k, v in result["phases"].items())
        peak = result["peak_mb"]
        print(f"{args.study}: {result['items']:,} items, peak {peak:.0f} MB ({phases})")
        print(json.dumps(result))
        return
    results = [_one(n, args.store) for n in args.items]
    print(f"planning, store {args.store}: peak resident set (MB) by phase, base after imports")
    for r in results:
        phases = ", ".join(f"{k} {v:.0f}" for k, v in r["phases"].items())
        print(
            f"{r['items']:>10,} items: {r['plan_s']:.1f} s, base {r['base_mb']:.0f}, "
            f"peak {r['peak_mb']:.0f} ({phases}); grade stage: {r['grade_cells']:,} cells "
            f"in {r['grade_shards']:,} shards"
        )
    if len(results) > 1:
        print(f"peak ratio {results[-1]['peak_mb'] / results[0]['peak_mb']:.2f}x")


if __name__ == "__main__":
    main()
