"""Helpers of the export tests: study files, real in-process runs, and readers of the outputs."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import yaml

from itemeval.config import load_study
from itemeval.export import read_long_table
from itemeval.planning import Plan, make_plan
from itemeval.results import LONG_TABLE_SCHEMA
from itemeval.runtime import RunOptions, RunOutcome, run_study

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / "configs" / "datasets"
INLINE = RunOptions(no_ray=True, yes=True, quiet=True)

#: Like configs/demo.yaml, in-process: three models, four datasets, two prompts, a scorer and a
#: judge; two epochs (to keep the suite fast), a judge that sometimes breaks the score contract
#: and an endpoint that sometimes fails without retry (so errors and parse failures exist).
DEMO: dict[str, Any] = {
    "study": "demo",
    "description": "Three simulated models on four small datasets, scorer and judge.",
    "datasets": [
        {"name": "arithmetic", "path": str(DATASETS / "arithmetic")},
        {"name": "science-mc", "path": str(DATASETS / "science-mc")},
        {"name": "facts-tf", "path": str(DATASETS / "facts-tf")},
        {"name": "capitals-short", "path": str(DATASETS / "capitals-short")},
    ],
    "endpoints": {
        "sim": {
            "kind": "sim",
            "max_concurrency": 64,
            "max_attempts": 1,
            "sim": {"judge_malformed_rate": 0.04, "faults": {"server_error": 0.01}},
        }
    },
    "models": [
        {"id": "sim/strong", "endpoint": "sim", "name": "strong"},
        {"id": "sim/medium", "endpoint": "sim", "name": "medium"},
        {"id": "sim/weak", "endpoint": "sim", "name": "weak"},
    ],
    "sampling": {"temperature": 0.7, "max_tokens": 512},
    "facets": {
        "prompt": ["builtin:direct", "builtin:cot"],
        "replications": 2,
        "scorer": ["auto"],
        "grader": ["judge"],
        "rubric": ["builtin:correctness"],
    },
    "graders": {"judge": {"model": "sim/judge", "endpoint": "sim", "max_tokens": 300}},
    "budget": {"policy": "full"},
    "runtime": {"shard_size": 64},
}


def write_study(folder: Path, data: dict[str, Any] | None = None, **changes: Any) -> Path:
    """A study file in `folder` with its own store and cache; dotted-path `changes` applied."""
    study = copy.deepcopy(data or DEMO)
    study.setdefault("store", str(folder / "store"))
    study.setdefault("cache", {"enabled": True, "location": str(folder / "cache")})
    for dotted, value in changes.items():
        node = study
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


@dataclass
class Run:
    study_path: Path
    outcome: RunOutcome

    @property
    def store_url(self) -> str:
        return self.outcome.store_url

    def plan(self, **kwargs: Any) -> Plan:
        return make_plan(load_study(self.study_path), with_pending=False, **kwargs)


def run(
    folder: Path, data: dict[str, Any] | None = None, options: RunOptions = INLINE, **changes: Any
) -> Run:
    path = write_study(folder, data, **changes)
    return Run(path, run_study(load_study(path), options))


def read_csv(path: str | Path) -> pa.Table:
    """A long-table CSV read back with the long table's types."""
    return pacsv.read_csv(
        path,
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types={f.name: f.type for f in LONG_TABLE_SCHEMA},
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )


def read_parquet(path: str | Path) -> pa.Table:
    return pq.read_table(path)


def read_table(out: str | Path, *, csv: bool = False) -> pa.Table:
    """The long table an export wrote under `out`: every row of every part (nothing
    deduplicated), in the long table's columns."""
    return read_long_table(str(out), csv=csv)


def eee_files(out: Path) -> tuple[list[Path], list[Path]]:
    """(aggregate records, samples files) under `<out>/eee/data`."""
    root = out / "eee" / "data"
    return sorted(root.rglob("*-*.json")), sorted(root.rglob("*_samples.jsonl"))


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
