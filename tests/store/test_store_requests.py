"""On S3, a reading command over a compacted store makes a bounded number of requests: as many
for ten times the rows, counted at the storage boundary (a proxy in front of moto that forwards
every request and counts them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from s3_fault_proxy import s3_fault_proxy

from itemeval import Study, compact_store
from itemeval.config import load_study
from itemeval.runtime import RunOptions, run_study

pytestmark = pytest.mark.s3


def _dataset(folder: Path, items: int) -> Path:
    folder.mkdir(parents=True)
    meta = {
        "identifier": "sums",
        "title": "sums",
        "description": "generated sums",
        "creator": "itemeval tests",
        "publisher": "itemeval",
        "created": "2026-11-28",
        "language": "eng",
        "license": "CC0-1.0",
        "source": "generated",
        "subject": "arithmetic",
        "hasPart": ["sums.jsonl"],
    }
    (folder / "sums.yaml").write_text(yaml.safe_dump(meta))
    with open(folder / "sums.jsonl", "w") as handle:
        for i in range(items):
            row = {
                "identifier": f"sums.{i}",
                "modality": "single-value",
                "prompt": f"What is {i} plus {i % 7}?",
                "response": str(i + i % 7),
            }
            handle.write(json.dumps(row) + "\n")
    return folder


def _study(folder: Path, store: str, items: int, endpoint: str | None) -> Path:
    study: dict[str, Any] = {
        "study": "requests",
        "store": store,
        "datasets": [{"name": "sums", "path": str(_dataset(folder / "sums", items))}],
        "endpoints": {"sim": {"kind": "sim", "max_concurrency": 64}},
        "models": [{"id": f"sim/{m}", "endpoint": "sim"} for m in ("strong", "medium", "weak")],
        "facets": {"scorer": ["auto"]},
        "cache": {"location": str(folder / "cache")},
        "budget": {"policy": "full"},
        "runtime": {"shard_size": 64},
    }
    if endpoint is not None:
        study["storage_options"] = {"endpoint_url": endpoint}
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def _requests(tmp: Path, s3_server: str, s3_bucket: str, items: int) -> dict[str, int]:
    """Run the study on moto, compact it, then count the requests of `status` and `report`
    made through the counting proxy."""
    store = f"{s3_bucket}/study-{items}"
    folder = tmp / f"study-{items}"
    folder.mkdir()
    run = run_study(
        load_study(_study(folder, store, items, None)),
        RunOptions(no_ray=True, yes=True, quiet=True),
    )
    assert run.status == "completed", run.message
    compact_store(store)
    counts: dict[str, int] = {}
    with s3_fault_proxy(s3_server) as proxy:
        study = Study.from_yaml(_study(folder / "read", store, items, proxy["url"]))
        proxy["requests"].clear()
        study.status()
        counts["status"] = sum(proxy["requests"].values())
        proxy["requests"].clear()
        study.report(out=str(tmp / f"report-{items}"))
        counts["report"] = sum(proxy["requests"].values())
    return counts


def test_reading_commands_make_as_many_requests_for_ten_times_the_rows(
    tmp_path: Path, s3_server: str, s3_bucket: str
) -> None:
    small = _requests(tmp_path, s3_server, s3_bucket, 64)
    large = _requests(tmp_path, s3_server, s3_bucket, 640)  # 10x the rows and fragments
    assert large == small, (small, large)
    # 3 solutions and 1 grades partitions, the items snapshot, locks, manifests: a bound that
    # does not move with the rows.
    assert small["status"] <= 60 and small["report"] <= 120, small
