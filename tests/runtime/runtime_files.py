"""Helpers of the runtime tests: a sim-server subprocess, study files, store checks."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import yaml

from itemeval.store import StudyStore

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / "configs" / "datasets"


@contextlib.contextmanager
def sim_server(*args: str) -> Iterator[str]:
    """`itemeval sim-server --port 0 ARGS` on 127.0.0.1; yields its OpenAI base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "itemeval.cli.sim", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"sim-server did not start: {line!r}")
        yield line.split("listening on", 1)[1].strip() + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def write_study(folder: Path, **overrides: Any) -> Path:
    """A small study over the sample datasets (two models, two prompts, judge and scorer).

    Runs leave their fragments as written (`runtime.compact: false`): these tests read the rows
    a run wrote, duplicates and superseded errors included, which compaction would merge away
    (test_run_compaction.py runs with it)."""
    study: dict[str, Any] = {
        "study": "rt",
        "store": str(folder / "store"),
        "datasets": [
            {"name": "arithmetic", "path": str(DATASETS / "arithmetic")},
            {"name": "science-mc", "path": str(DATASETS / "science-mc")},
        ],
        "endpoints": {"sim": {"kind": "sim", "max_concurrency": 32}},
        "models": [
            {"id": "sim/strong", "endpoint": "sim"},
            {"id": "sim/weak", "endpoint": "sim"},
        ],
        "facets": {
            "prompt": ["builtin:direct", "builtin:cot"],
            "replications": 2,
            "grader": ["judge"],
        },
        "graders": {"judge": {"model": "sim/judge", "endpoint": "sim", "max_tokens": 200}},
        "budget": {"policy": "dev", "dev_items": 12},
        "cache": {"enabled": True, "location": str(folder / "cache")},
        "runtime": {"shard_size": 8, "compact": False},
    }
    for key, value in overrides.items():
        node = study
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def assert_complete(store_url: str, generate: int, grade: int, epochs: int, items: int) -> None:
    """Physical truth, read without deduplication: every generate cell has exactly one `ok`
    row and every grade cell exactly one `ok` row (superseded error rows may sit beside them,
    never a second `ok`); no cell is missing and no provider error is left standing."""
    store = StudyStore.open(store_url)
    solutions = store.read("solutions", columns=["item_id", "epoch", "status"], dedup=False)
    _exactly_one_ok(solutions, ["condition_id", "item_id", "epoch"], generate * items * epochs)
    grades = store.read(
        "grades", columns=["gen_condition_id", "item_id", "epoch", "status"], dedup=False
    )
    keys = ["grade_condition_id", "gen_condition_id", "item_id", "epoch"]
    _exactly_one_ok(grades, keys, grade * generate * items * epochs)


def _exactly_one_ok(rows, keys: list[str], cells: int) -> None:
    ok = rows.filter(pc.equal(rows.column("status"), "ok"))
    assert ok.num_rows == cells, f"{ok.num_rows} ok rows for {cells} cells"
    distinct = ok.group_by(keys).aggregate([("status", "count")])
    assert distinct.num_rows == cells, "some cell has two ok rows"
    every = rows.group_by(keys).aggregate([("status", "count")])
    assert every.num_rows == cells, "an error row stands for a cell without any ok row"


def physical_rows(store_url: str, stage: str = "solutions") -> int:
    """Rows on disk, without deduplication."""
    return StudyStore.open(store_url).read(stage, columns=["item_id"], dedup=False).num_rows


def distinct_calls(store_url: str) -> int:
    """How many provider calls the stored ok rows needed: distinct (request, epoch) pairs over
    solutions and judge grades (a cache hit reuses a call; scorers make none)."""
    store = StudyStore.open(store_url)
    seen: set[tuple[str, int]] = set()
    for stage in ("solutions", "grades"):
        rows = store.read(stage, columns=["request_hash", "epoch", "status"], dedup=False)
        rows = rows.filter(
            pc.and_(pc.equal(rows["status"], "ok"), pc.is_valid(rows["request_hash"]))
        )
        seen.update(zip(rows["request_hash"].to_pylist(), rows["epoch"].to_pylist(), strict=True))
    return len(seen)


def sim_stats(base_url: str, window_s: float | None = None) -> dict[str, Any]:
    """The sim-server's own counts (`/_sim/stats`): what the provider answered; with
    `window_s`, also `max_in_window`, the most requests it admitted in any window that long."""
    import json
    import urllib.request

    root = base_url.removesuffix("/v1")
    query = f"?window_s={window_s}" if window_s else ""
    with urllib.request.urlopen(f"{root}/_sim/stats{query}", timeout=10) as response:
        return json.loads(response.read())


def write_items(folder: Path, count: int) -> Path:
    """A generated item-format dataset of `count` short arithmetic items under `folder`."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    name = folder.name
    meta = {
        "identifier": name,
        "title": "generated sums",
        "description": "generated arithmetic items for runtime tests",
        "creator": "itemeval tests",
        "publisher": "itemeval",
        "created": "2026-11-23",
        "language": "eng",
        "license": "CC0-1.0",
        "source": "generated",
        "subject": "arithmetic",
        "hasPart": [f"{name}.jsonl"],
    }
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(meta))
    with open(folder / f"{name}.jsonl", "w") as handle:
        for i in range(count):
            a, b = i % 97, (i * 7) % 89
            item = {
                "identifier": f"{name}.{i}",
                "modality": "single-value",
                "prompt": f"What is {a} plus {b}?",
                "response": str(a + b),
                "difficulty": (i % 10) / 10,
            }
            handle.write(json.dumps(item) + "\n")
    return folder
