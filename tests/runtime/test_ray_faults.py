"""End to end on local Ray against `itemeval sim-server` with injected faults: a worker killed by
its pid mid-generate, the driver interrupted once, re-runs; then every cell exactly once on disk,
the provider paid at most the calls in flight again, and every recorded dollar in a row or in
the manifest's unstored spend."""

from __future__ import annotations

import os
import signal
import threading
import time

import pyarrow.compute as pc
import pytest
from runtime_files import assert_complete, distinct_calls, sim_server, sim_stats, write_study

from itemeval.config import load_study
from itemeval.errors import ExitCode
from itemeval.runtime import RayExecutor, RunOptions, run_study, with_shares
from itemeval.store import StudyStore, list_manifests, read_manifest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

FAULTS = [
    "--latency-ms",
    "20",
    "--fault-429",
    "0.10",
    "--fault-500",
    "0.02",
    "--fault-timeout",
    "0.01",
    "--retry-after",
    "0.2",
    "--hang-s",
    "5",
]


class Saboteur:
    """Builds the run's RayExecutor, then kills one worker process once shards are flowing,
    and (optionally) interrupts the driver like a Ctrl-C."""

    def __init__(self, store_url: str, *, interrupt_after_s: float | None):
        self.store = StudyStore.open(store_url)
        self.interrupt_after_s = interrupt_after_s
        self.killed: list[int] = []
        self.executor: RayExecutor | None = None

    def __call__(self, context):
        self.executor = RayExecutor(
            with_shares(context, 2), workers=2, per_worker=2, shared_limiters=False
        )
        threading.Thread(target=self._sabotage, daemon=True).start()
        return self.executor

    def _sabotage(self) -> None:
        assert self.executor is not None
        pids = self.executor.worker_pids()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.store.condition_ids("solutions"):
            time.sleep(0.05)
        time.sleep(0.3)  # mid-generate: shards are in flight
        os.kill(pids[0], signal.SIGKILL)
        self.killed.append(pids[0])
        if self.interrupt_after_s is not None:
            time.sleep(self.interrupt_after_s)
            os.kill(os.getpid(), signal.SIGINT)


def test_faults_kill_interrupt_and_rerun_leave_every_cell_exactly_once(
    tmp_path, ray_local, monkeypatch
):
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "cache"))
    with sim_server(*FAULTS) as url:
        path = write_study(
            tmp_path,
            **{
                "endpoints.sim.base_url": url,
                "endpoints.sim.timeout_s": 1.0,
                "endpoints.sim.max_attempts": 3,
                "endpoints.sim.backoff_initial_s": 0.05,
                "endpoints.sim.backoff_max_s": 0.5,
            },
        )
        study = load_study(path)
        options = RunOptions(yes=True, quiet=True)

        # 1. A worker is killed mid-generate and the driver is interrupted once.
        saboteur = Saboteur(study.store_url, interrupt_after_s=2.0)
        first = run_study(study, options, executor_factory=saboteur)
        assert saboteur.killed, "no worker was killed"
        assert first.stages["generate"].redispatched >= 1  # the killed worker's shard(s)
        assert first.status == "interrupted" and first.exit_code == ExitCode.INTERRUPTED
        store = StudyStore.open(study.store_url)
        assert read_manifest(store, first.run_id).outcome == "interrupted"

        # 2. The same command continues; faults may leave some cells in error (exit 1).
        second = run_study(study, options)
        assert second.status == "completed"
        assert second.exit_code in (ExitCode.OK, ExitCode.CELL_ERRORS)
        answered = sim_stats(url)["ok"]

    # 3. A clean re-run against a server without faults leaves no provider error.
    with sim_server("--latency-ms", "5") as url:
        study = load_study(write_study(tmp_path, **{"endpoints.sim.base_url": url}))
        third = run_study(study, options)
        assert third.exit_code in (ExitCode.OK,), third.message
        again = run_study(study, options)
        assert again.status == "nothing_to_do"
        answered += sim_stats(url)["ok"]

    assert_complete(study.store_url, generate=4, grade=2, epochs=2, items=24)
    # Paid twice, counted at the provider: its answers against the distinct calls the stored
    # rows needed (byte-identical judge requests are one call: the cache answers the second).
    # Bound: the kill and the interrupt each lose at most the calls in flight (32) plus the
    # answers of the last journal interval.
    needed = distinct_calls(study.store_url)
    assert needed <= answered <= needed + 2 * (32 + 32), (answered, needed)
    manifests = [read_manifest(store, run) for run in list_manifests(store)]
    outcomes = [m.outcome for m in manifests]
    # the clean run writes a manifest only if the faulty runs left errored cells to redo
    assert outcomes in (["interrupted", "completed"], ["interrupted", "completed", "completed"])
    # Every dollar the ledger counted is in a row of its run, or in its unstored spend.
    for manifest in manifests:
        stored = 0.0
        for stage in ("solutions", "grades"):
            rows = store.read(stage, columns=["run_id", "usd"], dedup=False)
            mine = rows.filter(pc.equal(rows.column("run_id"), manifest.run_id))
            stored += pc.sum(mine.column("usd")).as_py() or 0.0
        spend = manifest.spend
        assert spend.usd == pytest.approx(stored + spend.unstored_usd, abs=1e-9), manifest.run_id
        assert spend.usd > 0 or spend.calls == 0  # (a re-run may be served by the cache)
