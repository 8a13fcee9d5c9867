"""Export throughput: rows per second of `itemeval export` and `itemeval report` on a big store,
and the peak memory of each (which must not grow with the store).

Builds a generated study under /tmp (never committed): an item-format dataset, a study file, its
items snapshot, and solutions and grades written straight to the store as runtime-sized
fragments (`--fragment-rows` rows each), with realistic text lengths. The default has 1,000,000
grade rows: 100,000 items x 5 models x 2 graders (a scorer and a judge) x 1 epoch.

Each measurement runs in a fresh child process, so its peak RSS (`ru_maxrss`) is its own:

* `long-table`: parquet and CSV together (one scan feeds both writers);
* `parquet`: parquet alone;
* `eee`: Every Eval Ever records alone (0.2.0 samples + 0.1.0 aggregates);
* `report`: the report (HTML and Markdown), which reads only small columns.

`--incremental` measures exports into one folder instead: the store is built without its last
1% of items' rows; a full export (parquet, CSV and Every Eval Ever); the same export again (the
store unchanged: nothing written); the last 1% of rows written as new runtime fragments; the
export again (only what changed). Each in a fresh child process, with its wall time, its CPU
time (user + system: the figure the machine's load does not move) and its peak RSS. `--dir`
says where the store is built (default /tmp); with `--keep` the folder and the store are also
kept as the full export left them (`out-incremental-before/`, `store-before/`).

    .venv/bin/python benchmarks/export_throughput.py                    # 1M grade rows
    .venv/bin/python benchmarks/export_throughput.py --rows 200000 --compact
    .venv/bin/python benchmarks/export_throughput.py --incremental --compact
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml

from itemeval.config import load_study
from itemeval.planning import Plan, commit_plan, make_plan
from itemeval.store import GRADE_SCHEMA, SOLUTION_SCHEMA, StudyStore, compact, text_hash
from itemeval.store.fragments import write_fragment

MODELS = 5
GRADERS = 2  # the auto scorer and one judge
MODES = ("long-table", "parquet", "eee", "report")

_FILLER = "Let me work through this step by step; the key facts constrain the answer. "
TEXTS = [f"{_FILLER}{_FILLER[: i % 60]}ANSWER: {i}" for i in range(1000)]
HASHES = [text_hash(t) for t in TEXTS]
JUDGE = [
    "The response reaches the reference answer with sound reasoning.\n```json\n"
    f'{{"score": {i % 2}, "reasoning": "checked against the reference ({i})"}}\n```'
    for i in range(200)
]


def build(root: Path, rows: int, fragment_rows: int, hold_back: float = 0.0) -> dict[str, object]:
    """The store; `hold_back`: the share of items (the last ones) whose rows are not written
    (`write_rest` writes them)."""
    shutil.rmtree(root, ignore_errors=True)
    items = rows // (MODELS * GRADERS)
    data = root / "datasets" / "gen"
    data.mkdir(parents=True)
    with (data / "gen.jsonl").open("w") as handle:
        for i in range(items):
            a, b = 100 + i % 900, 7 + i % 97
            handle.write(
                json.dumps(
                    {
                        "identifier": f"gen.{i:07d}",
                        "modality": "single-value",
                        "prompt": f"A shop sells {a} apples on Monday and {b} on Tuesday. "
                        "How many apples does it sell on the two days together?",
                        "response": str(a + b),
                        "difficulty": round((i % 100) / 100, 2),
                    }
                )
                + "\n"
            )
    (data / "gen.yaml").write_text(
        yaml.safe_dump(
            {
                "identifier": "gen",
                "title": "Generated sums",
                "description": "Benchmark items.",
                "creator": "itemeval benchmarks",
                "publisher": "itemeval benchmarks",
                "created": "2026-11-22",
                "version": "1.0.0",
                "metadataVersion": "3.3",
                "language": "eng",
                "subject": ["arithmetic"],
                "source": "generated",
                "license": "CC0-1.0",
                "hasPart": ["gen.jsonl"],
            }
        )
    )
    study = {
        "study": "export-bench",
        "store": str(root / "store"),
        "datasets": [{"name": "gen", "path": str(data)}],
        "endpoints": {"sim": {"kind": "sim"}},
        "models": [{"id": f"sim/m{m}", "endpoint": "sim"} for m in range(MODELS)],
        "facets": {"grader": ["judge"], "scorer": ["auto"]},
        "graders": {"judge": {"model": "sim/judge", "endpoint": "sim"}},
    }
    (root / "study.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    started = time.perf_counter()
    plan = make_plan(load_study(root / "study.yaml"), with_pending=False)
    commit_plan(plan)
    planned = time.perf_counter() - started
    kept = items - int(items * hold_back)
    written = _write_rows(plan, 0, kept, fragment_rows)
    return {
        "items": items,
        "grade_rows": written,
        "plan_s": planned,
        "build_s": time.perf_counter() - started,
    }


def _write_rows(plan: Plan, first: int, stop: int, fragment_rows: int) -> int:
    """Solutions and grades of the items `first .. stop-1`, as runtime-sized fragments; the
    grade rows written."""
    store = plan.store
    rng = np.random.default_rng(7 + first)
    item_ids = plan.items.column("item_id").combine_chunks()
    n = stop - first
    # Which text each solution has, so that grades name the text they graded.
    picks = {c.id: rng.integers(0, len(TEXTS), n) for c in plan.design.generate}
    written = 0
    for condition in plan.design.generate:
        for start in range(0, n, fragment_rows):
            ids = item_ids.slice(first + start, min(fragment_rows, n - start))
            pick = picks[condition.id][start : start + fragment_rows]
            write_fragment(store.partition("solutions", condition.id), _solutions(ids, pick, rng))
    for grade in plan.design.grade:
        for condition in plan.design.generate:
            for start in range(0, n, fragment_rows):
                ids = item_ids.slice(first + start, min(fragment_rows, n - start))
                pick = picks[condition.id][start : start + fragment_rows]
                table = _grades(ids, pick, condition.id, grade.kind, rng)
                write_fragment(store.partition("grades", grade.id), table)
                written += table.num_rows
    return written


def write_rest(root: Path, hold_back: float, fragment_rows: int) -> int:
    """The rows `build(hold_back=...)` held back, written now (as a run writes them)."""
    plan = make_plan(load_study(root / "study.yaml"), with_pending=False)
    items = plan.item_count
    return _write_rows(plan, items - int(items * hold_back), items, fragment_rows)


def _now(n: int) -> pa.Array:
    return pa.repeat(pa.scalar(datetime.now(UTC), pa.timestamp("us", tz="UTC")), n)


def _solutions(ids: pa.Array, picks: np.ndarray, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    pick = pa.array(picks)
    return pa.Table.from_pydict(
        {
            "item_id": ids,
            "epoch": pa.repeat(pa.scalar(0, pa.int32()), n),
            "status": pa.repeat("ok", n),
            "error_code": pa.nulls(n, pa.string()),
            "error_message": pa.nulls(n, pa.string()),
            "text": pa.array(TEXTS).take(pick),
            "text_hash": pa.array(HASHES).take(pick),
            "finish_reason": pa.repeat("stop", n),
            "input_tokens": pa.array(rng.integers(50, 500, n)),
            "output_tokens": pa.array(rng.integers(5, 200, n)),
            "cached_input_tokens": pa.repeat(pa.scalar(0, pa.int64()), n),
            "reasoning_tokens": pa.repeat(pa.scalar(0, pa.int64()), n),
            "usd": pa.array(rng.random(n) * 1e-4),
            "latency_ms": pa.array(rng.random(n) * 900 + 100),
            "request_id": pa.nulls(n, pa.string()),
            "attempts": pa.repeat(pa.scalar(1, pa.int32()), n),
            "cached": pa.repeat(False, n),
            "tier": pa.repeat("live", n),
            "request_hash": pa.array(HASHES).take(pick),
            "model": pa.repeat("sim/model", n),
            "run_id": pa.repeat("bench", n),
            "written_at": _now(n),
        },
        schema=SOLUTION_SCHEMA,
    )


def _grades(
    ids: pa.Array, picks: np.ndarray, gen_id: str, kind: str, rng: np.random.Generator
) -> pa.Table:
    n = len(ids)
    correct = rng.random(n) < 0.6
    judge = kind == "judge"
    pick = pa.array(rng.integers(0, len(JUDGE), n))
    return pa.Table.from_pydict(
        {
            "gen_condition_id": pa.repeat(gen_id, n),
            "item_id": ids,
            "epoch": pa.repeat(pa.scalar(0, pa.int32()), n),
            "status": pa.repeat("ok", n),
            "score": pa.array(correct.astype(float)),
            "correct": pa.array(correct),
            "extracted": pa.nulls(n, pa.string()) if judge else pa.repeat("42", n),
            "parse_ok": pa.repeat(True, n),
            "parse_code": pa.nulls(n, pa.string()),
            "reasoning": pa.repeat("checked against the reference", n)
            if judge
            else pa.nulls(n, pa.string()),
            "judge_text": pa.array(JUDGE).take(pick) if judge else pa.nulls(n, pa.string()),
            "solution_hash": pa.array(HASHES).take(pa.array(picks)),
            "error_code": pa.nulls(n, pa.string()),
            "error_message": pa.nulls(n, pa.string()),
            "input_tokens": pa.repeat(pa.scalar(300 if judge else 0, pa.int64()), n),
            "output_tokens": pa.repeat(pa.scalar(40 if judge else 0, pa.int64()), n),
            "cached_input_tokens": pa.repeat(pa.scalar(0, pa.int64()), n),
            "reasoning_tokens": pa.repeat(pa.scalar(0, pa.int64()), n),
            "usd": pa.repeat(pa.scalar(1e-4 if judge else 0.0), n),
            "latency_ms": pa.repeat(pa.scalar(500.0 if judge else 0.0), n),
            "request_id": pa.nulls(n, pa.string()),
            "attempts": pa.repeat(pa.scalar(1, pa.int32()), n),
            "cached": pa.repeat(False, n),
            "tier": pa.repeat("live", n),
            "request_hash": pa.repeat("judge", n) if judge else pa.nulls(n, pa.string()),
            "grader": pa.repeat("sim/judge" if judge else "auto", n),
            "run_id": pa.repeat("bench", n),
            "written_at": _now(n),
        },
        schema=GRADE_SCHEMA,
    )


def _cpu_seconds() -> float:
    """User + system CPU of this process so far (the figure the machine's load does not move)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_mb() -> float:
    """This process's resident set size now (Linux)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class _PeakRss:
    """The highest RSS, and the highest memory held by arrow buffers (what the export really
    keeps; the allocator may hold more), seen while the block runs (sampled every 20 ms)."""

    def __enter__(self) -> _PeakRss:
        self.peak = _rss_mb()
        self.arrow_peak = pa.total_allocated_bytes() / 2**20
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _rss_mb())
            self.arrow_peak = max(self.arrow_peak, pa.total_allocated_bytes() / 2**20)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mb())


def child(mode: str, root: Path, batch_rows: int) -> None:
    """One measurement in this process; prints a JSON line."""
    from itemeval.export import ExportOptions, export_study
    from itemeval.report import write_report

    study = load_study(root / "study.yaml")
    started = time.perf_counter()
    plan = make_plan(study, with_pending=False)
    plan_s = time.perf_counter() - started
    out = root / f"out-{mode}"
    if mode.startswith("into:"):  # an export into the one folder of --incremental
        out = root / "out-incremental"
    else:
        shutil.rmtree(out, ignore_errors=True)
    before = _rss_mb()
    rows = None
    written: dict[str, object] = {}
    with _PeakRss() as watch:
        started, cpu_started = time.perf_counter(), _cpu_seconds()
        if mode == "report":
            write_report(plan, str(out))
        elif mode.startswith("into:"):
            profile = os.environ.get("EXPORT_BENCH_PROFILE")  # a file: cProfile of this export
            profiler = cProfile.Profile() if profile and mode == "into:+1%" else None
            if profiler is not None:
                profiler.enable()
            result = export_study(plan, ExportOptions(out=str(out), batch_rows=batch_rows))
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(str(profile))
            rows = result.rows
            written = result.as_dict()["written"]
        else:
            formats = {"long-table": ("parquet", "csv"), "parquet": ("parquet",), "eee": ("eee",)}
            options = ExportOptions(out=str(out), formats=formats[mode], batch_rows=batch_rows)
            rows = export_study(plan, options).rows
        seconds = time.perf_counter() - started
        cpu = _cpu_seconds() - cpu_started
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    files = sum(1 for p in out.rglob("*") if p.is_file())
    print(
        json.dumps(
            {
                "mode": mode,
                "rows": rows,
                "seconds": seconds,
                "cpu_seconds": cpu,
                "plan_seconds": plan_s,
                "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "rss_before_mb": before,
                "export_peak_mb": watch.peak,
                "arrow_peak_mb": watch.arrow_peak,
                "output_mb": size / 1e6,
                "files": files,
                "written": written,
            }
        )
    )


def measure(root: Path, modes: list[str], batch_rows: int, grade_rows: int) -> list[dict]:
    results = []
    for mode in modes:
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                mode,
                "--root",
                str(root),
                "--batch-rows",
                str(batch_rows),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        results.append(result)
        rate = grade_rows / result["seconds"]
        print(
            f"  {mode:<11} {result['seconds']:7.1f} s (CPU {result['cpu_seconds']:6.1f} s)  "
            f"{rate:>10,.0f} rows/s  "
            f"RSS {result['rss_before_mb']:4.0f} -> peak {result['export_peak_mb']:4.0f} MB, "
            f"arrow peak {result['arrow_peak_mb']:4.0f} MB  "
            f"output {result['output_mb']:7.1f} MB "
            f"in {result['files']:,} files  "
            f"(plan {result['plan_seconds']:.1f} s)",
            flush=True,
        )
        if result["written"]:
            w = result["written"]
            print(
                f"{'':14}{w['rows_written']:,} rows read from the store, "
                f"{w['pairs_changed']} pairs changed ({w['pairs_advanced']} advanced from "
                f"their key index), {w['files_written']} files written, "
                f"{w['statistics_seconds']:.1f} s of it the statistics files",
                flush=True,
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="grade rows in the store")
    parser.add_argument("--fragment-rows", type=int, default=4096)
    parser.add_argument("--batch-rows", type=int, default=20_000)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--compact", action="store_true", help="measure again after compaction")
    parser.add_argument(
        "--incremental", action="store_true", help="full, unchanged and +1%% exports into a folder"
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated store")
    parser.add_argument("--dir", default="/tmp", help="where the generated store is built")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, Path(args.root), args.batch_rows)
        return
    root = Path(args.dir) / f"itemeval-export-bench-{args.rows}"
    print(
        f"itemeval export benchmark, {os.cpu_count()} cpus, pyarrow {pa.__version__}, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    if args.incremental:
        incremental(root, args)
        return
    built = build(root, args.rows, args.fragment_rows)
    print(
        f"store: {built['grade_rows']:,} grade rows ({built['items']:,} items x {MODELS} models "
        f"x {GRADERS} graders), {args.fragment_rows:,}-row fragments, built in "
        f"{built['build_s']:.1f} s (planning {built['plan_s']:.1f} s)",
        flush=True,
    )
    modes = [m for m in args.modes.split(",") if m]
    measure(root, modes, args.batch_rows, int(built["grade_rows"]))
    if args.compact:
        started = time.perf_counter()
        compact(StudyStore.open(root / "store"))
        print(f"compacted in {time.perf_counter() - started:.1f} s; again:", flush=True)
        measure(root, modes, args.batch_rows, int(built["grade_rows"]))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


HOLD_BACK = 0.01


def incremental(root: Path, args: argparse.Namespace) -> None:
    """Full, unchanged and +1% exports into one folder (see the module doc)."""
    built = build(root, args.rows, args.fragment_rows, hold_back=HOLD_BACK)
    print(
        f"store: {built['grade_rows']:,} grade rows, the last {HOLD_BACK:.0%} of items held "
        f"back, {args.fragment_rows:,}-row fragments",
        flush=True,
    )
    if args.compact:
        started = time.perf_counter()
        compact(StudyStore.open(root / "store"))
        print(f"compacted in {time.perf_counter() - started:.1f} s", flush=True)
    grade_rows = int(built["grade_rows"])
    full, again = measure(root, ["into:full", "into:unchanged"], args.batch_rows, grade_rows)
    if args.keep:  # the folder and store as the full export left them, to export +1% again
        for name in ("out-incremental", "store"):
            shutil.rmtree(root / f"{name}-before", ignore_errors=True)
            shutil.copytree(root / name, root / f"{name}-before")
    added = write_rest(root, HOLD_BACK, args.fragment_rows)
    print(f"wrote {added:,} more grade rows (runtime fragments)", flush=True)
    (more,) = measure(root, ["into:+1%"], args.batch_rows, grade_rows + added)
    print(
        f"export+1%: {more['seconds']:.1f} s = {more['seconds'] / full['seconds']:.1%} of the "
        f"full export's {full['seconds']:.1f} s (without the statistics files: "
        f"{_own(more) / _own(full):.1%}); CPU {more['cpu_seconds']:.1f} s = "
        f"{more['cpu_seconds'] / full['cpu_seconds']:.1%} of {full['cpu_seconds']:.1f} s; "
        f"unchanged: {again['seconds']:.2f} s (CPU {again['cpu_seconds']:.2f} s); "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


def _own(result: dict) -> float:
    return float(result["seconds"] - result["written"]["statistics_seconds"])


if __name__ == "__main__":
    main()
