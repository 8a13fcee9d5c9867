"""Cells to batch requests: rendered as the live path renders them, the response cache first.

    hits = await prepare_shard(shard, buffer, context=..., runner=..., shard_id=...)

A shard's requests are built by `calls/_requests.py` (so a batch asks exactly what a live call
would, with the same cache key). What the response cache answers becomes rows at once (`tier =
batch`, `cached`, $0) and `prepare_shard` returns their summary; the other requests go into the
condition's `Buffer`, one request per distinct key (cells that ask the same share it: the first
pays, the others are cache hits of it). `chunks` cuts a buffer into batches within the
provider's limits; `cells_table` is a batch's record of its cells; `shards_of` makes cells a
batch did not answer into shards again.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from itemeval.calls import (
    Call,
    CallTarget,
    generate_requests,
    grade_row,
    judge_requests,
    pairwise_requests,
    solution_row,
)
from itemeval.providers import BatchClient
from itemeval.providers.types import ModelRequest
from itemeval.runtime import (
    RunContext,
    Shard,
    ShardRunner,
    ShardSummary,
    fold_rows,
    generate_target,
    judge_target,
)
from itemeval.runtime.batch._records import CELL_SCHEMA, BatchRecord
from itemeval.store import GRADES, SOLUTIONS, TIER_BATCH, cache_key, request_hashes

#: Bytes a request takes in a batch, beyond its messages (the body's other fields).
REQUEST_OVERHEAD = 2048


@dataclass
class Pending:
    """One request to submit and the cells it answers (the first one pays)."""

    request: ModelRequest
    request_hash: str
    key: str
    cells: list[dict[str, Any]]
    size: int  # bytes it takes in a batch, about


@dataclass
class Buffer:
    """Requests of one condition and attempt, waiting to fill a batch (or for budget)."""

    condition_id: str
    attempt: int
    requests: dict[str, Pending] = field(default_factory=dict)  # by key

    @property
    def size(self) -> int:
        return sum(p.size for p in self.requests.values())


async def prepare_shard(
    shard: Shard,
    buffer: Buffer,
    *,
    context: RunContext,
    runner: ShardRunner,
    shard_id: int,
) -> ShardSummary | None:
    """Render `shard`'s requests, write the rows the response cache answers (their summary is
    returned), and add the rest to `buffer`."""
    fragments: dict[tuple[str, int], str | None] = {}
    judged: dict[tuple[str, int], tuple[str, str]] = {}
    items = await asyncio.to_thread(runner.read_items, shard)
    cells = shard.cells.to_pydict()
    if shard.stage == "generate":
        condition = context.generate[shard.condition_id]
        target = generate_target(condition)
        endpoint = context.endpoints[condition.endpoint]
        requests = generate_requests(condition, endpoint, items, cells["item_id"], cells["epoch"])
        kept = cells
    else:
        grader = context.grade[shard.condition_id]
        target = judge_target(grader)
        endpoint = context.endpoints[str(grader.endpoint)]
        texts = await asyncio.to_thread(runner.solution_texts, shard)
        if grader.pairwise is not None:  # the baseline's answers are the other side
            base = grader.pairwise.baselines.get(str(shard.gen_condition_id))
            baseline = (
                {} if base is None else await asyncio.to_thread(runner.baseline_texts, shard, base)
            )
            requests, kept, judged = pairwise_requests(
                grader, endpoint, items, texts, baseline, cells
            )
        else:
            requests, kept, judged = judge_requests(grader, endpoint, items, texts, cells)
        places = zip(cells["item_id"], cells["epoch"], strict=True)
        fragments = dict(zip(places, cells["fragment"], strict=True))
    if not requests:
        return None
    hashes = request_hashes(requests)
    keys = [cache_key(h, e) for h, e in zip(hashes, kept["epoch"], strict=True)]
    hits = await asyncio.to_thread(
        runner.calls.cached_calls,
        target,
        requests,
        hashes,
        keys,
        kept["item_id"],
        kept["epoch"],
        shard.attempt > 0,  # cells a batch did not answer: look at the cache afresh
        TIER_BATCH,
    )
    for index, request in enumerate(requests):
        if index in hits:
            continue
        item_id, epoch = kept["item_id"][index], kept["epoch"][index]
        cell = {
            "item_id": item_id,
            "epoch": int(epoch),
            "request_hash": hashes[index],
            "key": keys[index],
            "dataset": shard.dataset,
            "fingerprint": shard.fingerprint,
            "part": shard.part,
            "gen_condition_id": shard.gen_condition_id,
            "solution_hash": judged[(item_id, epoch)][0] if judged else None,
            "fragment": fragments.get((item_id, epoch)),
        }
        found = buffer.requests.get(keys[index])
        if found is not None:  # the same request for another cell: sent once
            found.cells.append(cell)
            continue
        size = sum(len((m.get("content") or "").encode()) for m in request.messages)
        buffer.requests[keys[index]] = Pending(
            request, hashes[index], keys[index], [cell], 2 * size + REQUEST_OVERHEAD
        )
    if not hits:
        return None
    return await _write_hits(shard, target, hits, judged, context, runner, shard_id)


async def _write_hits(
    shard: Shard,
    target: CallTarget,
    hits: dict[int, Call],
    judged: dict[tuple[str, int], tuple[str, str]],
    context: RunContext,
    runner: ShardRunner,
    shard_id: int,
) -> ShardSummary:
    calls = [hits[i] for i in sorted(hits)]
    if shard.stage == "generate":
        rows = [solution_row(c, model=target.model, run_id=context.run_id) for c in calls]
        stage = SOLUTIONS
    else:
        grader = context.grade[shard.condition_id]
        assert grader.rubric is not None
        rows = [
            grade_row(
                c,
                grader,
                gen_condition_id=str(shard.gen_condition_id),
                solution_hash=judged[(c.item_id, c.epoch)][0],
                solution=judged[(c.item_id, c.epoch)][1],
                run_id=context.run_id,
            )
            for c in calls
        ]
        stage = GRADES
    await asyncio.to_thread(runner.store.write, stage, shard.condition_id, rows)
    summary = ShardSummary(shard_id, shard.stage, shard.condition_id, cells=len(rows))
    fold_rows(summary, calls, rows)
    return summary


def chunks(buffer: Buffer, client: BatchClient) -> list[Buffer]:
    """`buffer` cut into batches within the client's request and byte limits."""
    out: list[Buffer] = []
    current = Buffer(buffer.condition_id, buffer.attempt)
    size = 0
    for key, pending in buffer.requests.items():
        if current.requests and (
            len(current.requests) >= client.max_requests or size + pending.size > client.max_bytes
        ):
            out.append(current)
            current, size = Buffer(buffer.condition_id, buffer.attempt), 0
        current.requests[key] = pending
        size += pending.size
    if current.requests:
        out.append(current)
    return out


def cells_table(chunk: Sequence[Pending]) -> pa.Table:
    """A batch's cells (`CELL_SCHEMA`): request `i` is `chunk[i]`."""
    rows = [{"request": i, **cell} for i, pending in enumerate(chunk) for cell in pending.cells]
    return pa.Table.from_pylist(rows, schema=CELL_SCHEMA)


def shards_of(record: BatchRecord, cells: list[dict[str, Any]]) -> list[Shard]:
    """Cells to prepare again, as shards (attempt = the record's: the next batch is one more)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for cell in cells:
        place = (cell["gen_condition_id"], cell["dataset"], cell["fingerprint"], cell["part"])
        groups[place].append(cell)
    shards = []
    for (gen, dataset, fingerprint, part), group in groups.items():
        data: dict[str, Any] = {
            "item_id": pa.array([c["item_id"] for c in group], pa.string()),
            "epoch": pa.array([c["epoch"] for c in group], pa.int32()),
        }
        if record.stage == "grade":
            data["solution_hash"] = pa.array([c["solution_hash"] for c in group], pa.string())
            data["fragment"] = pa.array([c["fragment"] for c in group], pa.string())
        shards.append(
            Shard(
                shard_id=0,
                stage=record.stage,
                condition_id=record.condition_id,
                dataset=dataset,
                fingerprint=fingerprint,
                part=int(part),
                cells=pa.table(data),
                gen_condition_id=gen,
                attempt=record.attempt,
            )
        )
    return shards
