"""Identical requests within one run are sent once, whichever workers hold their cells.

Two generate conditions that give the same answer to the same item and epoch make the judge's
request for the two grade cells identical (same rubric, item and answer: same request hash).
The test makes every grade shard of the stage be in flight at once on two Ray workers, so two
such cells would both miss the response cache unless the second waits for the first (the
`BARRIER` of `shards.IdenticalCells`). Physical truth: the sim-server's count of requests
against the distinct request keys of the stored rows."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow.compute as pc
import pytest
import yaml
from runtime_files import distinct_calls, sim_server, sim_stats, write_study

from itemeval.config import load_study
from itemeval.errors import ExitCode
from itemeval.planning import make_plan
from itemeval.runtime import RunOptions, run_study
from itemeval.store import StudyStore, latest_manifest

try:  # storage options that name the variables holding the test servers' credentials
    from s3_servers import S3_KEYS_BY_NAME as S3_KEYS
except ImportError:  # a checkout whose studies may still hold them
    S3_KEYS = {"key": "testing", "secret": "testing"}


@pytest.mark.ray
@pytest.mark.s3
def test_identical_requests_on_two_workers_are_paid_once(tmp_path, ray_local, s3_server, s3_bucket):
    # The store and the cache on S3, as on a cluster; 8 grade shards of 24 judge cells (one
    # per generate condition and dataset), all 8 in flight at once on the 2 workers.
    with sim_server("--latency-ms", "150") as url:
        study = load_study(
            write_study(
                tmp_path,
                **{
                    "store": f"{s3_bucket}/studies/same",
                    "cache.location": f"{s3_bucket}/cache",
                    "storage_options": {
                        **S3_KEYS,  # Ray's workers may predate the test's AWS variables
                        "client_kwargs": {"endpoint_url": s3_server, "region_name": "us-east-1"},
                    },
                    "endpoints.sim.base_url": url,
                    "runtime.shard_size": 24,
                    "runtime.shards_in_flight": 8,
                },
            )
        )
        outcome = run_study(study, RunOptions(yes=True, quiet=True))
        requests = sim_stats(url)["requests"]
    assert outcome.exit_code == ExitCode.OK, outcome.message
    store = StudyStore.open(study.store_url)
    grades = store.read("grades", columns=["cached", "request_hash", "epoch"], dedup=False)
    judged = grades.filter(pc.is_valid(grades.column("request_hash")))
    assert judged.num_rows == 4 * 24 * 2  # every judge cell stored once
    assert requests == distinct_calls(study.store_url)  # each distinct request sent once
    # The study has identical judge requests (the same short answers), answered by the cache.
    distinct = judged.group_by(["request_hash", "epoch"]).aggregate([]).num_rows
    repeats = pc.sum(judged.column("cached")).as_py()
    assert repeats == judged.num_rows - distinct > 0
    manifest = latest_manifest(store)
    assert manifest.spend.calls == requests
    assert manifest.counts["grade"].cached == repeats


def _twin_items(folder: Path) -> Path:
    """An item-format dataset of 6 items, each asked twice under two ids (3 x 2 pairs)."""
    folder.mkdir(parents=True, exist_ok=True)
    meta = {
        "identifier": "twins",
        "title": "items asked twice",
        "description": "pairs of identical items under different ids",
        "creator": "itemeval tests",
        "publisher": "itemeval",
        "created": "2026-11-27",
        "language": "eng",
        "license": "CC0-1.0",
        "source": "generated",
        "subject": "arithmetic",
        "hasPart": ["twins.jsonl"],
    }
    (folder / "twins.yaml").write_text(yaml.safe_dump(meta))
    with open(folder / "twins.jsonl", "w") as handle:
        for i in range(6):
            item = {"modality": "single-value", "prompt": f"What is {i} plus 2?", "response": i + 2}
            handle.write(json.dumps({"identifier": f"twins.{i}", **item}) + "\n")
            handle.write(json.dumps({"identifier": f"twins.{i}b", **item}) + "\n")
    return folder


def test_identical_requests_in_one_shard_are_sent_once(tmp_path):
    with sim_server() as url:
        study = load_study(
            write_study(
                tmp_path,
                **{
                    "datasets": [{"name": "twins", "path": str(_twin_items(tmp_path / "twins"))}],
                    "endpoints.sim.base_url": url,
                    "models": [{"id": "sim/strong", "endpoint": "sim"}],
                    "facets.prompt": ["builtin:direct"],
                    "runtime.shard_size": 12,  # both of each pair in one shard
                },
            )
        )
        outcome = run_study(study, RunOptions(no_ray=True, yes=True, quiet=True))
        requests = sim_stats(url)["requests"]
    assert outcome.exit_code == ExitCode.OK, outcome.message
    store = StudyStore.open(study.store_url)
    solutions = store.read("solutions", columns=["cached", "text"], dedup=False)
    assert solutions.num_rows == 12 * 2  # every cell stored, each pair with one answer
    assert pc.sum(solutions.column("cached")).as_py() == 6 * 2
    assert requests == distinct_calls(study.store_url) == (6 * 2) * 2  # generate and judge


@pytest.mark.ray
def test_workers_not_ready_are_starting_while_the_cluster_has_room(ray_local):
    from itemeval.runtime import RayExecutor

    executor = object.__new__(RayExecutor)  # its fleet only: no worker, no limiter
    executor._workers, executor._requested = [], 0
    # The session's Ray has 2 CPUs: two workers have a place, a third waits for one.
    assert executor._not_ready(2) == "cluster: 0 worker(s) ready, 2 starting"
    assert executor._not_ready(3) == "cluster: 0 worker(s) ready, 2 starting, 1 waiting for room"


def test_the_estimate_counts_the_judge_calls_the_grade_stage_makes(tmp_path):
    # After the generate stage the answers are stored: the judge's remaining calls are the
    # distinct requests among its pending cells, and the grade stage makes exactly those.
    with sim_server() as url:
        study = load_study(write_study(tmp_path, **{"endpoints.sim.base_url": url}))
        options = RunOptions(no_ray=True, yes=True, quiet=True)
        generated = run_study(study, replace(options, stages=("generate",)))
        assert generated.exit_code == ExitCode.OK, generated.message
        before = sim_stats(url)["requests"]
        estimate = make_plan(study).estimate
        (judge,) = [line for line in estimate.lines if line.stage == "grade" and line.calibration]
        graded = run_study(study, replace(options, stages=("grade",)))
        sent = sim_stats(url)["requests"] - before
    assert graded.exit_code == ExitCode.OK, graded.message
    assert judge.remaining_cells == 4 * 24 * 2
    assert judge.remaining_calls == sent < judge.remaining_cells
