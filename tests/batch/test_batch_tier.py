"""The batch tier end to end against `itemeval sim-server`'s OpenAI Batch API and Anthropic
Message Batches, checked against physical truth: the server's own counts (`/_sim/stats`,
`batch`: submitted, ok, errored, expired...; `requests`: live calls), rows on disk read without
deduplication, the response cache, the batch records and the manifests.

* results land as ordinary rows with `tier = batch`, at half the live price, journaled to the
  response cache, counted in the manifest; a judge goes through a batch too;
* a driver SIGKILLed mid-batch, then run again: no batch submitted twice, no request paid twice;
* a create whose answer is lost, and a driver killed between a create and its record: the batch
  is found (OpenAI by its metadata, Anthropic by time and request count), never sent again;
* partial failures go into a second batch, then live; expiry and the deadline cancel and go live;
* the budget cap holds at the batch price; a second run leaves a running batch's cells to it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest
from batch_files import (
    REPO,
    batch_states,
    create_proxy,
    rows,
    run_cli,
    sim_server,
    write_study,
)

from itemeval.calls import generate_requests, worst_case_usd
from itemeval.config import load_study
from itemeval.errors import ExitCode
from itemeval.planning import make_plan
from itemeval.providers.types import Usage
from itemeval.runtime import RunOptions, generate_target, judge_target, run_study
from itemeval.store import ResponseCache, StudyStore, cache_key, latest_manifest

INLINE = RunOptions(no_ray=True, yes=True, quiet=True)
WIRES = ["openai", "anthropic"]


def _count(table, column: str, value) -> int:
    return int(pc.sum(pc.equal(table.column(column), value)).as_py() or 0)


@pytest.mark.parametrize("wire", WIRES)
def test_answers_land_as_batch_rows_at_the_batch_price(tmp_path, wire):
    with sim_server("--batch-delay-s", "0.3") as server:
        study = load_study(write_study(tmp_path, server.url, wire=wire, epochs=2, judge=True))
        outcome = run_study(study, INLINE)
        stats = server.stats()
    assert outcome.status == "completed" and outcome.exit_code == ExitCode.OK, outcome.message
    assert stats["requests"] == 0  # nothing went live
    solutions = rows(
        study.store_url,
        columns=[
            "item_id",
            "epoch",
            "status",
            "tier",
            "cached",
            "usd",
            "input_tokens",
            "output_tokens",
            "cached_input_tokens",
            "request_hash",
        ],
    )
    assert solutions.num_rows == 10  # one physical row per cell
    assert _count(solutions, "tier", "batch") == 10 and _count(solutions, "status", "ok") == 10
    grades = rows(study.store_url, "grades", ["grader", "tier", "cached", "usd", "status"])
    judged = grades.filter(pc.equal(grades.column("grader"), "sim/judge"))
    assert judged.num_rows == 10 and _count(judged, "tier", "batch") == 10
    scored = grades.filter(pc.not_equal(grades.column("grader"), "sim/judge"))
    assert scored.num_rows == 10 and _count(scored, "tier", "live") == 10  # scorers: no call
    # One batch per stage (one condition each); what the server answered is what was paid.
    assert stats["batch"]["submitted"] == 2 and stats["batch"]["completed"] == 2
    paid = _count(solutions, "cached", False) + _count(judged, "cached", False)
    assert stats["batch"]["ok"] == paid
    # The batch price: half of what the same usage costs live.
    plan = make_plan(study)
    price = plan.pricing.price("sim/strong")
    for row in solutions.to_pylist():
        usage = Usage(row["input_tokens"], row["output_tokens"], row["cached_input_tokens"])
        assert row["usd"] == pytest.approx(0.5 * price.cost(usage))
    # Every paid answer is in the response cache, keyed by request content.
    cache = ResponseCache.open(study.cache_url)
    target = generate_target(plan.design.generate[0])
    keys = [cache_key(r["request_hash"], r["epoch"]) for r in solutions.to_pylist()]
    assert cache.lookup(target.group, keys, fresh=True).num_rows == 10
    # The manifest counts what was paid.
    spend = latest_manifest(StudyStore.open(study.store_url)).spend
    stored = pc.sum(solutions.column("usd")).as_py() + pc.sum(judged.column("usd")).as_py()
    assert spend.usd == pytest.approx(stored) and spend.usd > 0
    assert [s["state"] for s in batch_states(study.store_url)] == ["collected", "collected"]
    # A second run finds everything stored: no batch, no call.
    again = run_study(study, INLINE)
    assert again.status == "nothing_to_do"


def test_a_killed_driver_resumes_its_batch_and_pays_nothing_twice(tmp_path):
    with sim_server("--batch-delay-s", "4") as server:
        path = write_study(tmp_path, server.url, items=8, epochs=2)
        proc = subprocess.Popen(
            [sys.executable, "-m", "itemeval", "run", str(path), "--no-ray", "--yes"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the batch is submitted and recorded
            states = batch_states(str(tmp_path / "store"))
            if states and states[0]["state"] == "submitted" and server.stats()["batch"]["ok"]:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        before = server.stats()["batch"]
        assert before["submitted"] == 1 and before["ok"] < 16  # killed mid-batch
        again = run_cli("run", str(path), "--no-ray", "--yes")
        after = server.stats()
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resumed" in again.stderr
    assert after["batch"]["submitted"] == 1  # the batch was not submitted again
    assert after["batch"]["ok"] == 16 and after["requests"] == 0  # every request paid once
    solutions = rows(str(tmp_path / "store"))
    assert solutions.num_rows == 16 and _count(solutions, "tier", "batch") == 16
    (state,) = batch_states(str(tmp_path / "store"))
    assert state["state"] == "collected" and state["owner"]["generation"] == 2


def test_ctrl_c_leaves_the_batch_running_and_the_next_run_collects_it(tmp_path):
    with sim_server("--batch-delay-s", "3") as server:
        path = write_study(tmp_path, server.url, items=6)
        proc = subprocess.Popen(
            [sys.executable, "-m", "itemeval", "run", str(path), "--no-ray", "--yes"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            states = batch_states(str(tmp_path / "store"))
            if states and states[0]["state"] == "submitted":
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err[-2000:]
        (state,) = batch_states(str(tmp_path / "store"))
        assert state["state"] == "submitted" and state["released"]  # still running, let go
        assert server.stats()["batch"]["cancelled"] == 0  # the paid batch was not cancelled
        status = json.loads(run_cli("status", str(path), "--json").stdout)
        (listed,) = status["batch"]["open"]
        assert listed["state"] == "submitted" and listed["cells"] == 6
        assert not listed["owner_alive"]
        again = run_cli("run", str(path), "--no-ray", "--yes")
        stats = server.stats()
    assert again.returncode == 0, again.stderr[-3000:]
    assert stats["batch"]["submitted"] == 1 and stats["batch"]["ok"] == 6
    assert stats["requests"] == 0 and rows(str(tmp_path / "store")).num_rows == 6


def test_a_driver_killed_after_writing_rows_but_before_its_record_writes_none_twice(tmp_path):
    # The state a driver leaves when it dies between the store rows and `collected`: the
    # record still says `submitted`. The next run reads the batch's results again.
    with sim_server("--batch-delay-s", "0.2") as server:
        study = load_study(write_study(tmp_path, server.url, items=6))
        assert run_study(study, INLINE).status == "completed"
        store = Path(study.store_url)
        (folder,) = [d for d in (store / "batches").iterdir() if d.is_dir()]
        state = json.loads((folder / "state.json").read_text())
        state |= {"state": "submitted", "collected_at": None, "released": True}
        (folder / "state.json").write_text(json.dumps(state))
        (store / "batches" / f"{folder.name}.final").unlink()
        before = server.stats()["batch"]
        again = run_study(study, INLINE)
        after = server.stats()["batch"]
    assert again.status in ("completed", "nothing_to_do"), again.message
    assert after["submitted"] == before["submitted"] == 1  # nothing submitted again
    assert rows(study.store_url).num_rows == 6  # and no row written twice
    assert json.loads((folder / "state.json").read_text())["state"] == "collected"


@pytest.mark.parametrize("wire", WIRES)
def test_a_create_whose_answer_was_lost_is_found_not_sent_again(tmp_path, wire):
    with sim_server("--batch-delay-s", "0.3") as server, create_proxy(server.url, "drop") as proxy:
        study = load_study(write_study(tmp_path, proxy.url, wire=wire, items=6))
        outcome = run_study(study, INLINE)
        stats = server.stats()
    assert outcome.status == "completed", outcome.message
    assert proxy.creates == 1 and stats["batch"]["submitted"] == 1  # found, not created again
    assert stats["batch"]["ok"] == 6 and stats["requests"] == 0
    assert _count(rows(study.store_url), "tier", "batch") == 6


@pytest.mark.parametrize("wire", WIRES)
def test_a_driver_killed_between_create_and_record_is_found_by_the_next(tmp_path, wire):
    with sim_server("--batch-delay-s", "0.5") as server, create_proxy(server.url, "hold") as proxy:
        path = write_study(tmp_path, proxy.url, wire=wire, items=6)
        proc = subprocess.Popen(
            [sys.executable, "-m", "itemeval", "run", str(path), "--no-ray", "--yes"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=REPO,
        )
        assert proxy.held.wait(60), "the driver never created its batch"
        proc.send_signal(signal.SIGKILL)  # the batch exists; the driver never learned its id
        proc.wait(timeout=30)
        proxy.release()
        (state,) = batch_states(str(tmp_path / "store"))
        assert state["state"] == "prepared" and state["batch_id"] is None
        again = run_cli("run", str(path), "--no-ray", "--yes")
        stats = server.stats()
    assert again.returncode == 0, again.stderr[-3000:]
    assert stats["batch"]["submitted"] == 1 and proxy.creates == 1  # found, never sent again
    assert stats["batch"]["ok"] == 6 and stats["requests"] == 0
    (state,) = batch_states(str(tmp_path / "store"))
    assert state["state"] == "collected" and state["batch_id"]
    assert rows(str(tmp_path / "store")).num_rows == 6


def test_partial_failures_go_into_another_batch_then_live(tmp_path):
    with sim_server("--batch-delay-s", "0.2", "--batch-error-rate", "0.5") as server:
        study = load_study(write_study(tmp_path, server.url, items=20, batch={"max_attempts": 2}))
        outcome = run_study(study, INLINE)
        stats = server.stats()
    assert outcome.status == "completed", outcome.message
    batch = stats["batch"]
    assert batch["submitted"] == 2 and batch["errored"] > 0  # a second batch for the failures
    # Every cell answered exactly once: by a batch or, after two batches, live.
    assert batch["ok"] + stats["ok"] == 20
    solutions = rows(study.store_url)
    ok = solutions.filter(pc.equal(solutions.column("status"), "ok"))
    assert ok.num_rows == 20 and _count(ok, "tier", "live") == stats["ok"] > 0
    assert _count(solutions, "status", "error") == 0  # transient errors are not final rows
    states = batch_states(study.store_url)
    assert [s["attempt"] for s in states] == [1, 2]


def test_expired_batches_go_live(tmp_path):
    with sim_server("--batch-delay-s", "0.3", "--batch-expire") as server:
        study = load_study(write_study(tmp_path, server.url, items=6, batch={"max_attempts": 1}))
        outcome = run_study(study, INLINE)
        stats = server.stats()
    assert outcome.status == "completed", outcome.message
    assert stats["batch"]["expired"] == 1 and stats["batch"]["expired_requests"] == 6
    assert stats["batch"]["ok"] == 0 and stats["ok"] == 6  # then each cell once, live
    solutions = rows(study.store_url)
    assert solutions.num_rows == 6 and _count(solutions, "tier", "live") == 6


def test_at_the_deadline_batches_are_cancelled_and_the_rest_goes_live(tmp_path):
    with sim_server("--batch-delay-s", "30") as server:
        study = load_study(write_study(tmp_path, server.url, items=10, batch={"deadline": "2s"}))
        started = time.monotonic()
        outcome = run_study(study, INLINE)
        took = time.monotonic() - started
        stats = server.stats()
    assert outcome.status == "completed", outcome.message
    assert took < 20  # did not wait for the 30-second batch
    batch = stats["batch"]
    assert batch["cancelled"] == 1 and batch["cancelled_requests"] >= 9
    assert batch["ok"] + stats["ok"] == 10  # what the batch finished is kept; the rest live
    solutions = rows(study.store_url)
    assert solutions.num_rows == 10
    assert _count(solutions, "tier", "batch") == batch["ok"]
    (state,) = batch_states(study.store_url)
    assert state["state"] == "collected" and state["cancel_requested_at"] is not None


def test_the_budget_cap_holds_at_the_batch_price(tmp_path):
    # A model that writes up to its max_tokens every time: each call costs about its worst
    # case, so a cap of 3.5 worst cases lets three calls through and no more.
    overrides = {
        "models": [{"id": "sim/verbose", "endpoint": "sim"}],
        "facets.prompt": ["builtin:cot"],
        "facets.model_config": [{"name": "long", "max_tokens": 1000}],
    }
    models = tmp_path / "models.yaml"
    models.write_text("verbose: {ability: 0.7, verbosity: 100}\n")
    with sim_server("--batch-delay-s", "0.2", "--models", str(models)) as server:
        plan = make_plan(load_study(write_study(tmp_path, server.url, items=10, **overrides)))
        condition = plan.design.generate[0]
        settings = plan.study.endpoints["sim"]
        item = next(plan.datasets[0].handle.iter_batches())[0]
        (request,) = generate_requests(condition, settings, {item.id: item}, [item.id], [0])
        worst = worst_case_usd(plan.pricing.price("sim/verbose", "batch"), settings, request)
        assert worst is not None
        max_usd = 3.5 * worst
        path = write_study(
            tmp_path, server.url, items=10, **overrides, **{"budget.max_usd": max_usd}
        )
        outcome = run_study(load_study(path), INLINE)
        stats = server.stats()
    assert outcome.status == "budget_cap" and outcome.exit_code == ExitCode.BUDGET_CAP
    assert 1 <= stats["batch"]["ok"] <= 3 and stats["requests"] == 0
    spend = latest_manifest(StudyStore.open(str(tmp_path / "store"))).spend
    assert spend.usd <= max_usd and spend.not_sent == 10 - stats["batch"]["ok"]
    assert rows(str(tmp_path / "store")).num_rows == stats["batch"]["ok"]  # the rest: pending


def test_a_second_run_leaves_a_running_batch_to_its_driver(tmp_path):
    with sim_server("--batch-delay-s", "3") as server:
        path = write_study(tmp_path, server.url, items=6)
        first = subprocess.Popen(
            [sys.executable, "-m", "itemeval", "run", str(path), "--no-ray", "--yes"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=REPO,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                states = batch_states(str(tmp_path / "store"))
                if states and states[0]["state"] == "submitted":
                    break
                time.sleep(0.05)
            # The same study without the batch tier, started while the batch runs.
            live = load_study(
                write_study(
                    tmp_path / "live",
                    server.url,
                    items=6,
                    batch={"enabled": False},
                    store=str(tmp_path / "store"),
                )
            )
            second = run_study(live, INLINE)
            during = server.stats()
        finally:
            assert first.wait(timeout=120) == 0
        stats = server.stats()
    assert during["requests"] == 0  # the second run called none of the batch's cells
    assert second.stages["generate"].counts.done == 0
    assert stats["batch"]["submitted"] == 1 and stats["batch"]["ok"] == 6
    assert rows(str(tmp_path / "store")).num_rows == 6


def test_a_judge_can_use_the_batch_tier_alone(tmp_path):
    with sim_server("--batch-delay-s", "0.2") as server:
        path = write_study(
            tmp_path, server.url, items=5, judge=True, **{"endpoints.sim.batch.enabled": False}
        )
        study = load_study(path)
        outcome = run_study(study, INLINE)
        stats = server.stats()
    assert outcome.status == "completed", outcome.message
    assert stats["requests"] == 5 and stats["batch"]["submitted"] == 1  # generate live
    grades = rows(study.store_url, "grades", ["grader", "tier"])
    judged = grades.filter(pc.equal(grades.column("grader"), "sim/judge"))
    assert _count(judged, "tier", "batch") == 5
    assert judge_target(make_plan(study).design.judges[0]).endpoint == "judges"


def test_estimate_and_status_show_the_batch_price(tmp_path):
    with sim_server("--batch-delay-s", "0.2") as server:
        batched = write_study(tmp_path / "b", server.url, items=6)
        live = write_study(tmp_path / "l", server.url, items=6, batch={"enabled": False})
        line_b = make_plan(load_study(batched)).estimate.lines[0]
        line_l = make_plan(load_study(live)).estimate.lines[0]
        assert line_b.tier == "batch" and line_l.tier == "live"
        assert line_b.remaining_usd == pytest.approx(0.5 * line_l.remaining_usd)
        assert line_b.live_remaining_usd == pytest.approx(line_l.remaining_usd)
        shown = run_cli("estimate", str(batched))
        assert shown.returncode == 0 and "Batch tier: " in shown.stdout
        assert run_cli("run", str(batched), "--no-ray", "--yes").returncode == 0
        status = run_cli("status", str(batched), "--json")
    body = json.loads(status.stdout)
    (condition,) = [c for c in body["conditions"] if c["stage"] == "solutions"]
    assert condition["batch"] == 6
    # At half price, what the batch saved equals what it cost.
    assert condition["batch_saved_usd"] == pytest.approx(condition["usd"]) and condition["usd"] > 0
    assert body["batch"]["rows"] == 6 and body["batch"]["open"] == []
    text = run_cli("status", str(batched)).stdout
    assert "Batch tier: 6 rows" in text
    report = run_cli("report", str(batched), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr[-2000:]
    assert "Saved by the batch tier" in (tmp_path / "report" / "report.md").read_text()


@pytest.mark.ray
def test_the_batch_tier_on_ray(tmp_path, ray_local):
    with sim_server("--batch-delay-s", "0.3") as server:
        study = load_study(write_study(tmp_path, server.url, items=6, **{"budget.max_usd": 5.0}))
        outcome = run_study(study, RunOptions(yes=True, quiet=True))
        stats = server.stats()
    assert outcome.status == "completed", outcome.message
    assert stats["batch"]["ok"] == 6 and stats["requests"] == 0
    solutions = rows(study.store_url)
    spend = latest_manifest(StudyStore.open(study.store_url)).spend
    assert spend.usd == pytest.approx(pc.sum(solutions.column("usd")).as_py()) and spend.usd > 0
    assert outcome.ledger is not None and outcome.ledger.reserved == pytest.approx(0.0)
