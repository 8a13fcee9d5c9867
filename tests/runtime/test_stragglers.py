"""Stragglers, checked against physical truth (the sim-server's own counts, rows read without
deduplication, dollars in the ledger):

* a call that never answers ends, after its attempts, as an error row with code `deadline`, and
  the stage ends in bounded time (it never hangs);
* hedges: the first answer wins, the loser is cancelled, both requests are paid and counted,
  exactly one row per cell, hedges bounded by `max_share`, and the budget cap holds.
"""

from __future__ import annotations

import time

import pyarrow.compute as pc
import pytest
from runtime_files import sim_server, sim_stats, write_study

from itemeval.config import load_study
from itemeval.errors import ExitCode
from itemeval.planning import make_plan
from itemeval.runtime import RunOptions, run_study
from itemeval.store import StudyStore, latest_manifest

#: Deadlines and hedges of tenths of a second, counted on the wall clock: `make test` runs
#: these alone.
pytestmark = pytest.mark.serial

INLINE = RunOptions(no_ray=True, yes=True, quiet=True, stages=("generate",))
ONE_CONDITION = {
    "models": [{"id": "sim/strong", "endpoint": "sim"}],
    "facets.prompt": ["builtin:direct"],
    "facets.replications": 1,
    "facets.grader": [],
}


def _rows(store_url: str):
    return StudyStore.open(store_url).read(
        "solutions",
        columns=["item_id", "epoch", "status", "error_code", "usd", "attempts"],
        dedup=False,
    )


def _one_row_per_cell(rows, cells: int) -> None:
    assert rows.num_rows == cells
    keys = rows.group_by(["item_id", "epoch"]).aggregate([("status", "count")])
    assert keys.num_rows == cells


def test_calls_never_answered_end_as_deadline_rows_and_the_stage_ends(tmp_path):
    endpoint = {
        "kind": "sim",
        "max_concurrency": 16,
        "deadline_s": 0.5,
        "timeout_s": 60,
        "max_attempts": 2,
        "backoff_initial_s": 0,
        "backoff_max_s": 0,
    }
    with sim_server("--fault-never-answer", "0.25", "--hang-s", "600", "--latency-ms", "5") as url:
        study = load_study(
            write_study(
                tmp_path,
                **ONE_CONDITION,
                **{"endpoints.sim": {**endpoint, "base_url": url}, "budget.dev_items": 20},
            )
        )
        started = time.monotonic()
        outcome = run_study(study, INLINE)
        elapsed = time.monotonic() - started
        stats = sim_stats(url)
    cells = 2 * 20
    assert outcome.exit_code == ExitCode.CELL_ERRORS, outcome.message
    assert elapsed < 30  # two deadlines per hung cell, not 600 s hangs nor 60 s timeouts
    rows = _rows(study.store_url)
    _one_row_per_cell(rows, cells)
    errors = rows.filter(pc.equal(rows.column("status"), "error"))
    assert 0 < errors.num_rows < cells
    assert set(errors.column("error_code").to_pylist()) == {"deadline"}
    assert set(errors.column("attempts").to_pylist()) == {2}
    # The server saw each hung cell twice and never answered it; it answered every other cell.
    assert stats["faults"]["timeout"] == 2 * errors.num_rows
    assert stats["ok"] == cells - errors.num_rows
    assert stats["requests"] == stats["ok"] + 2 * errors.num_rows
    manifest = latest_manifest(StudyStore.open(study.store_url))
    assert manifest.outcome == "completed" and outcome.status == "completed"


HEAVY_TAIL = ("--latency-distribution", "lognormal", "--latency-ms", "40", "--latency-spread")
PRICE_IN, PRICE_OUT = 3.00 / 1e6, 15.00 / 1e6  # sim/strong in the packaged price table


def _hedging(url: str, **hedge) -> dict:
    return {
        "kind": "sim",
        "base_url": url,
        "max_concurrency": 16,
        "timeout_s": 60,
        "max_attempts": 1,
        "hedge": {
            "enabled": True,
            "after_done": 0.0,
            "min_samples": 5,
            "factor": 3,
            "min_wait_s": 0.15,
            **hedge,
        },
    }


def _billed_at_most(stats: dict) -> float:
    """The most the server's answers can have cost (every input token at the full price)."""
    usage = stats["usage"]
    return usage["input_tokens"] * PRICE_IN + usage["output_tokens"] * PRICE_OUT


def _settled(url: str, timeout_s: float = 30.0) -> dict:
    """The server's stats once no request is in flight (abandoned losers still answer)."""
    deadline = time.monotonic() + timeout_s
    stats = sim_stats(url)
    while stats["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.1)
        stats = sim_stats(url)
    return stats


def test_a_hedge_wins_both_requests_are_paid_and_counted_one_row_per_cell(tmp_path):
    with sim_server(*HEAVY_TAIL, "1.5", "--seed", "5") as url:
        study = load_study(
            write_study(
                tmp_path,
                **ONE_CONDITION,
                **{
                    "endpoints.sim": _hedging(url, max_share=0.5),
                    "facets.model_config": [{"name": "short", "max_tokens": 64}],
                    "budget.dev_items": 25,
                    "runtime.shard_size": 60,
                },
            )
        )
        outcome = run_study(study, INLINE)
        stats = _settled(url)
    cells = 2 * 25
    assert outcome.exit_code == ExitCode.OK, outcome.message
    rows = _rows(study.store_url)
    _one_row_per_cell(rows, cells)  # physical rows: a hedged cell has one row, not two
    hedged = rows.filter(pc.greater(rows.column("attempts"), 1))
    hedges = outcome.ledger.calls - cells  # every request settles once in the ledger
    assert 0 < hedges <= 0.5 * cells
    assert hedged.num_rows == hedges
    # The provider saw and answered both requests of every hedged cell (a cancelled loser is
    # still answered, and billed, by the provider).
    assert stats["requests"] == cells + hedges
    assert stats["ok"] == cells + hedges
    # Both are paid: a loser cancelled in flight at its worst case (64 output tokens here),
    # so the ledger never counts less than the provider billed, and every dollar is in a row.
    worst_output = 64 * PRICE_OUT
    assert all(usd > worst_output for usd in hedged.column("usd").to_pylist())
    stored_usd = pc.sum(rows.column("usd")).as_py()
    assert outcome.spent_usd == pytest.approx(stored_usd)
    assert outcome.spent_usd >= _billed_at_most(stats) - 1e-9


def test_a_hedge_answers_for_a_hung_request_and_the_hung_one_is_abandoned(tmp_path):
    # A tenth of the attempts hang (drawn per attempt: a hedge of a hung request is answered).
    with sim_server("--fault-timeout", "0.1", "--hang-s", "600", "--latency-ms", "5") as url:
        endpoint = {**_hedging(url, max_share=0.5, min_wait_s=0.1), "deadline_s": 3.0}
        study = load_study(
            write_study(
                tmp_path,
                **ONE_CONDITION,
                **{"endpoints.sim": endpoint, "budget.dev_items": 25, "runtime.shard_size": 60},
            )
        )
        outcome = run_study(study, INLINE)
        stats = sim_stats(url)
    cells = 2 * 25
    assert outcome.exit_code == ExitCode.OK, outcome.message
    rows = StudyStore.open(study.store_url).read(
        "solutions",
        columns=["item_id", "epoch", "status", "attempts", "latency_ms", "usd"],
        dedup=False,
    )
    _one_row_per_cell(rows, cells)
    hedged = rows.filter(pc.greater(rows.column("attempts"), 1))
    hedges = outcome.ledger.calls - cells
    assert hedged.num_rows == hedges >= 2
    # The hedge won: its answer came long before the hung request's 3 s deadline (a hedge that
    # hung too, one time in ten, leaves its cell to the first request's retry).
    fast = [ms < 3000 for ms in hedged.column("latency_ms").to_pylist()]
    assert sum(fast) >= max(2, hedged.num_rows // 2), fast
    # The hung requests were cancelled, never answered, and are paid at their worst case.
    assert stats["ok"] == cells and stats["requests"] >= cells + hedges
    assert outcome.spent_usd == pytest.approx(pc.sum(rows.column("usd")).as_py())
    assert all(usd > 64 * PRICE_OUT for usd in hedged.column("usd").to_pylist())


def test_hedges_are_bounded_and_a_hedged_stage_never_hangs(tmp_path):
    # A third of the cells are never answered, hedge or not; hedges stay within max_share.
    with sim_server("--fault-never-answer", "0.3", "--hang-s", "600", "--latency-ms", "5") as url:
        endpoint = {**_hedging(url, max_share=0.05, min_wait_s=0.05), "deadline_s": 0.6}
        study = load_study(
            write_study(
                tmp_path,
                **ONE_CONDITION,
                **{"endpoints.sim": endpoint, "budget.dev_items": 25, "runtime.shard_size": 60},
            )
        )
        started = time.monotonic()
        outcome = run_study(study, INLINE)
        elapsed = time.monotonic() - started
        stats = sim_stats(url)
    cells = 2 * 25
    assert outcome.exit_code == ExitCode.CELL_ERRORS, outcome.message
    assert elapsed < 30
    rows = _rows(study.store_url)
    _one_row_per_cell(rows, cells)
    errors = rows.filter(pc.equal(rows.column("status"), "error"))
    assert errors.num_rows > 10 and set(errors.column("error_code").to_pylist()) == {"deadline"}
    hedges = outcome.ledger.calls - cells
    assert 1 <= hedges <= 0.05 * cells  # 2 at most, though ~15 cells straggled
    assert stats["requests"] == cells + hedges


def test_the_budget_cap_holds_with_hedges(tmp_path):
    # A model far more verbose than the estimate assumes, hedged freely: the cap must stop the
    # run with every hedge and every abandoned loser counted, never above max_usd.
    models = tmp_path / "models.yaml"
    models.write_text("strong: {ability: 0.8, verbosity: 60}\n")
    with sim_server(*HEAVY_TAIL, "1.5", "--seed", "9", "--models", str(models)) as url:
        overrides = {
            **ONE_CONDITION,
            # hedges from the first few answers on: the cap may stop the run early on a busy
            # machine, and the test needs hedges sent before it does
            "endpoints.sim": _hedging(url, max_share=1.0, min_samples=2, factor=2),
            "facets.model_config": [{"name": "short", "max_tokens": 256}],
            "facets.prompt": ["builtin:cot"],
            "budget.dev_items": 40,
            "runtime.shard_size": 5,  # 10 reservations at a time: room for hedges till the end
        }
        study = load_study(write_study(tmp_path, **overrides))
        estimate = make_plan(study).estimate
        max_usd = 1.05 * sum(line.usd for line in estimate.lines if line.stage == "generate")
        study = load_study(write_study(tmp_path, **overrides, **{"budget.max_usd": max_usd}))
        outcome = run_study(study, INLINE)
        stats = _settled(url)
    assert outcome.status == "budget_cap", outcome.message
    rows = _rows(study.store_url)
    _one_row_per_cell(rows, rows.num_rows)
    assert rows.num_rows < 80  # the cap stopped it
    assert stats["requests"] > rows.num_rows  # hedges were sent under the cap
    assert outcome.spent_usd <= max_usd
    assert outcome.spent_usd >= _billed_at_most(stats) - 1e-9  # and it counted what was billed
    assert outcome.spent_usd == pytest.approx(pc.sum(rows.column("usd")).as_py())
