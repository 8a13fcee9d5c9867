"""The driver in-process (`--no-ray`): budget cap, exit codes, cache, force, selections, stages,
manifests. The same `ShardRunner` runs on Ray (see test_ray_faults.py)."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow.compute as pc
import pytest
from runtime_files import write_study

from itemeval.cli.main import main
from itemeval.config import load_study
from itemeval.datasets import table_to_items
from itemeval.errors import ExitCode, GateDeclined
from itemeval.planning import commit_plan, make_plan
from itemeval.planning._item_index import part_runs
from itemeval.runtime import RunContext, ShardRunner, generate_shards, grade_shards
from itemeval.runtime._driver import RunOptions, _pending, run_study
from itemeval.store import StudyStore, latest_manifest, list_manifests, read_manifest
from itemeval.store._compact import compact_partition

INLINE = RunOptions(no_ray=True, yes=True, quiet=True)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "default-cache"))


def _solutions(store_url: str):
    return StudyStore.open(store_url).read(
        "solutions", columns=["item_id", "epoch", "status", "cached", "usd", "error_code"]
    )


def test_budget_cap_stops_dispatch_before_max_usd(tmp_path):
    # A verbose model writes far more than the estimate assumes, so only the in-run cap (spend
    # plus reservations, scaled by the observed overrun) keeps the run under max_usd.
    overrides = {
        "endpoints.sim.sim": {"models": {"verbose": {"ability": 0.7, "verbosity": 60}}},
        "models": [{"id": "sim/verbose", "endpoint": "sim"}],
        "facets.prompt": ["builtin:cot"],
        "facets.grader": [],
        "budget.dev_items": 30,
        "runtime.shard_size": 4,
        "runtime.shards_in_flight": 2,
    }
    study = load_study(write_study(tmp_path, **overrides))
    estimate = make_plan(study).estimate
    generate_estimate = sum(line.usd for line in estimate.lines if line.stage == "generate")
    max_usd = generate_estimate * 1.2
    study = load_study(write_study(tmp_path, **overrides, **{"budget.max_usd": max_usd}))
    outcome = run_study(study, RunOptions(no_ray=True, yes=True, quiet=True, stages=("generate",)))
    assert outcome.status == "budget_cap" and outcome.exit_code == ExitCode.BUDGET_CAP
    assert outcome.spent_usd <= max_usd
    assert outcome.spent_usd > generate_estimate * 0.5  # it did run until near the cap
    rows = _solutions(study.store_url)
    assert 0 < rows.num_rows < 60
    manifest = latest_manifest(StudyStore.open(study.store_url))
    assert manifest.outcome == "budget_cap" and manifest.spend.usd == pytest.approx(
        outcome.spent_usd
    )


def test_cells_in_error_exit_1_and_a_rerun_retries_only_them(tmp_path):
    failing = {
        "endpoints.sim.sim": {"faults": {"server_error": 0.3}},
        "endpoints.sim.max_attempts": 1,
    }
    study = load_study(write_study(tmp_path, **failing, **{"facets.grader": []}))
    first = run_study(study, INLINE)
    assert first.exit_code == ExitCode.CELL_ERRORS
    errors = first.stages["generate"].errors
    assert set(errors) == {"server_error"} and sum(errors.values()) > 0
    rows = _solutions(study.store_url)
    ok_before = pc.sum(pc.equal(rows.column("status"), "ok")).as_py()

    clean = load_study(write_study(tmp_path, **{"facets.grader": []}))
    second = run_study(clean, INLINE)
    assert second.exit_code == ExitCode.OK
    # only the errored cells were generated again
    assert second.stages["generate"].counts.planned == sum(errors.values())
    rows = _solutions(clean.store_url)
    assert rows.num_rows == ok_before + sum(errors.values())
    assert pc.all(pc.equal(rows.column("status"), "ok")).as_py()


def test_cache_answers_a_second_study_and_never_mixes_replications(tmp_path):
    first = load_study(write_study(tmp_path / "a", **{"cache.location": str(tmp_path / "cache")}))
    run_study(first, INLINE)
    spent_first = _solutions(first.store_url)
    assert not pc.any(spent_first.column("cached")).as_py()

    # Another study, same conditions, one more replication, another store: epochs 0 and 1 come
    # from the cache, epoch 2 is new (a replication never gets another replication's answer).
    second = load_study(
        write_study(
            tmp_path / "b",
            **{
                "study": "other",
                "cache.location": str(tmp_path / "cache"),
                "facets.replications": 3,
            },
        )
    )
    outcome = run_study(second, INLINE)
    # The summary says where those cells came from, and how to bypass the cache.
    assert f"came from the response cache ({tmp_path / 'cache'})" in outcome.message
    assert "`--force` calls the providers again" in outcome.message
    rows = _solutions(second.store_url)
    cached = rows.filter(rows.column("cached"))
    fresh = rows.filter(pc.invert(rows.column("cached")))
    assert set(cached.column("epoch").to_pylist()) == {0, 1}
    assert set(fresh.column("epoch").to_pylist()) == {2}
    assert pc.sum(cached.column("usd")).as_py() == 0
    assert cached.num_rows == spent_first.num_rows


def test_force_calls_again_and_condition_narrows(tmp_path):
    study = load_study(write_study(tmp_path, **{"facets.grader": []}))
    run_study(study, INLINE)
    before = StudyStore.open(study.store_url).read("solutions", dedup=False).num_rows
    cid = make_plan(study).design.generate[0].id
    forced = run_study(
        study,
        RunOptions(
            no_ray=True, yes=True, quiet=True, force=True, condition=cid[:20], stages=("generate",)
        ),
    )
    gen = forced.stages["generate"]
    assert gen.counts.planned == 24 * 2  # one condition: 24 items x 2 epochs
    assert gen.spend.calls == gen.counts.planned and gen.counts.cached == 0
    raw = StudyStore.open(study.store_url).read("solutions", dedup=False)
    assert raw.num_rows == before + gen.counts.planned
    assert _solutions(study.store_url).num_rows == 4 * 24 * 2  # still one logical row per key


def test_generate_then_grade_as_separate_commands(tmp_path, capsys):
    path = write_study(tmp_path)
    base = ["--no-ray", "--yes", "--quiet"]
    assert main(["generate", str(path), *base]) == 0
    store = StudyStore.open(load_study(path).store_url)
    assert store.condition_ids("solutions") and not store.condition_ids("grades")
    assert main(["grade", str(path), *base, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["status"] == "completed"
    assert payload["stages"]["grade"]["done"] == 2 * 4 * 24 * 2
    assert main(["run", str(path), "--no-ray", "--yes"]) == 0
    assert "Nothing left to do" in capsys.readouterr().out
    assert main(["status", str(path), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)["conditions"]
    assert all(row["pending"] == 0 for row in status)
    assert sum(row["done"] for row in status if row["stage"] == "grades") == 384


def test_manifest_records_the_run_and_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("SIM_TEST_KEY", "sk-canary-manifest-0123456789")
    study = load_study(
        write_study(tmp_path, **{"endpoints.sim.api_key_env": "SIM_TEST_KEY", "facets.grader": []})
    )
    outcome = run_study(study, INLINE)
    store = StudyStore.open(study.store_url)
    (run_id,) = list_manifests(store)
    manifest = read_manifest(store, run_id)
    assert run_id == outcome.run_id and manifest.outcome == "completed"
    assert manifest.config_hash == study.content_hash
    assert {d.name for d in manifest.datasets} == {"arithmetic", "science-mc"}
    assert len(manifest.conditions) == 4 + 1
    assert manifest.prompt_hashes and manifest.estimate is not None
    assert manifest.counts["generate"].done == 4 * 24 * 2
    assert manifest.spend.usd > 0 and manifest.versions.get("itemeval")
    raw = store.manifests.join(f"{run_id}.json").read_text()
    assert "sk-canary" not in raw  # the key's value never; its variable's name may appear


def _context(study, plan, run_id: str) -> RunContext:
    """What a worker gets, for running one shard by hand."""
    return RunContext(
        run_id=run_id,
        store_url=study.store_url,
        endpoints=dict(study.endpoints),
        generate=plan.design.generate_by_id(),
        grade=plan.design.grade_by_id(),
        pricing=plan.pricing,
        concurrency={"sim": 2},
    )


def test_a_cancelled_shard_writes_the_calls_that_finished(tmp_path):
    slow = {
        "endpoints.sim.sim": {"latency": {"median_ms": 40}},
        "endpoints.sim.max_concurrency": 2,
        "facets.grader": [],
    }
    study = load_study(write_study(tmp_path, **slow))
    plan = make_plan(study)
    commit_plan(plan)
    shard = next(
        generate_shards(
            plan.pending_generate, part_runs(plan.items), shard_size=40, usd_per_cell={}
        )
    )
    context = _context(study, plan, "cancel-test")

    async def run_then_cancel() -> None:
        runner = ShardRunner(context)
        task = asyncio.create_task(runner.run(shard))
        await asyncio.sleep(0.2)  # the shard needs 24 cells x 40 ms / 2 = 0.48 s
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await runner.aclose()

    asyncio.run(run_then_cancel())
    rows = _solutions(study.store_url)
    assert 4 <= rows.num_rows < shard.size  # what finished in 0.2 s at 2 x 40 ms, not more
    assert pc.all(pc.equal(rows.column("status"), "ok")).as_py()


def _committed_generate_shards(tmp_path):
    """A study without a grader, planned and committed, and its generate shards of 8 cells."""
    study = load_study(write_study(tmp_path, **{"facets.grader": []}))
    plan = make_plan(study)
    commit_plan(plan)
    shards = generate_shards(
        plan.pending_generate, part_runs(plan.items), shard_size=8, usd_per_cell={}
    )
    return study, plan, list(shards)


def test_shards_reading_one_part_at_once_convert_it_once(tmp_path, monkeypatch):
    # A run's first shards start together and read their items on threads; each used to
    # convert the same part (a 10,000-item part converted 3-4 times at 20,000 items).
    study, plan, shards = _committed_generate_shards(tmp_path)
    first_part = shards[0].part, shards[0].dataset
    same_part = [s for s in shards if (s.part, s.dataset) == first_part]
    assert len(same_part) >= 4
    converted = []

    def slow_convert(table):
        converted.append(table.num_rows)
        time.sleep(0.05)  # a large part: the other readers arrive meanwhile
        return table_to_items(table)

    monkeypatch.setattr("itemeval.runtime._shard_reads.table_to_items", slow_convert)
    runner = ShardRunner(_context(study, plan, "parts-test"))
    with ThreadPoolExecutor(max_workers=len(same_part)) as pool:
        read = list(pool.map(runner.read_items, same_part))
    assert len(converted) == 1
    assert all(items is read[0] for items in read)  # one dict, shared
    assert {cell for s in same_part for cell in s.cells.column("item_id").to_pylist()} <= set(
        read[0]
    )


def test_readers_of_another_part_do_not_wait_for_a_conversion(tmp_path, monkeypatch):
    study, plan, shards = _committed_generate_shards(tmp_path)
    by_part = {(s.dataset, s.part): s for s in shards}
    assert len(by_part) >= 2
    first, second = list(by_part.values())[:2]
    started = []
    other_started = threading.Event()

    def convert(table):
        started.append(table.num_rows)
        if len(started) == 1:  # the first conversion waits until the other has begun
            overlapped.append(other_started.wait(timeout=2.0))
        else:
            other_started.set()
        return table_to_items(table)

    overlapped: list[bool] = []
    monkeypatch.setattr("itemeval.runtime._shard_reads.table_to_items", convert)
    runner = ShardRunner(_context(study, plan, "parts-test"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(runner.read_items, [first, second]))
    assert len(started) == 2 and overlapped == [True]


def test_a_pilot_runs_first_then_asks_again_before_the_rest(tmp_path, monkeypatch, capsys):
    study = load_study(write_study(tmp_path, **{"facets.grader": []}))
    # Without --yes and without a terminal, the pilot runs, then the gate stops the rest.
    with pytest.raises(GateDeclined) as info:
        run_study(study, RunOptions(no_ray=True, quiet=True, pilot=2, interactive=False))
    assert "The pilot (2 item(s) of each dataset) spent $" in str(info.value)
    assert "--yes" in str(info.value) and info.value.exit_code == ExitCode.GATE_DECLINED
    pilot_rows = _solutions(study.store_url).num_rows
    assert pilot_rows == 4 * 2 * 2 * 2  # 4 conditions x 2 datasets x 2 items x 2 epochs
    # Asked and answered yes: the rest runs; the pilot's cells are not called again.
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    outcome = run_study(study, RunOptions(no_ray=True, quiet=True, pilot=0.1, interactive=True))
    assert outcome.exit_code == ExitCode.OK, outcome.message
    assert "estimated at $" in capsys.readouterr().out  # the question the gate asked
    store = StudyStore.open(study.store_url)
    rows = store.read("solutions", columns=["item_id"], dedup=False)
    assert rows.num_rows == 4 * 24 * 2  # every cell once: the pilots' cells were not redone
    outcomes = [read_manifest(store, run).outcome for run in list_manifests(store)]
    assert outcomes == ["completed", "completed"]  # the pilot, then the rest


def test_a_grade_shard_reads_its_solutions_when_their_fragments_were_compacted(tmp_path):
    # The shard names the fragments its solutions were in when it was made; a compaction
    # that replaced them before it ran makes the worker read the partition instead.
    study = load_study(write_study(tmp_path, **{"facets.grader": [], "runtime.shard_size": 8}))
    generated = run_study(
        study, RunOptions(no_ray=True, quiet=True, yes=True, stages=("generate",))
    )
    assert generated.exit_code == ExitCode.OK, generated.message
    plan = make_plan(study)
    (scorer,) = [c for c in plan.design.grade if c.kind == "scorer"]
    pending = _pending(plan, "grade")
    gen = plan.design.generate[0].id
    shard = next(
        s
        for s in grade_shards(
            plan.store,
            pending,
            [gen],
            [scorer.id],
            part_runs(plan.items),
            shard_size=8,
            usd_per_cell={},
            scorers={scorer.id},
        )
    )
    named = set(shard.cells.column("fragment").to_pylist())
    assert named and compact_partition(plan.store, "solutions", gen).fragments_read > 1
    context = _context(study, plan, "compacted-test")

    async def grade() -> None:
        runner = ShardRunner(context)
        summary = await runner.run(shard)
        await runner.aclose()
        assert not summary.errors and summary.ok == shard.size

    asyncio.run(grade())
    grades = plan.store.read("grades", [scorer.id], columns=["item_id", "status"], dedup=False)
    assert grades.num_rows == shard.size
    assert pc.all(pc.equal(grades.column("status"), "ok")).as_py()
