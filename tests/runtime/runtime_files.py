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
    """A small study over the sample datasets (two models, two prompts, judge and scorer)."""
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
        "runtime": {"shard_size": 8},
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
    """Every (condition, item, epoch) exactly once and ok in solutions; every grade cell exactly
    once and ok in grades (logical rows); no provider error left."""
    store = StudyStore.open(store_url)
    solutions = store.read("solutions", columns=["item_id", "epoch", "status"])
    keys = solutions.group_by(["condition_id", "item_id", "epoch"]).aggregate([("status", "count")])
    assert solutions.num_rows == generate * items * epochs
    assert keys.num_rows == solutions.num_rows
    assert pc.all(pc.equal(solutions.column("status"), "ok")).as_py()
    grades = store.read(
        "grades", columns=["gen_condition_id", "item_id", "epoch", "status", "error_code"]
    )
    assert grades.num_rows == grade * generate * items * epochs
    gkeys = grades.group_by(["grade_condition_id", "gen_condition_id", "item_id", "epoch"])
    assert gkeys.aggregate([("status", "count")]).num_rows == grades.num_rows
    errors = grades.filter(pc.equal(grades.column("status"), "error"))
    assert errors.num_rows == 0, errors.column("error_code").to_pylist()[:10]
