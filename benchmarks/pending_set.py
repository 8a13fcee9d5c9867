"""How long planning takes against a big store: pending sets and deduplicated reads.

Builds generated stores on local disk (under /tmp, never committed), then times:

* `pending_generate` over every condition x item x epoch of the store;
* `pending_grade` for one grade condition that has graded most solutions;
* the deduplicated read of the planning columns (keys, status) and of every column;
* optionally (`--compact`) compaction and the same reads afterwards.

Each store has `rows` solution rows over `conditions` conditions and 2 epochs; 2% of the cells
are missing (pending), 2% were retried after an error (two physical rows, the error first),
so dedup has real work. Fragments hold `--fragment-rows` rows each (a runtime shard writes one).

    .venv/bin/python benchmarks/pending_set.py                       # 1M and 10M rows
    .venv/bin/python benchmarks/pending_set.py --sizes 1000000 --fragment-rows 1000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from itemeval.store import (
    GRADE_SCHEMA,
    SOLUTION_SCHEMA,
    SOLUTIONS,
    StudyStore,
    compact,
    pending_generate,
    pending_grade,
    text_hash,
)
from itemeval.store.fragments import write_fragment

EPOCHS = 2
TEXTS = [f"The answer is {i}." for i in range(1000)]
HASHES = [text_hash(t) for t in TEXTS]


def _solutions(items: pa.Array, rng: np.random.Generator, status: str, at: int) -> pa.Table:
    """Generated solution rows for `items` x EPOCHS, with the store's exact schema."""
    n = len(items) * EPOCHS
    pick = pa.array(rng.integers(0, len(TEXTS), n))
    when = pa.scalar(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1e6 + at, pa.float64())
    written = pa.repeat(when, n).cast(pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    ok = status == "ok"
    columns = {
        "item_id": pa.array(np.repeat(np.asarray(items.to_pylist(), dtype=object), EPOCHS)),
        "epoch": pa.array(np.tile(np.arange(EPOCHS, dtype=np.int32), len(items))),
        "status": pa.repeat(status, n),
        "error_code": pa.repeat(None if ok else "server_error", n).cast(pa.string()),
        "error_message": pa.nulls(n, pa.string()),
        "text": pa.array(TEXTS).take(pick) if ok else pa.repeat("", n),
        "text_hash": pa.array(HASHES).take(pick) if ok else pa.repeat(text_hash(""), n),
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
        "request_hash": pa.array(HASHES).take(pick),
        "model": pa.repeat("sim/model-a", n),
        "run_id": pa.repeat("bench", n),
        "written_at": written,
        "tier": pa.repeat("live", n),
    }
    return pa.Table.from_pydict(columns, schema=SOLUTION_SCHEMA)


def build_store(root: str, rows: int, conditions: int, fragment_rows: int) -> dict:
    """Write the generated store; returns what the timings need."""
    shutil.rmtree(root, ignore_errors=True)
    store = StudyStore.open(root)
    n_items = rows // (conditions * EPOCHS)
    items = pa.array([f"item-{i:07d}" for i in range(n_items)])
    rng = np.random.default_rng(7)
    cids = [f"model-{c:02d}_default--{c:012x}" for c in range(conditions)]
    per_fragment = max(fragment_rows // EPOCHS, 1)
    started = time.perf_counter()
    stored = 0
    for cid in cids:
        present = items.filter(pa.array(rng.random(n_items) >= 0.02))  # 2% missing
        retried = present.filter(pa.array(rng.random(len(present)) < 0.02))
        partition = store.partition(SOLUTIONS, cid)
        for start in range(0, len(retried), per_fragment):
            write_fragment(
                partition, _solutions(retried.slice(start, per_fragment), rng, "error", 0)
            )
        for start in range(0, len(present), per_fragment):
            table = _solutions(present.slice(start, per_fragment), rng, "ok", 1)
            write_fragment(partition, table)
            stored += table.num_rows
    grade_rows = _build_grades(store, cids, rng)
    return {
        "store": store,
        "cids": cids,
        "items": items,
        "stored": stored,
        "grade_rows": grade_rows,
        "build_s": time.perf_counter() - started,
        "fragments": sum(len(store.fragments(SOLUTIONS, c)) for c in cids),
    }


def _build_grades(store: StudyStore, cids: list[str], rng: np.random.Generator) -> int:
    """One grade condition that graded 90% of the ok solutions of every condition."""
    solutions = store.read_by_condition(
        SOLUTIONS, cids, ["item_id", "epoch", "status", "text_hash"]
    )
    parts = []
    for cid, table in solutions.items():
        table = table.filter(pa.compute.equal(table["status"], "ok"))
        table = table.filter(pa.array(rng.random(table.num_rows) < 0.9))
        n = table.num_rows
        parts.append(
            pa.Table.from_pydict(
                {
                    "gen_condition_id": pa.repeat(cid, n),
                    "item_id": table["item_id"],
                    "epoch": table["epoch"],
                    "status": pa.repeat("ok", n),
                    "score": pa.array(rng.random(n)),
                    "correct": pa.nulls(n, pa.bool_()),
                    "extracted": pa.nulls(n, pa.string()),
                    "parse_ok": pa.repeat(True, n),
                    "parse_code": pa.nulls(n, pa.string()),
                    "reasoning": pa.repeat("fine", n),
                    "judge_text": pa.nulls(n, pa.string()),
                    "solution_hash": table["text_hash"],
                    "error_code": pa.nulls(n, pa.string()),
                    "error_message": pa.nulls(n, pa.string()),
                    "input_tokens": pa.repeat(pa.scalar(300, pa.int64()), n),
                    "output_tokens": pa.repeat(pa.scalar(40, pa.int64()), n),
                    "cached_input_tokens": pa.repeat(pa.scalar(0, pa.int64()), n),
                    "reasoning_tokens": pa.repeat(pa.scalar(0, pa.int64()), n),
                    "usd": pa.repeat(pa.scalar(1e-4), n),
                    "latency_ms": pa.repeat(pa.scalar(500.0), n),
                    "request_id": pa.nulls(n, pa.string()),
                    "attempts": pa.repeat(pa.scalar(1, pa.int32()), n),
                    "cached": pa.repeat(False, n),
                    "request_hash": pa.repeat("judge", n),
                    "grader": pa.repeat("sim/judge", n),
                    "run_id": pa.repeat("bench", n),
                    "written_at": pa.repeat(
                        pa.scalar(datetime.now(UTC), pa.timestamp("us", tz="UTC")), n
                    ),
                    "tier": pa.repeat("live", n),
                },
                schema=GRADE_SCHEMA,
            )
        )
    grades = pa.concat_tables(parts)
    partition = store.partition("grades", "judge_default--00000000abcd")
    for start in range(0, grades.num_rows, 100_000):
        write_fragment(partition, grades.slice(start, 100_000))
    return grades.num_rows


def timed(label: str, runs: int, fn: Callable[[], object]) -> tuple[float, object]:
    times = []
    result = None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    best, median = min(times), statistics.median(times)
    print(f"  {label:<44} best {best:7.2f} s   median {median:7.2f} s   ({runs} runs)", flush=True)
    return best, result


def measure(rows: int, conditions: int, fragment_rows: int, runs: int, do_compact: bool) -> None:
    root = os.path.join("/tmp", f"itemeval-bench-store-{rows}-{fragment_rows}")
    print(
        f"\nstore: {rows:,} cells, {conditions} conditions x items x {EPOCHS} epochs, "
        f"{fragment_rows:,}-row fragments at {root}",
        flush=True,
    )
    built = build_store(root, rows, conditions, fragment_rows)
    store, cids, items = built["store"], built["cids"], built["items"]
    print(
        f"  built {built['stored']:,} ok rows + retries, {built['fragments']:,} solution "
        f"fragments, {built['grade_rows']:,} grade rows in {built['build_s']:.1f} s",
        flush=True,
    )
    _, pending = timed(
        "pending_generate (all conditions)",
        runs,
        lambda: pending_generate(store, cids, items, EPOCHS),
    )
    print(f"    -> {pending.num_rows:,} pending cells")
    _, graded = timed(
        "pending_grade (1 grade x all gen conditions)",
        runs,
        lambda: pending_grade(store, ["judge_default--00000000abcd"], cids, items, EPOCHS),
    )
    print(f"    -> {graded.num_rows:,} pending grade cells")
    timed(
        "dedup read, planning columns",
        runs,
        lambda: store.read_by_condition(SOLUTIONS, cids, ["item_id", "epoch", "status"]),
    )
    _, full = timed("dedup read, every column", runs, lambda: store.read_solutions(cids))
    print(f"    -> {full.num_rows:,} logical rows")
    del full
    if do_compact:
        timed("compact (solutions)", 1, lambda: compact(store, stages=["solutions"]))
        timed(
            "pending_generate after compaction",
            runs,
            lambda: pending_generate(store, cids, items, EPOCHS),
        )
        timed(
            "dedup read, every column, after compaction", runs, lambda: store.read_solutions(cids)
        )
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--conditions", type=int, default=10)
    parser.add_argument("--fragment-rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--compact", action="store_true")
    args = parser.parse_args()
    print(f"itemeval store benchmark, {os.cpu_count()} cpus, pyarrow {pa.__version__}")
    for rows in args.sizes:
        measure(rows, args.conditions, args.fragment_rows, args.runs, args.compact)


if __name__ == "__main__":
    main()
