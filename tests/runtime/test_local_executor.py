"""A local run: its first shards in its own process, Ray workers joining (`local_ray: always`),
the ledger and the limits handed to the shared actors; the cap, the limits and the rows hold
across both, checked at the provider and on disk."""

from __future__ import annotations

import re

import pyarrow.compute as pc
import pytest
from runtime_files import DATASETS, physical_rows, sim_server, sim_stats, write_study

from itemeval.config import load_study
from itemeval.errors import ExitCode
from itemeval.runtime import RunOptions, run_study
from itemeval.store import StudyStore, latest_manifest

pytestmark = [pytest.mark.ray]


def test_ray_workers_join_a_local_run_and_the_cap_and_limits_hold(tmp_path, ray_local):
    # The server enforces the limits the study declares (the RPM over two seconds of its rate):
    # the in-process runner and Ray's workers hold them together, through the machine's limiter.
    limits = ("--rpm", "6000", "--burst-s", "2", "--max-concurrency", "6")
    with sim_server("--latency-ms", "40", *limits) as url:
        study = load_study(
            write_study(
                tmp_path,
                **{
                    "endpoints.sim.base_url": url,
                    "endpoints.sim.max_concurrency": 6,
                    "endpoints.sim.requests_per_minute": 6000,
                    "facets.grader": [],
                    "budget.max_usd": 1000.0,  # a cap: every call reserves through the ledger
                    "runtime.local_ray": "always",
                    "runtime.workers": 2,
                },
            )
        )
        outcome = run_study(study, RunOptions(yes=True, quiet=True))
        stats = sim_stats(url, window_s=60)
    assert outcome.exit_code == ExitCode.OK, outcome.message
    assert "on Ray workers: Ray workers joined (2): runtime.local_ray: always" in outcome.message
    where = re.search(r"(\d+) shard\(s\) ran in this process, (\d+) on Ray", outcome.message)
    assert where is not None and int(where.group(2)) > 0  # the workers did take shards
    cells = 4 * 24 * 2
    assert physical_rows(study.store_url) == cells
    assert stats["ok"] == cells  # nothing paid twice across the hand-over
    assert stats["max_concurrent"] <= 6  # the runner's slots were counted in the pool
    assert stats["over_limit"] == 0, stats
    rows = StudyStore.open(study.store_url).read("solutions", columns=["usd"], dedup=False)
    spend = latest_manifest(StudyStore.open(study.store_url)).spend
    # Every dollar counted once, whichever ledger saw it: the one in this process, then the
    # actor that took its state over.
    assert spend.usd == pytest.approx(pc.sum(rows.column("usd")).as_py())


def test_always_starts_no_ray_for_a_run_whose_shards_all_fit_in_the_process(tmp_path) -> None:
    # One dataset (shards do not cross items parts), one shard per condition, four conditions,
    # four places in the process: no shard ever waits, so Ray's workers would get nothing, and
    # Ray (seconds to start and stop) stays out.
    study = load_study(
        write_study(
            tmp_path,
            **{
                "datasets": [{"name": "arithmetic", "path": str(DATASETS / "arithmetic")}],
                "facets.grader": [],
                "runtime.local_ray": "always",
                "runtime.shard_size": 1000,
                "runtime.shards_in_flight": 4,
            },
        )
    )
    outcome = run_study(study, RunOptions(yes=True, quiet=True))
    assert outcome.exit_code == ExitCode.OK, outcome.message
    assert "4 shard(s) ran in this process (runtime.local_ray: always, but no shard waited" in (
        outcome.message
    )
    assert "on Ray" not in outcome.message
    assert physical_rows(study.store_url) == 4 * 12 * 2
