"""Shards: the unit of work a driver hands to a worker, and the summary a worker hands back.

A shard is a batch of cells of one condition whose items all sit in one items-snapshot part, so
a worker reads one small parquet part (and caches it) instead of the whole dataset, and writes
one fragment. Grade shards also name the solutions fragment(s) their solutions are in.

Shards are made lazily, as the driver dispatches them, from the pending cells' boolean masks
(`store.CellMasks`): part by part and, within a part, the conditions taking turns chunk by chunk,
so consecutive shards share their items part (worker caches stay warm), the models interleave
(endpoints share the load), and the driver never holds a row per pending cell.

Identical judge requests are sent once per run. A grade cell asks its judge about one solution
text; two generate conditions that gave the same text for the same item and epoch ask the same
request (the cache key is the request's content and epoch, never the condition). Workers each
keep their own view of the response cache (refreshed about once a minute, `worker.py`), so two
such cells on two workers would both be paid. So the grade stage is made in two phases
(`store.IdenticalCells`): first every cell whose request no earlier cell of the stage asks, then,
after a `BARRIER` (dispatch waits until every shard before it has finished), the cells that
repeat one: their shards list the response cache afresh (`Shard.repeats`) and find the answer
there. A repeat whose first cell did not get an answer (an error) is sent as usual.

Everything here is plain data (dataclasses and small arrow tables) that pickles cheaply, which
is what crosses the Ray boundary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import pyarrow as pa

from itemeval.planning import PartRun
from itemeval.store import CellMasks, IdenticalCells, StudyStore, solution_index

Stage = Literal["generate", "grade"]

#: A scorer shard costs no calls, so it can be much larger than a call shard.
SCORER_SHARD_FACTOR = 16


@dataclass(frozen=True, slots=True)
class Shard:
    """Cells of one condition, all in one items part.

    `cells` columns: generate `item_id, epoch`; grade `item_id, epoch, solution_hash,
    fragment` (the solutions fragment of `gen_condition_id` holding the solution).
    """

    shard_id: int
    stage: Stage
    condition_id: str
    dataset: str
    fingerprint: str
    part: int
    cells: pa.Table
    est_usd: float = 0.0
    gen_condition_id: str | None = None
    attempt: int = 0  # failed attempts (its worker raised: the store failed, a bug...)
    workers_lost: int = 0  # times its worker died under it (not the shard's fault)
    #: Its cells repeat requests of shards dispatched before a `BARRIER`: the worker lists the
    #: response cache afresh, where those shards put the answers.
    repeats: bool = False

    @property
    def size(self) -> int:
        return self.cells.num_rows

    @property
    def dispatched_before(self) -> bool:
        """An earlier attempt may have paid for answers (in the cache) or written its fragment."""
        return self.attempt > 0 or self.workers_lost > 0

    def retry(self) -> Shard:
        """The same cells again after a failed attempt."""
        return replace(self, attempt=self.attempt + 1)

    def after_worker_loss(self) -> Shard:
        """The same cells again after its worker died (does not count as a failed attempt)."""
        return replace(self, workers_lost=self.workers_lost + 1)


class Barrier:
    """In a stream of shards: the shards after it start once every shard before it finished."""

    def __repr__(self) -> str:
        return "BARRIER"


BARRIER = Barrier()


@dataclass(slots=True)
class ShardSummary:
    """What a worker reports for a shard: small, whatever the shard's size."""

    shard_id: int
    stage: Stage
    condition_id: str
    cells: int = 0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # error code -> cells
    parse_failures: Counter[str] = field(default_factory=Counter)  # parse code -> cells
    cached: int = 0
    calls: int = 0  # provider calls made (cache hits and scorers make none)
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    latency_ms: float = 0.0  # summed over calls
    seconds: float = 0.0
    fragment: str | None = None
    interrupted: bool = False
    not_sent: int = 0  # calls not sent because their worst case did not fit under max_usd
    already_stored: int = 0  # cells a re-dispatched shard found written by an earlier attempt
    graded_inline: int = 0  # verifiable grades written with the solutions (generate shards)
    skipped: int = 0  # cells whose solution changed or vanished since planning

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


def _chunks(cells: pa.Table, size: int) -> list[pa.Table]:
    return [cells.slice(offset, size) for offset in range(0, cells.num_rows, size)]


def generate_shards(
    pending: CellMasks,
    runs: list[PartRun],
    *,
    shard_size: int,
    usd_per_cell: dict[str, float],
    first_id: int = 0,
) -> Iterator[Shard]:
    """Shards of pending generate cells, made part by part as they are dispatched; within a
    part the conditions take turns, chunk by chunk."""
    shard_id = first_id
    for run in runs:
        chunks = {
            cid: _chunks(pending.cells(cid, run.start, run.stop), shard_size)
            for cid in pending.masks
        }
        for index in range(max((len(c) for c in chunks.values()), default=0)):
            for cid, parts in chunks.items():
                if index >= len(parts):
                    continue
                cells = parts[index]
                yield Shard(
                    shard_id=shard_id,
                    stage="generate",
                    condition_id=str(cid),
                    dataset=run.dataset,
                    fingerprint=run.fingerprint,
                    part=run.part,
                    cells=cells,
                    est_usd=usd_per_cell.get(str(cid), 0.0) * cells.num_rows,
                )
                shard_id += 1


def grade_shards(
    store: StudyStore,
    pending: CellMasks,
    gen_condition_ids: list[str],
    grade_condition_ids: list[str],
    runs: list[PartRun],
    *,
    shard_size: int,
    usd_per_cell: dict[str, float],
    scorers: set[str],
    first_id: int = 0,
) -> Iterator[Shard | Barrier]:
    """Shards of pending grade cells, one generate condition at a time (its solutions' hashes
    and fragments are read when its turn comes), part by part, grade conditions in turn; the
    judge cells that repeat an earlier cell's request after a `BARRIER` (see the module doc)."""
    shard_id = first_id
    identical = IdenticalCells(pending, [g for g in grade_condition_ids if g not in scorers])
    for gen in gen_condition_ids:
        if not any(pending.count((gid, gen)) for gid in grade_condition_ids):
            continue
        # A generator of its own: its index, and the tables sliced from it, are freed when it
        # returns, before the next condition's index is made (one index at a time).
        shard_id = yield from _shards_of_solutions(
            store,
            pending,
            gen,
            grade_condition_ids,
            runs,
            shard_size=shard_size,
            usd_per_cell=usd_per_cell,
            scorers=scorers,
            first_id=shard_id,
            identical=identical,
        )
    repeats = identical.repeats()
    identical.keys.clear()
    if not repeats.num_rows:
        return
    yield BARRIER
    for gen in gen_condition_ids:
        if any(repeats.count((gid, gen)) for gid in grade_condition_ids):
            shard_id = yield from _shards_of_solutions(
                store,
                repeats,
                gen,
                grade_condition_ids,
                runs,
                shard_size=shard_size,
                usd_per_cell=usd_per_cell,
                scorers=scorers,
                first_id=shard_id,
                repeated=True,
            )


def _shards_of_solutions(
    store: StudyStore,
    pending: CellMasks,
    gen: str,
    grade_condition_ids: list[str],
    runs: list[PartRun],
    *,
    shard_size: int,
    usd_per_cell: dict[str, float],
    scorers: set[str],
    first_id: int,
    identical: IdenticalCells | None = None,
    repeated: bool = False,
) -> Generator[Shard, None, int]:
    """The grade shards of one generate condition's solutions; returns the next shard id.
    `identical`: leave out the cells that repeat an earlier request (and note this condition's
    solutions); `repeated`: the shards are those repeats."""
    epochs = pending.epochs
    shard_id = first_id
    index = solution_index(store, gen, pending.item_ids, epochs, fragment_names=True)
    assert index.fragments is not None
    if identical is not None:
        identical.split(gen, index.positions, index.hashes)
    for run in runs:
        rows = index.rows_between(run.start * epochs, run.stop * epochs)
        positions = index.positions[rows]
        if not len(positions):
            continue
        located = pa.table(
            {
                "item_id": pending.item_ids.take(pa.array(positions // epochs)),
                "epoch": pa.array((positions % epochs).astype(np.int32), pa.int32()),
                "solution_hash": index.hashes.slice(rows.start, len(positions)),
                "fragment": index.fragments.slice(rows.start, len(positions)).cast(pa.string()),
            }
        )
        chunks = {}
        for gid in grade_condition_ids:
            mask = pending.masks.get((gid, gen))
            if mask is None:
                continue
            wanted = mask.reshape(-1)[positions]
            first = identical.first(gid, gen, positions) if identical is not None else None
            if first is not None:
                wanted &= first
            size = shard_size * (SCORER_SHARD_FACTOR if gid in scorers else 1)
            chunks[gid] = _chunks(located.filter(pa.array(wanted)), size)
        for chunk_index in range(max((len(c) for c in chunks.values()), default=0)):
            for gid, parts in chunks.items():
                if chunk_index >= len(parts):
                    continue
                cells = parts[chunk_index]
                if not cells.num_rows:
                    continue
                yield Shard(
                    shard_id=shard_id,
                    stage="grade",
                    condition_id=gid,
                    dataset=run.dataset,
                    fingerprint=run.fingerprint,
                    part=run.part,
                    cells=cells,
                    est_usd=usd_per_cell.get(gid, 0.0) * cells.num_rows,
                    gen_condition_id=gen,
                    repeats=repeated,
                )
                shard_id += 1
    return shard_id
