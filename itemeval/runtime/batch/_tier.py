"""The batch tier beside a stage's live dispatch: the driver's one hook.

    tier = BatchTier.open(plan, stage, pending, context, spend=..., progress=...)
    live = tier.live if tier else pending            # what the live dispatch may take now
    result = dispatch(...live shards...)             # the batches run meanwhile, in a thread
    result = tier.finish(result, stop, cap, dispatch_live)   # wait, then leftovers live

`open` splits the stage's pending cells three ways:

* cells of conditions whose endpoint has `batch.enabled` go to the batch tier;
* cells that an open batch record holds (`_records.py`) are the batch's: no run calls them
  again. A record whose driver is gone is taken over and resumed; one whose owner is alive (a
  concurrent run of the same study) is left to it, and its cells are skipped by this run;
* the rest is called live, as before.

The batches run on an event loop in a thread (`runner.BatchStage`), beside the live dispatch of
the other conditions. `finish` waits for them (or until Ctrl-C / SIGTERM: then the batches stay
recorded and the next run resumes them), then hands what they did not answer (deadline,
failures) to the live dispatch. Nothing here imports Ray.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from itemeval.calls import SpendSource
from itemeval.planning import Plan
from itemeval.runtime import (
    Cap,
    Progress,
    RowCost,
    RunContext,
    Shard,
    ShardSummary,
    StageResult,
    Stop,
    fold,
    generate_shards,
    grade_shards,
)
from itemeval.runtime.batch._records import BatchLog, BatchRecord
from itemeval.runtime.batch._runner import BatchStage, StageOutcome
from itemeval.store import ITEMS_PER_PART, CellMasks

#: Shard ids of the batch tier's summaries start here (live shards count from 0 per stage).
FIRST_SHARD_ID = 900_000_000
#: After a stop request, how long the batches' thread may take to record where it is.
STOP_WAIT_S = 10.0


def batch_conditions(plan: Plan, stage: str) -> set[str]:
    """The stage's conditions whose endpoint sends them through its batch API."""
    endpoints = plan.study.endpoints
    if stage == "generate":
        return {c.id for c in plan.design.generate if endpoints[c.endpoint].batch_enabled}
    return {
        c.id
        for c in plan.design.judges
        if c.endpoint is not None and endpoints[c.endpoint].batch_enabled
    }


@dataclass
class _Split:
    taken: CellMasks  # to the batch tier
    live: CellMasks  # to the live dispatch
    adopted: list[BatchRecord]
    held: int  # cells that open records of live runs hold (skipped)
    resumed: int  # cells of the records this run took over


class BatchTier:
    """One stage's batch tier (see the module doc)."""

    def __init__(
        self,
        plan: Plan,
        stage: str,
        split: _Split,
        context: RunContext,
        spend: SpendSource | None,
        progress: Progress,
    ):
        self.stage = stage
        self.live = split.live
        self.taken = split.taken
        self.cells = split.taken.num_rows + split.resumed
        self._progress = progress
        self._summaries: queue.SimpleQueue[ShardSummary] = queue.SimpleQueue()
        self._item_ids = split.taken.item_ids
        self._epochs = split.taken.epochs
        self._loop = asyncio.new_event_loop()
        self._runner = BatchStage(
            context,
            BatchLog(plan.store.root),
            spend,
            message=progress.message,
            summary=self._summaries.put,
            first_shard_id=FIRST_SHARD_ID,
        )
        self._future: concurrent.futures.Future[StageOutcome] = concurrent.futures.Future()
        self._thread: threading.Thread | None = None
        if not split.taken.num_rows and not split.adopted:
            self._future.set_result(StageOutcome())  # only cells other runs hold: skipped
            return
        shards = _shards(plan, stage, split.taken)
        self._thread = threading.Thread(
            target=self._main, args=(shards, split.adopted), name="itemeval-batches", daemon=True
        )
        self._thread.start()

    @classmethod
    def open(
        cls,
        plan: Plan,
        stage: str,
        pending: CellMasks,
        context: RunContext,
        *,
        spend: Callable[[], SpendSource | None],
        progress: Progress,
    ) -> BatchTier | None:
        """The stage's batch tier, or None when nothing goes through batches. `spend` gives
        the run's ledger, asked for only when there is a batch tier (an in-process runner then
        keeps the ledger in this process)."""
        enabled = batch_conditions(plan, stage)
        records = _records_of(plan, stage)
        if not enabled and not records:
            return None
        split = _split(plan, stage, pending, enabled, records, context.run_id)
        if split.held:
            progress.message(
                f"{stage}: {split.held:,} cells are in batches another run is working on; "
                "they are left to it (run again later to see them stored)"
            )
        if split.taken.num_rows:
            names = ", ".join(sorted(_endpoints(plan, enabled)))
            progress.message(
                f"{stage}: {split.taken.num_rows:,} cells go through the batch API of {names}, "
                "at the batch price"
            )
        return cls(plan, stage, split, context, spend(), progress)

    # -- the thread --------------------------------------------------------------------------
    def _main(self, shards: list[Shard], adopted: list[BatchRecord]) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            outcome = self._loop.run_until_complete(self._runner.run(shards, adopted))
            self._future.set_result(outcome)
        except BaseException as exc:
            self._future.set_exception(exc)
        finally:
            self._loop.close()

    # -- the driver's side -------------------------------------------------------------------
    def drain(self, result: StageResult) -> None:
        """Fold the summaries of what the batches have written so far into `result`."""
        while True:
            try:
                summary = self._summaries.get_nowait()
            except queue.Empty:
                return
            self._progress.add(summary)
            fold(result, summary)

    def finish(
        self,
        result: StageResult,
        stop: Stop,
        cap: Cap,
        dispatch_live: Callable[[CellMasks], StageResult],
    ) -> StageResult:
        """Wait for the batches, then call their leftovers live; returns the stage's result."""
        result.counts.planned += self.cells
        while not self._future.done():
            self.drain(result)
            if stop.requested:
                self.stop()
                break
            try:
                self._future.result(timeout=0.2)
            except concurrent.futures.TimeoutError:
                continue
        try:
            outcome = self._future.result(timeout=STOP_WAIT_S if stop.requested else None)
        except concurrent.futures.TimeoutError:  # stopping, inside a call to the batch API
            self._progress.message(
                f"{self.stage}: stopped while a batch API call was in flight; the batches stay "
                "recorded and the next run picks them up"
            )
            self.drain(result)
            return result
        self.drain(result)
        result.not_sent += outcome.not_sent
        if outcome.not_sent:
            cap.reached = True
        if not outcome.leftovers or stop.requested or cap.reached:
            return result
        leftovers = self._masks(outcome.leftovers)
        self._progress.message(
            f"{self.stage}: {leftovers.num_rows:,} cells the batches did not answer are called "
            "live now"
        )
        return merge(result, dispatch_live(leftovers))

    def stop(self) -> None:
        if not self._future.done():
            self._loop.call_soon_threadsafe(self._runner.stop)

    def close(self) -> None:
        """Stop the batches (they stay recorded) and wait briefly for the thread."""
        self.stop()
        if self._thread is not None:
            self._thread.join(timeout=STOP_WAIT_S)

    def _masks(self, cells: list[tuple[str, dict[str, Any]]]) -> CellMasks:
        position = {item: i for i, item in enumerate(self._item_ids.to_pylist())}
        masks: dict[Hashable, np.ndarray] = {}
        for condition_id, cell in cells:
            key: Hashable = condition_id
            if self.stage == "grade":
                key = (condition_id, cell["gen_condition_id"])
            mask = masks.setdefault(key, np.zeros((len(position), self._epochs), dtype=bool))
            row = position.get(cell["item_id"])
            if row is not None and cell["epoch"] < self._epochs:
                mask[row, cell["epoch"]] = True
        return CellMasks(self._item_ids, self._epochs, masks)


def merge(result: StageResult, more: StageResult) -> StageResult:
    """`result` with `more` (a second dispatch of the same stage) added in."""
    for name in ("planned", "done", "errors", "cached", "parse_failures"):
        setattr(result.counts, name, getattr(result.counts, name) + getattr(more.counts, name))
    result.errors.update(more.errors)
    for name in ("usd", "input_tokens", "output_tokens", "calls", "cache_hits"):
        setattr(result.spend, name, getattr(result.spend, name) + getattr(more.spend, name))
    result.failed_shards.extend(more.failed_shards)
    result.redispatched += more.redispatched
    result.not_sent += more.not_sent
    result.unreported |= more.unreported
    for condition_id, told in more.reported.items():
        result.reported.setdefault(condition_id, RowCost()).absorb(told)
    return result


# ---------------------------------------------------------------------- the split


def open_batches_of(plan: Plan, stages: tuple[str, ...] | list[str]) -> bool:
    """True when batch records of these stages' selected conditions are still open (a run has
    work: collecting them, even when no cell is pending)."""
    return any(_records_of(plan, stage) for stage in stages)


def _records_of(plan: Plan, stage: str) -> list[BatchRecord]:
    """Open records of this stage's selected conditions."""
    wanted = {c.id for c in (plan.design.generate if stage == "generate" else plan.design.grade)}
    log = BatchLog(plan.store.root)
    return [r for r in log.open_records() if r.stage == stage and r.condition_id in wanted]


def _split(
    plan: Plan,
    stage: str,
    pending: CellMasks,
    enabled: set[str],
    records: list[BatchRecord],
    run_id: str,
) -> _Split:
    log = BatchLog(plan.store.root)
    position = {item: i for i, item in enumerate(pending.item_ids.to_pylist())}
    live = {key: mask.copy() for key, mask in pending.masks.items()}
    adopted: list[BatchRecord] = []
    held = resumed = 0
    gens = {c.id for c in plan.design.generate}
    for record in records:
        taken_over = log.adopt(record, run_id) if record.stale() else None
        mine = taken_over is not None
        if taken_over is not None:
            adopted.append(taken_over)
        cells = log.cells(record.local_id)
        for item_id, epoch, gen in zip(
            cells.column("item_id").to_pylist(),
            cells.column("epoch").to_pylist(),
            cells.column("gen_condition_id").to_pylist(),
            strict=True,
        ):
            if stage == "grade" and gen not in gens:
                continue
            key: Hashable = record.condition_id
            if stage == "grade":
                key = (record.condition_id, gen)
            row = position.get(item_id)
            mask = live.get(key)
            if row is None or mask is None or epoch >= pending.epochs or not mask[row, epoch]:
                continue
            mask[row, epoch] = False
            if mine:
                resumed += 1
            else:
                held += 1
    taken: dict[Hashable, np.ndarray] = {}
    for key in list(live):
        condition = key[0] if isinstance(key, tuple) else key
        if condition in enabled:
            taken[key] = live.pop(key)
            live[key] = np.zeros_like(taken[key])
    item_ids = pending.item_ids
    return _Split(
        CellMasks(item_ids, pending.epochs, taken),
        CellMasks(item_ids, pending.epochs, live),
        adopted,
        held,
        resumed,
    )


def _shards(plan: Plan, stage: str, taken: CellMasks) -> list[Shard]:
    """The taken cells as shards of up to a part each, condition after condition: one
    condition's requests fill its batches before the next one's are rendered (memory holds one
    condition's unsent requests at a time)."""
    runs = plan.item_runs()
    if stage == "generate":
        shards = list(generate_shards(taken, runs, shard_size=ITEMS_PER_PART, usd_per_cell={}))
    else:
        gens = [c.id for c in plan.design.generate]
        grades = sorted({key[0] for key in taken.masks if isinstance(key, tuple)})
        shards = [
            shard
            for shard in grade_shards(
                plan.store,
                taken,
                gens,
                grades,
                runs,
                shard_size=ITEMS_PER_PART,
                usd_per_cell={},
                scorers=set(),
            )
            if isinstance(shard, Shard)  # one batch for all: no barrier between repeats
        ]
    return sorted(shards, key=lambda shard: shard.condition_id)


def _endpoints(plan: Plan, conditions: set[str]) -> set[str]:
    names = set()
    for c in plan.design.generate:
        if c.id in conditions:
            names.add(c.endpoint)
    for g in plan.design.judges:
        if g.id in conditions and g.endpoint:
            names.add(g.endpoint)
    return names
