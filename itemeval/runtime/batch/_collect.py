"""From a batch's results to rows: store rows (`tier = batch`), response-cache rows, leftovers.

The rows are those a live call would have written (`calls/_rows.py`), with the batch price in
`usd`: the cell that carried a request pays it, a cell that shared it (the same request key) is
a response-cache hit of it. A request the batch did not process (expired, cancelled, missing
from the results) or that failed transiently (a server error, a rate limit) leaves its cells as
leftovers: another batch, or a live call, answers them. Blocking code (store reads): run it in
a thread.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from itemeval.calls import Call, grade_row, response_row, solution_row
from itemeval.providers import BatchResult, BatchStatus
from itemeval.providers.money import ModelPrice
from itemeval.providers.types import ModelResult
from itemeval.runtime import RunContext, Shard, ShardRunner, ShardSummary, fold_rows
from itemeval.runtime.batch._records import BatchRecord
from itemeval.store import TIER_BATCH

#: Columns of a cell that say where it is (kept in leftovers, to make shards of them again).
CELL_PLACE = ("item_id", "epoch", "dataset", "fingerprint", "part", "gen_condition_id")


@dataclass
class Collected:
    """What one batch's results became."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # partition -> rows
    cache_rows: list[dict[str, Any]] = field(default_factory=list)  # paid ok answers
    leftovers: list[dict[str, Any]] = field(default_factory=list)  # cells still to answer
    summary: ShardSummary | None = None
    usd: float = 0.0  # what the batch's answers cost
    paid: int = 0  # requests that were answered (ok or a final failure): billed
    counts: dict[str, int] = field(default_factory=dict)


def match_results(
    local_id: str, fetched: Sequence[tuple[BatchStatus, Sequence[BatchResult]]]
) -> tuple[BatchStatus | None, dict[int, ModelResult | None]]:
    """The batch (of one, or of the candidates a restarted driver found) that holds the
    record's requests, and its results by request index. Custom ids are `<local id>-<index>`:
    a batch whose results hold none of them is another program's and is never read. A batch
    without results (failed as a whole) matches: its cells have no answer."""
    prefix = f"{local_id}-"
    for status, lines in fetched:
        ours = [line for line in lines if line.custom_id.startswith(prefix)]
        if lines and not ours:
            continue
        results: dict[int, ModelResult | None] = {}
        for line in ours:
            suffix = line.custom_id[len(prefix) :]
            if suffix.isdigit():
                results[int(suffix)] = line.result
        return status, results
    return None, {}


def collect_rows(
    record: BatchRecord,
    cells: pa.Table,
    results: dict[int, ModelResult | None],
    *,
    context: RunContext,
    runner: ShardRunner,
    price: ModelPrice | None,
    latency_ms: float,
    skip_stored: bool,
    shard_id: int,
) -> Collected:
    """Rows of the cells of `record` from `results` (by request index)."""
    out = Collected()
    if skip_stored:
        cells = _not_stored(record, cells, runner)
    texts: dict[tuple[str, int, str], str] = {}
    if record.stage == "grade":
        texts = _solution_texts(record, cells, runner)
    paid_requests: set[int] = set()
    calls: list[Call] = []
    rows: list[dict[str, Any]] = []
    counts: dict[str, int] = defaultdict(int)
    for cell in cells.to_pylist():
        index = int(cell["request"])
        result = results.get(index)
        if result is None or result.transient:
            counts["not_processed" if result is None else "transient"] += 1
            out.leftovers.append({k: cell[k] for k in (*CELL_PLACE, "solution_hash", "fragment")})
            continue
        leader = index not in paid_requests
        if leader:
            paid_requests.add(index)
            usd = price.cost(result.usage) if price is not None else 0.0
            out.usd += usd
            result = replace(result, usd=usd, latency_ms=latency_ms, attempts=record.attempt)
        else:
            result = replace(result, latency_ms=latency_ms)
        call = Call(
            cell["item_id"],
            int(cell["epoch"]),
            result,
            cell["request_hash"],
            cell["key"],
            cached=not leader,
            tier=TIER_BATCH,
        )
        if leader and result.ok:
            out.cache_rows.append(response_row(call, model=record.model))
        row = _row(record, cell, call, texts, context)
        if row is None:
            counts["solution_gone"] += 1
            continue
        counts["ok" if result.ok else "error"] += 1
        calls.append(call)
        rows.append(row)
    out.paid = len(paid_requests)
    partition = record.condition_id
    out.rows[partition] = rows
    summary = ShardSummary(shard_id, record.stage, record.condition_id, cells=len(rows))
    fold_rows(summary, calls, rows)
    out.summary = summary
    out.counts = dict(counts)
    return out


def _row(
    record: BatchRecord,
    cell: dict[str, Any],
    call: Call,
    texts: dict[tuple[str, int, str], str],
    context: RunContext,
) -> dict[str, Any] | None:
    if record.stage == "generate":
        return solution_row(call, model=record.model, run_id=context.run_id)
    condition = context.grade[record.condition_id]
    assert condition.rubric is not None
    solution = texts.get((cell["item_id"], int(cell["epoch"]), cell["solution_hash"]))
    if solution is None:  # the judged solution is gone (compacted away): graded again later
        return None
    return grade_row(
        call,
        condition,
        gen_condition_id=cell["gen_condition_id"],
        solution_hash=cell["solution_hash"],
        solution=solution,
        run_id=context.run_id,
    )


def _shards_by_gen(record: BatchRecord, cells: pa.Table) -> dict[str | None, Shard]:
    """The record's cells as shards (one per generate condition for grades), for the worker's
    readers."""
    out: dict[str | None, Shard] = {}
    gens = cells.column("gen_condition_id").to_pylist()
    for gen in dict.fromkeys(gens):
        mask = pa.array([g == gen for g in gens])
        part = cells.filter(mask)
        columns = ["item_id", "epoch"]
        if record.stage == "grade":
            columns += ["solution_hash", "fragment"]
        out[gen] = Shard(
            shard_id=0,
            stage=record.stage,
            condition_id=record.condition_id,
            dataset="",
            fingerprint="",
            part=0,
            cells=part.select(columns),
            gen_condition_id=gen,
        )
    return out


def _solution_texts(
    record: BatchRecord, cells: pa.Table, runner: ShardRunner
) -> dict[tuple[str, int, str], str]:
    texts: dict[tuple[str, int, str], str] = {}
    for shard in _shards_by_gen(record, cells).values():
        texts.update(runner.solution_texts(shard))
    return texts


def _not_stored(record: BatchRecord, cells: pa.Table, runner: ShardRunner) -> pa.Table:
    """The cells without an ok row yet (a driver that died while it wrote them, say)."""
    keep = []
    gens = cells.column("gen_condition_id").to_pylist()
    for gen, shard in _shards_by_gen(record, cells).items():
        left, dropped = runner.without_stored(shard)
        part = cells.filter(pa.array([g == gen for g in gens]))
        if dropped:
            wanted = set(_cells_of(left.cells))
            part = part.filter(pa.array([cell in wanted for cell in _cells_of(part)]))
        keep.append(part)
    return pa.concat_tables(keep) if keep else cells


def _cells_of(table: pa.Table) -> list[tuple[str, int]]:
    return list(
        zip(table.column("item_id").to_pylist(), table.column("epoch").to_pylist(), strict=True)
    )
