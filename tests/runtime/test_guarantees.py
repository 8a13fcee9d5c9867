"""The promises, checked against physical truth: the provider's own count of answers
(`/_sim/stats` of `itemeval sim-server`), rows on disk read without deduplication, and dollars
recorded against the cap.

* a failed store write pays nothing twice (paid answers are in the response cache first);
* renaming a model, a model config, a prompt file or a grader sends no request again (the
  cache is keyed by request content);
* `budget.max_usd` holds on a model far more verbose than the estimate, on Ray;
* a SIGKILLed driver re-pays at most the calls in flight plus about a second of answers.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest
from runtime_files import (
    physical_rows,
    sim_server,
    sim_stats,
    write_items,
    write_study,
)

from itemeval.config import load_study
from itemeval.errors import ExitCode
from itemeval.planning import make_plan
from itemeval.runtime import RunOptions, ShardSummary, run_study, with_shares
from itemeval.runtime._dispatch import WorkerLost
from itemeval.runtime._inline_executor import InlineExecutor
from itemeval.store import StudyStore, latest_manifest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chaos"))
from s3_fault_proxy import s3_fault_proxy
from s3_servers import S3_KEYS_BY_NAME

pytestmark = [pytest.mark.ray]

RAY = RunOptions(yes=True, quiet=True, stages=("generate",))
INLINE = RunOptions(no_ray=True, yes=True, quiet=True)


def _stored(store_url: str, stage: str = "solutions"):
    return StudyStore.open(store_url).read(
        stage, columns=["item_id", "epoch", "status", "cached", "usd"], dedup=False
    )


@pytest.mark.s3
def test_a_failed_store_write_pays_nothing_twice(tmp_path, ray_local, s3_server, s3_bucket):
    # The first solutions fragment fails to be written, whatever botocore retries; the shard is
    # dispatched again and must find its answers in the response cache.
    with (
        sim_server("--latency-ms", "20") as url,
        s3_fault_proxy(s3_server, fail_objects=1, only_paths="/solutions/") as proxy,
    ):
        study = load_study(
            write_study(
                tmp_path,
                **{
                    "store": f"{s3_bucket}/studies/failed-write",
                    "storage_options": {
                        **S3_KEYS_BY_NAME,  # Ray's workers may predate the AWS variables
                        "client_kwargs": {"endpoint_url": proxy["url"], "region_name": "us-east-1"},
                    },
                    "endpoints.sim.base_url": url,
                    "facets.grader": [],
                },
            )
        )
        outcome = run_study(study, RAY)
        answered = sim_stats(url)["ok"]
    cells = 4 * 24 * 2
    assert proxy["failed"] >= 1, (proxy, outcome.message)
    assert outcome.status == "completed" and outcome.exit_code == ExitCode.OK, outcome.message
    assert outcome.stages["generate"].redispatched >= 1
    assert answered == cells  # the provider answered every cell exactly once
    rows = _stored(study.store_url)
    assert rows.num_rows == cells  # physical rows, no duplicate
    assert pc.sum(rows.column("cached")).as_py() >= 8  # the re-dispatched shard, from the cache
    # Every dollar is accounted: what the rows cost plus what the failed shard paid.
    spend = latest_manifest(StudyStore.open(study.store_url)).spend
    stored_usd = pc.sum(rows.column("usd")).as_py()
    assert spend.unstored_usd > 0
    assert spend.usd == pytest.approx(stored_usd + spend.unstored_usd)


PROMPT = "Solve the task.\n\n{{ input }}\n\n{{ answer_instructions }}\n"


def test_renames_send_no_request(tmp_path):
    cache = str(tmp_path / "cache")

    def study(folder: Path, *, model_name, config_name, prompt_file, grader):
        (folder / "prompts").mkdir(parents=True, exist_ok=True)
        (folder / "prompts" / f"{prompt_file}.txt").write_text(PROMPT)
        return load_study(
            write_study(
                folder,
                **{
                    "endpoints.sim.base_url": url,
                    "models": [{"id": "sim/strong", "endpoint": "sim", "name": model_name}],
                    "facets.prompt": [prompt_file],
                    "facets.model_config": [{"name": config_name, "temperature": 0.7}],
                    "facets.grader": [grader],
                    "graders": {grader: {"model": "sim/judge", "endpoint": "sim"}},
                    "cache.location": cache,
                    "budget.dev_items": 6,
                },
            )
        )

    with sim_server() as url:
        first = study(
            tmp_path / "a", model_name="Strong", config_name="warm", prompt_file="mine", grader="j"
        )
        assert run_study(first, INLINE).exit_code == ExitCode.OK
        before = sim_stats(url)["requests"]
        assert before == 2 * (6 + 6) * 2  # generate and judge calls: 12 items x 2 epochs each
        renamed = study(
            tmp_path / "b",
            model_name="Mighty",
            config_name="sampled",
            prompt_file="renamed",
            grader="referee",
        )
        outcome = run_study(renamed, INLINE)
        after = sim_stats(url)["requests"]
    assert outcome.exit_code == ExitCode.OK, outcome.message
    first_ids = {c.id for c in make_plan(first).design.generate}
    assert not first_ids & {c.id for c in make_plan(renamed).design.generate}  # new ids
    assert after == before  # ... and not one request
    store = StudyStore.open(renamed.store_url)
    (judge,) = make_plan(renamed).design.judges
    solutions = store.read("solutions", columns=["cached"], dedup=False)
    grades = store.read("grades", [judge.id], columns=["cached"], dedup=False)
    assert solutions.num_rows == grades.num_rows == 24
    assert pc.all(solutions.column("cached")).as_py() and pc.all(grades.column("cached")).as_py()


def test_the_budget_cap_holds_on_a_verbose_model_on_ray(tmp_path, ray_local):
    # The setup: a model 60x more verbose than the estimate assumes, chain of thought,
    # 30 items, the default shard size, max_usd = 1.2 x the estimate.
    overrides = {
        "endpoints.sim.sim": {"models": {"verbose": {"ability": 0.7, "verbosity": 60}}},
        "models": [{"id": "sim/verbose", "endpoint": "sim"}],
        "facets.prompt": ["builtin:cot"],
        "facets.grader": [],
        "budget.dev_items": 15,
    }
    study = load_study(write_study(tmp_path, **overrides))
    estimate = make_plan(study).estimate
    max_usd = 1.2 * sum(line.usd for line in estimate.lines if line.stage == "generate")
    study = load_study(write_study(tmp_path, **overrides, **{"budget.max_usd": max_usd}))
    outcome = run_study(study, RAY)
    assert outcome.status == "budget_cap" and outcome.exit_code == ExitCode.BUDGET_CAP
    rows = _stored(study.store_url)
    stored_usd = pc.sum(rows.column("usd")).as_py()
    spend = latest_manifest(StudyStore.open(study.store_url)).spend
    assert spend.usd <= max_usd and stored_usd <= max_usd
    assert spend.usd == pytest.approx(stored_usd)  # nothing failed: every dollar is in a row
    assert stored_usd > 0.5 * max_usd  # it ran until near the cap
    assert rows.num_rows < 30 * 2  # and stopped: the rest stays pending
    assert spend.not_sent > 0 and "did not fit" in outcome.message


def _kill_after(proc: subprocess.Popen, url: str, answers: int) -> None:
    """SIGKILL the driver once the provider has answered `answers` more calls (shards of 256
    cells are still running then: without the journal, their answers would all be lost)."""
    target = sim_stats(url)["ok"] + answers
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if sim_stats(url)["ok"] >= target:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            return
        time.sleep(0.05)
    raise AssertionError("no progress within 120 s")


@pytest.mark.slow
def test_a_killed_driver_repays_at_most_the_calls_in_flight(tmp_path):
    items, concurrency, latency_s = 600, 32, 0.2
    write_items(tmp_path / "sums", items)
    with sim_server(
        "--latency-ms", "200", "--fault-429", "0.03", "--fault-500", "0.02", "--retry-after", "0.2"
    ) as url:
        path = write_study(
            tmp_path,
            **{
                "datasets": [{"name": "sums", "path": str(tmp_path / "sums")}],
                "endpoints.sim.base_url": url,
                "endpoints.sim.max_concurrency": concurrency,
                "endpoints.sim.backoff_initial_s": 0.05,
                "endpoints.sim.backoff_max_s": 0.5,
                "facets.grader": [],
                "facets.prompt": ["builtin:direct"],
                "facets.replications": 1,
                "budget.policy": "full",
                "runtime.workers": 2,
                "runtime.shard_size": 256,  # a shard holds ~3 s of answers
            },
        )
        env = {**os.environ, "ITEMEVAL_CACHE_DIR": str(tmp_path / "cache")}
        env.pop("RAY_ADDRESS", None)
        command = [sys.executable, "-m", "itemeval", "generate", str(path), "--yes", "--quiet"]
        for _ in range(2):  # killed twice, mid-run
            proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
            _kill_after(proc, url, 300)
        finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        answered = sim_stats(url)["ok"]
    assert finished.returncode == 0, finished.stderr[-2000:]
    cells = 2 * items
    store_url = str(load_study(path).store_url)
    assert physical_rows(store_url) == cells
    paid_twice = answered - cells
    print(f"paid twice: {paid_twice}")
    per_kill = concurrency + concurrency / latency_s * 1.0  # in flight + one second of answers
    assert 0 <= paid_twice <= 2 * per_kill, paid_twice
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)


@pytest.mark.s3
def test_a_slow_store_write_never_stalls_the_calls_in_flight(tmp_path, s3_server, s3_bucket):
    # Every solutions fragment PUT takes 1.5 s. Calls answer in 20 ms; with writes on the event
    # loop, every call in flight during a write would wait for it (and a slow cache or store
    # could time answers out after they arrived, to be paid again).
    with (
        sim_server("--latency-ms", "20") as url,
        s3_fault_proxy(s3_server, only_paths="/solutions/", put_delay_s=1.5) as proxy,
    ):
        study = load_study(
            write_study(
                tmp_path,
                **{
                    "store": f"{s3_bucket}/studies/slow-writes",
                    "storage_options": {
                        **S3_KEYS_BY_NAME,
                        "client_kwargs": {"endpoint_url": proxy["url"], "region_name": "us-east-1"},
                    },
                    "endpoints.sim.base_url": url,
                    "endpoints.sim.max_concurrency": 4,
                    "facets.grader": [],
                    "runtime.shard_size": 4,
                    "runtime.shards_in_flight": 4,
                },
            )
        )
        outcome = run_study(study, RunOptions(no_ray=True, yes=True, quiet=True))
    assert outcome.exit_code == ExitCode.OK, outcome.message
    assert proxy["matching"] >= 10  # many slow fragment writes overlapped the calls
    latency = StudyStore.open(study.store_url).read("solutions", columns=["latency_ms"])
    assert pc.max(latency.column("latency_ms")).as_py() < 1000


def test_rows_of_a_shard_still_in_flight_after_a_stop_are_counted_as_stored(
    tmp_path, monkeypatch, capsys
):
    # A stop waits for the shards in flight, then cancels them; one that still has not
    # answered may have written rows no summary counts. The driver must find them too: their
    # dollars, and the cells and calls the manifest and the final progress line count.
    monkeypatch.setenv("ITEMEVAL_STOP_GRACE_S", "0.2")
    study = load_study(write_study(tmp_path, **{"runtime.shard_size": 4}))
    executor = _StuckAtStop()
    options = RunOptions(no_ray=True, yes=True, quiet=False)
    outcome = run_study(study, options, executor_factory=executor)
    assert executor.stuck is not None and outcome.status != "completed"
    store = StudyStore.open(study.store_url)
    manifest = latest_manifest(store)
    rows = store.read(
        "solutions", columns=["run_id", "usd", "item_id", "status", "cached"], dedup=False
    )
    mine = rows.filter(pc.equal(rows.column("run_id"), manifest.run_id))
    stuck = set(executor.stuck.cells.column("item_id").to_pylist())
    assert stuck <= set(mine.column("item_id").to_pylist())  # its rows are on disk
    stored = pc.sum(mine.column("usd")).as_py()
    assert outcome.stored_usd == pytest.approx(stored, abs=1e-9)
    assert manifest.spend.usd == pytest.approx(stored, abs=1e-9)
    assert manifest.spend.unstored_usd == pytest.approx(0.0, abs=1e-9)
    ok = pc.sum(pc.equal(mine.column("status"), "ok")).as_py()
    assert manifest.counts["generate"].done == ok == mine.num_rows
    assert manifest.spend.calls == mine.num_rows - pc.sum(mine.column("cached")).as_py()
    final = [line for line in capsys.readouterr().err.splitlines() if " in " in line]
    assert final and final[-1].startswith(f"generate {mine.num_rows:,}/"), final


class _InlineWrapper:
    """The in-process executor, made by the driver (it is the `executor_factory`), with
    whatever a subclass overrides in front of it."""

    inner: InlineExecutor | None = None  # until the driver calls it

    def __call__(self, context):
        self.inner = InlineExecutor(with_shares(context, 1), per_worker=2)
        return self

    def __getattr__(self, name):
        return getattr(self.inner, name)


class _StuckAtStop(_InlineWrapper):
    """The in-process executor, except that the first shard to write a fragment never
    answers (still in flight after every cancel), and its write asks the run to stop."""

    def __init__(self):
        self.stuck = None

    def in_flight(self):
        return self.inner.in_flight() + ([self.stuck] if self.stuck is not None else [])

    def poll(self, timeout):
        out = []
        for shard, outcome in self.inner.poll(timeout):
            if self.stuck is None and isinstance(outcome, ShardSummary) and outcome.fragment:
                self.stuck = shard
                os.kill(os.getpid(), signal.SIGTERM)  # the driver's handler: a stop request
                continue
            out.append((shard, outcome))
        return out


class _LostAfterWrite(_InlineWrapper):
    """The in-process executor, except that the first shards of `stage` that write a fragment
    report a lost worker instead of their summary: a worker killed between its write and its
    reply (the rows are on disk, the driver never hears of them)."""

    def __init__(self, stage: str, losses: int):
        self.stage, self.losses = stage, losses
        self.lost: list[str] = []

    def poll(self, timeout):
        out = []
        for shard, outcome in self.inner.poll(timeout):
            if (
                isinstance(outcome, ShardSummary)
                and outcome.fragment
                and shard.stage == self.stage
                and len(self.lost) < self.losses
            ):
                self.lost.append(outcome.fragment)
                outcome = WorkerLost("killed after its write")
            out.append((shard, outcome))
        return out


@pytest.mark.parametrize("stage", ["generate", "grade"])
def test_rows_of_a_worker_lost_after_its_write_are_counted_as_stored(tmp_path, stage):
    # The ledger counts every dollar paid; the manifest splits it into stored rows and unstored
    # spend. A worker that dies after writing its fragment never reports it: the driver must
    # still find those rows, or the manifest calls stored dollars unstored.
    study = load_study(write_study(tmp_path, **{"runtime.shard_size": 4}))
    executor = _LostAfterWrite(stage, losses=2)
    outcome = run_study(study, INLINE, executor_factory=executor)
    assert len(executor.lost) == 2 and outcome.stages[stage].redispatched == 2
    assert outcome.status == "completed", outcome.message
    store = StudyStore.open(study.store_url)
    manifest = latest_manifest(store)
    stored = 0.0
    for table in ("solutions", "grades"):
        rows = store.read(table, columns=["run_id", "usd"], dedup=False)
        mine = rows.filter(pc.equal(rows.column("run_id"), manifest.run_id))
        stored += pc.sum(mine.column("usd")).as_py() or 0.0
    assert stored > 0
    assert outcome.stored_usd == pytest.approx(stored, abs=1e-9)
    assert manifest.spend.usd == pytest.approx(stored, abs=1e-9)
    assert manifest.spend.unstored_usd == pytest.approx(0.0, abs=1e-9)
    # and each cell once on disk: the re-dispatched shards skipped what the lost ones wrote
    rows = store.read("solutions", columns=["item_id", "epoch"], dedup=False)
    assert rows.num_rows == store.read("solutions", columns=["item_id", "epoch"]).num_rows
