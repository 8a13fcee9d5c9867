"""`itemeval view` on a big store: how long each page takes and how much memory the server holds.

Builds a generated study under /tmp (never committed): one item-format dataset
(`generated_data.write_dataset`), 5 models x 2 prompts = 10 generate conditions, 2 epochs, a
scorer and a judge; `--items` 50,000 gives 1,000,000 solutions and 2,000,000 grades, written
straight to the store as fragments of `--fragment-rows` rows (512: what a run's shards write),
with answers of a few hundred characters, about 1% failed calls, 2% judge parse failures and
judge verdicts that disagree with the scorer's on about 5% of answers. A child process then
starts the viewer (`ViewServer`, what `itemeval view` runs) and times HTTP requests of each page
from a client thread, each `--repeat` times; its peak RSS is its own (`VmHWM`).
`--compact` measures again after `itemeval compact` (one file a partition).

    .venv/bin/python benchmarks/viewer.py                 # build, measure, print tables
    .venv/bin/python benchmarks/viewer.py --compact --keep
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from generated_data import write_dataset  # noqa: E402

from itemeval.config import load_study  # noqa: E402
from itemeval.planning._plan import commit_plan, make_plan  # noqa: E402
from itemeval.store import GRADE_SCHEMA, SOLUTION_SCHEMA, StudyStore, compact, text_hash  # noqa: E402
from itemeval.store.fragments import write_fragment  # noqa: E402

MODELS = 5
EPOCHS = 2
_WORDS = [
    "first",
    "the",
    "question",
    "asks",
    "for",
    "a",
    "value",
    "so",
    "we",
    "compute",
    "it",
    "carefully",
    "and",
    "check",
    "each",
    "step",
]
TEXTS = [
    " ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(20 + i % 40)) + f"\nANSWER: {i % 10}"
    for i in range(997)
]
HASHES = [text_hash(t) for t in TEXTS]
JUDGE = [
    f"The response {'matches' if i % 2 else 'does not match'} the reference.\n```json\n"
    f'{{"score": {i % 2}, "reasoning": "compared with the reference answer ({i})"}}\n```'
    for i in range(101)
]


def build(root: Path, items: int, fragment_rows: int) -> dict[str, float]:
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    write_dataset(root / "datasets" / "gen", items)
    study = {
        "study": "viewer-bench",
        "store": str(root / "store"),
        "datasets": [{"name": "gen", "path": str(root / "datasets" / "gen")}],
        "endpoints": {"sim": {"kind": "sim"}},
        "models": [{"id": f"sim/m{m}", "endpoint": "sim"} for m in range(MODELS)],
        "facets": {
            "prompt": ["builtin:direct", "builtin:cot"],
            "replications": EPOCHS,
            "scorer": ["auto"],
            "grader": ["judge"],
        },
        "graders": {"judge": {"model": "sim/judge", "endpoint": "sim"}},
    }
    (root / "study.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    plan = make_plan(load_study(root / "study.yaml"), with_pending=False)
    commit_plan(plan)
    store = plan.store
    rng = np.random.default_rng(7)
    ids = plan.items.column("item_id").combine_chunks()
    cell_ids = pa.concat_arrays([ids] * EPOCHS)
    epochs = np.repeat(np.arange(EPOCHS, dtype=np.int32), items)
    ability = np.linspace(0.4, 0.9, len(plan.design.generate))
    scorer = next(g for g in plan.design.grade if g.kind == "scorer")
    judge = next(g for g in plan.design.grade if g.kind == "judge")
    for code, condition in enumerate(plan.design.generate):
        n = len(cell_ids)
        pick = rng.integers(0, len(TEXTS), n)
        ok = rng.random(n) > 0.01
        correct = rng.random(n) < ability[code]
        agree = rng.random(n) > 0.05
        parsed = rng.random(n) > 0.02
        judge_pick = rng.integers(0, len(JUDGE), n)
        for start in range(0, n, fragment_rows):
            part = slice(start, start + fragment_rows)
            cells = {"item_id": cell_ids.slice(start, fragment_rows), "epoch": epochs[part]}
            write_fragment(
                store.partition("solutions", condition.id),
                _solutions(cells, pick[part], ok[part], rng),
            )
            graded = ok[part]
            for grade, verdict in ((scorer, correct[part]), (judge, correct[part] == agree[part])):
                table = _grades(
                    cells,
                    pick[part],
                    verdict,
                    condition.id,
                    grade.kind,
                    judge_pick[part],
                    parsed[part] if grade.kind == "judge" else np.ones(len(graded), bool),
                )
                write_fragment(store.partition("grades", grade.id), table.filter(pa.array(graded)))
    return {"items": items, "build_s": time.perf_counter() - started}


def _table(schema: pa.Schema, columns: dict[str, object], n: int) -> pa.Table:
    """A table of `schema` from `columns`; the others null, zero or false."""
    now = pa.scalar(datetime.now(UTC), pa.timestamp("us", tz="UTC"))
    arrays = []
    for f in schema:
        value = columns.get(f.name)
        if value is None:
            if f.name == "written_at":
                value = pa.repeat(now, n)
            elif f.nullable:
                value = pa.nulls(n, f.type)
            else:
                value = pa.repeat(pa.scalar(False if f.type == pa.bool_() else 0, f.type), n)
        arrays.append(
            pa.array(value, f.type) if not isinstance(value, pa.Array) else value.cast(f.type)
        )
    return pa.Table.from_arrays(arrays, schema=schema)


def _solutions(cells: dict, pick: np.ndarray, ok: np.ndarray, rng: np.random.Generator) -> pa.Table:
    n = len(pick)
    texts = pa.array(TEXTS).take(pa.array(pick))
    texts = pa.array(np.where(ok, texts.to_numpy(zero_copy_only=False), ""), pa.string())
    return _table(
        SOLUTION_SCHEMA,
        {
            **cells,
            "status": np.where(ok, "ok", "error"),
            "error_code": pa.array(np.where(ok, None, "server_error"), pa.string()),
            "text": texts,
            "text_hash": pa.array([text_hash(t) for t in texts.to_pylist()]),
            "finish_reason": pa.repeat("stop", n),
            "input_tokens": rng.integers(50, 500, n),
            "output_tokens": rng.integers(5, 200, n),
            "usd": rng.random(n) * 1e-4,
            "latency_ms": rng.random(n) * 900 + 100,
            "attempts": pa.repeat(pa.scalar(1, pa.int32()), n),
            "tier": pa.repeat("live", n),
            "request_hash": pa.array(HASHES).take(pa.array(pick)),
            "model": pa.repeat("sim/model", n),
            "run_id": pa.repeat("bench", n),
        },
        n,
    )


def _grades(
    cells: dict,
    pick: np.ndarray,
    correct: np.ndarray,
    gen_id: str,
    kind: str,
    judge_pick: np.ndarray,
    parsed: np.ndarray,
) -> pa.Table:
    n = len(pick)
    judge = kind == "judge"
    verdict = pa.array(np.where(parsed, correct, None), pa.bool_())
    return _table(
        GRADE_SCHEMA,
        {
            **cells,
            "gen_condition_id": pa.repeat(gen_id, n),
            "status": pa.repeat("ok", n),
            "score": pa.array(np.where(parsed, correct.astype(float), None), pa.float64()),
            "correct": verdict,
            "extracted": None if judge else pa.array([str(p % 10) for p in pick]),
            "parse_ok": parsed,
            "parse_code": pa.array(np.where(parsed, None, "no_json_object"), pa.string()),
            "reasoning": pa.repeat("compared with the reference answer", n) if judge else None,
            "judge_text": pa.array(JUDGE).take(pa.array(judge_pick)) if judge else None,
            "solution_hash": pa.array(HASHES).take(pa.array(pick)),
            "input_tokens": pa.repeat(pa.scalar(300 if judge else 0, pa.int64()), n),
            "output_tokens": pa.repeat(pa.scalar(40 if judge else 0, pa.int64()), n),
            "usd": pa.repeat(pa.scalar(1e-4 if judge else 0.0), n),
            "latency_ms": pa.repeat(pa.scalar(500.0 if judge else 0.0), n),
            "attempts": pa.repeat(pa.scalar(1, pa.int32()), n),
            "tier": pa.repeat("live", n),
            "request_hash": pa.repeat("judge", n) if judge else None,
            "grader": pa.repeat("sim/judge" if judge else "auto", n),
            "run_id": pa.repeat("bench", n),
        },
        n,
    )


LIMITS_MS = {"overview": 1000, "items": 500, "item": 300}


def child(root: Path, repeat: int) -> None:
    """Start the viewer over the store at `root`, time its pages, print one JSON line."""
    from itemeval._util.arrow_start import skip_pandas_probe
    from itemeval._util.heap import limit_malloc_arenas
    from itemeval.view import ViewOptions, ViewServer

    limit_malloc_arenas()  # as the `itemeval` command does
    skip_pandas_probe()

    started = time.perf_counter()
    plan = make_plan(load_study(root / "study.yaml"), with_pending=False)
    plan_s = time.perf_counter() - started
    server = ViewServer(plan, ViewOptions(port=0, open_browser=False, refresh_s=2.0))
    url = server.start()
    start_s = time.perf_counter() - started
    start_peak = _peak_mb()
    index = server.state.index
    gens = [g.id for g in index.facets.generate]
    ids = index.item_ids
    n = len(ids)
    pages = {
        "overview": ["/"],
        "items": [
            "/items",
            "/items?page=900",
            f"/items?wrong={gens[0]}&sort=accuracy",
            f"/items?right={gens[0]}&wrong={gens[4]}",
            "/items?disagree=1&sort=-difficulty",
            "/items?q=" + urllib.parse.quote("gen.1234"),
            "/items?q=" + urllib.parse.quote("which number is 3"),
        ],
        "item": [
            "/item?id=" + urllib.parse.quote(ids[i].as_py()) for i in (0, n // 3, n // 2, n - 1)
        ],
        "item with a diff": [f"/item?id={urllib.parse.quote(ids[n // 4].as_py())}&a=0:0&b=7:1"],
        "compare": [f"/compare?a={gens[0]}&b={gens[4]}"],
    }
    results: dict[str, dict[str, float]] = {}
    base = url.rstrip("/")
    for name, paths in pages.items():
        times = []
        for path in paths:
            for _ in range(repeat):
                t = time.perf_counter()
                with urllib.request.urlopen(base + path, timeout=60) as response:
                    body = response.read()
                    assert response.status == 200 and body
                times.append((time.perf_counter() - t) * 1000)
        results[name] = {
            "requests": len(times),
            "median_ms": statistics.median(times),
            "max_ms": max(times),
        }
    rss = _peak_mb()
    server.stop()
    print(
        json.dumps(
            {
                "items": n,
                "solutions": index.cells.solutions.num_rows,
                "grades": index.cells.grades.num_rows,
                "plan_s": plan_s,
                "index_s": index.seconds,
                "start_s": start_s,
                "peak_rss_mb": rss,
                "start_peak_rss_mb": start_peak,
                "rss_mb": _rss_mb(),
                "pages": results,
            }
        )
    )


def _peak_mb() -> float:
    """This process's peak resident set (`VmHWM`). Not `ru_maxrss`: Linux keeps that across
    exec, so a child started by a parent that had just built or compacted the store would
    report the parent's peak."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 2**20


def measure(root: Path, repeat: int) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", "--root", str(root), "--repeat", str(repeat)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(label: str, result: dict[str, object]) -> str:
    lines = [
        f"{label}: {result['solutions']:,} solutions, {result['grades']:,} grades, "
        f"{result['items']:,} items; server start {result['start_s']:.1f} s (plan "
        f"{result['plan_s']:.1f} s, index and overview {result['start_s'] - result['plan_s']:.1f}"
        f" s); RSS peak {result['peak_rss_mb']:.0f} MB ({result['start_peak_rss_mb']:.0f} MB while"
        f" starting), {result['rss_mb']:.0f} MB after the requests",
        "",
        "| page | requests | median | max | limit |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in result["pages"].items():  # type: ignore[attr-defined]
        limit = LIMITS_MS.get(name.split(" ")[0])
        lines.append(
            f"| {name} | {r['requests']} | {r['median_ms']:.0f} ms | {r['max_ms']:.0f} ms | "
            + (f"{limit} ms |" if limit else "|")
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=50_000, help="items (x 20 = solutions)")
    parser.add_argument("--fragment-rows", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=5, help="requests of each page")
    parser.add_argument("--root", default="/tmp/itemeval-viewer-bench")
    parser.add_argument("--reuse", action="store_true", help="measure the store already built")
    parser.add_argument("--compact", action="store_true", help="measure again after compaction")
    parser.add_argument("--keep", action="store_true", help="keep the generated store")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    root = Path(args.root)
    if args.child:
        child(root, args.repeat)
        return
    if not args.reuse:
        built = build(root, args.items, args.fragment_rows)
        print(f"built in {built['build_s']:.0f} s: {built}", flush=True)
    print(table(f"fragments of {args.fragment_rows} rows", measure(root, args.repeat)), flush=True)
    if args.compact:
        compact(StudyStore.open(str(root / "store")))
        print()
        print(table("compacted (one file a partition)", measure(root, args.repeat)), flush=True)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
