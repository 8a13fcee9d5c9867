# One piece: `BatchStage` is one state machine (reserve, submit, poll, collect) over shared state.
"""The batch tier of one stage: cells in, batches submitted, polled and collected, rows out.

    stage = BatchStage(context, BatchLog(store.root), spend, message=..., summary=...)
    outcome = await stage.run(shards, adopted)   # the cells to batch; records taken over

For each shard (cells of one condition in one items part) the requests are rendered as the live
path renders them (`calls/_requests.py`); the response cache answers what it can (those rows
are written at once, `tier = batch`, `cached`); requests with the same key are sent once. The
rest go into batches of one condition each, in this order:

1. the worst case of every request, at the batch price, is reserved with the run's ledger
   (what does not fit waits for settlements, and is `not_sent` when nothing can come back);
2. the record (`_records.py`: cells and state `prepared`) is written to the store;
3. the batch is created (OpenAI: with the record's id in its `metadata`); its id is recorded;
4. it is polled every `poll_interval_s`; once ended, its results are read, every paid answer
   is journaled to the response cache (flushed), then the store rows are written, the
   reservation settled at the real cost, and the record marked `collected`;
5. cells it did not answer (expired, cancelled, a transient error) go into another batch (up to
   `max_attempts`) or, past the deadline, to the live dispatch (`StageOutcome.leftovers`).

At the deadline, batches still running are cancelled at the provider and collected (what they
finished is kept); what is left goes live. Nothing the provider may still bill is ever called
live: a batch that cannot be confirmed ended keeps its cells until a later run collects it.

A create that may have happened (its answer was lost) is looked for before anything is sent
again (`BatchClient.find`); records of a driver that died are taken over by the next one
(`BatchLog.adopt`) and resumed where they were. Plain asyncio; the driver runs it in a thread
(`_tier.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from itemeval.calls import SpendSource, worst_case_usd
from itemeval.providers import (
    BatchApiError,
    BatchClient,
    BatchStatus,
    UncertainCreate,
    make_batch_client,
)
from itemeval.runtime import (
    RunContext,
    Shard,
    ShardRunner,
    ShardSummary,
    generate_target,
    judge_target,
)
from itemeval.runtime.batch._collect import CELL_PLACE, Collected, collect_rows, match_results
from itemeval.runtime.batch._prepare import Buffer, cells_table, chunks, prepare_shard, shards_of
from itemeval.runtime.batch._records import (
    HEARTBEAT_S,
    BatchLog,
    BatchRecord,
    Owner,
    new_local_id,
)
from itemeval.store import GRADES, SOLUTIONS

#: After a cancel at the deadline, how long a batch may take to end before it is left to a
#: later run (OpenAI's `cancelling` can take up to 10 minutes).
CANCEL_WAIT_S = 900.0
#: The most often a batch is polled, whatever `poll_interval_s` says.
MIN_POLL_S = 0.05
#: A lookup for a batch whose create was unclear (`BatchClient.find`) is tried this often.
FIND_ATTEMPTS = 3


@dataclass
class OpenBatch:
    record: BatchRecord
    client: BatchClient
    cells: pa.Table | None = None  # read from the record when needed
    status: BatchStatus | None = None
    next_poll: float = 0.0
    reserved: float = 0.0  # under this run's ledger
    adopted: bool = False
    told_at: float = 0.0  # when a failing poll was last reported


@dataclass
class StageOutcome:
    """What the batch tier leaves to the driver."""

    leftovers: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (cid, cell)
    not_sent: int = 0  # cells whose requests did not fit under the budget cap
    unconfirmed: list[str] = field(default_factory=list)  # records left open (still billed)


class BatchStage:
    """See the module doc."""

    def __init__(
        self,
        context: RunContext,
        log_: BatchLog,
        spend: SpendSource | None,
        *,
        message: Callable[[str], None],
        summary: Callable[[ShardSummary], None],
        first_shard_id: int = 0,
    ):
        self.context = context
        self.records = log_
        self.spend = spend
        self.capped = context.capped and spend is not None
        self.message = message
        self.report = summary
        self.runner = ShardRunner(context)
        self.outcome = StageOutcome()
        self._clients: dict[str, BatchClient] = {}
        self._buffers: dict[tuple[str, int], Buffer] = {}
        self._waiting: list[Buffer] = []  # flushed, but the budget did not fit yet
        self._open: dict[str, OpenBatch] = {}
        self._requeue: list[Shard] = []
        self._deadline: dict[str, float] = {}  # endpoint -> epoch seconds
        self._shard_id = first_shard_id
        self._heartbeat = 0.0
        self._stopping = False
        self._announced = 0.0
        self._wake = asyncio.Event()

    def stop(self) -> None:
        """Stop soon: nothing more is submitted; open batches stay recorded for a later run.
        (Call it on the loop's thread: `loop.call_soon_threadsafe(stage.stop)`.)"""
        self._stopping = True
        self._wake.set()

    # ------------------------------------------------------------------ the program

    async def run(self, shards: Sequence[Shard], adopted: Sequence[BatchRecord]) -> StageOutcome:
        try:
            for record in adopted:
                self._adopt(record)
            previous = None
            for shard in shards:  # condition after condition (`tier._shards`)
                if self._stopping:
                    break
                if previous is not None and shard.condition_id != previous:
                    await self._flush(everything=True)  # the last condition is all buffered
                previous = shard.condition_id
                await self._prepare(shard)
                await self._touch(time.time())  # preparing a large study takes a while
            await self._flush(everything=True)
            while not self._stopping:
                now = time.time()
                await self._poll(now)
                requeued, self._requeue = self._requeue, []
                for shard in requeued:
                    await self._prepare(shard)
                await self._flush(everything=True)
                await self._retry_waiting()
                if not self._open and not self._waiting and not self._requeue:
                    break
                await self._touch(now)
                self._announce(now)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._pause())
        finally:
            await self._close()
        return self.outcome

    def _pause(self) -> float:
        due = [b.next_poll for b in self._open.values()]
        wait = min(due, default=time.time() + 1.0) - time.time()
        if self._waiting:
            wait = min(wait, 1.0)
        return max(MIN_POLL_S, min(wait, HEARTBEAT_S, 5.0))

    async def _close(self) -> None:
        for open_batch in self._open.values():  # left open: a later run takes them over
            record = open_batch.record
            if record.owner.run_id == self.context.run_id:
                await asyncio.to_thread(
                    self.records.write, record.model_copy(update={"released": True})
                )
        if self.runner.journal is not None:
            await self.runner.journal.flush()
        for client in self._clients.values():
            await client.aclose()
        await self.runner.aclose()

    # ------------------------------------------------------------------ preparing

    async def _prepare(self, shard: Shard) -> None:
        """Render the shard's requests; write what the cache answers; buffer the rest."""
        attempt = shard.attempt + 1
        buffer = self._buffers.setdefault(
            (shard.condition_id, attempt), Buffer(shard.condition_id, attempt)
        )
        hits = await prepare_shard(
            shard, buffer, context=self.context, runner=self.runner, shard_id=self._next_id()
        )
        if hits is not None:
            self.report(hits)
        await self._flush(everything=False)

    # ------------------------------------------------------------------ submitting

    async def _flush(self, *, everything: bool) -> None:
        """Submit the buffers that fill a batch (all of them with `everything`)."""
        for key, buffer in list(self._buffers.items()):
            if self._stopping:
                return
            client = self._client(buffer.condition_id)
            full = len(buffer.requests) >= client.max_requests or buffer.size >= client.max_bytes
            if not buffer.requests or not (full or everything):
                continue
            del self._buffers[key]
            for chunk in chunks(buffer, client):
                rest = await self._submit(chunk)
                if rest is not None and rest.requests:
                    self._waiting.append(rest)

    async def _retry_waiting(self) -> None:
        """Buffers that did not fit under the cap: try again, or give up when nothing that
        could free budget is outstanding (no batch of this stage is open)."""
        waiting, self._waiting = self._waiting, []
        for buffer in waiting:
            rest = await self._submit(buffer)
            if rest is None or not rest.requests:
                continue
            if self._open:
                self._waiting.append(rest)
            else:
                cells = sum(len(p.cells) for p in rest.requests.values())
                self.outcome.not_sent += cells
                await self._refused(len(rest.requests))
                self.message(
                    f"batch: {cells:,} cells of {self._slug(rest.condition_id)} did not fit "
                    "under budget.max_usd and were not sent"
                )

    async def _submit(self, buffer: Buffer) -> Buffer | None:
        """Reserve, record and create one batch of (a prefix of) `buffer`; returns what did not
        fit under the cap (None when everything went, or went live)."""
        condition_id = buffer.condition_id
        model, endpoint_name, group = self._target(condition_id)
        settings = self.context.endpoints[endpoint_name]
        client = self._client(condition_id)
        now = time.time()
        deadline = self._deadline_of(endpoint_name)
        pending = list(buffer.requests.values())
        if now >= deadline or buffer.attempt > self._max_attempts(endpoint_name):
            self._to_live(condition_id, [c for p in pending for c in p.cells])
            return None
        price = self.context.pricing.price(model, "batch")
        worst = [worst_case_usd(price, settings, p.request) or 0.0 for p in pending]
        granted = await self._reserve(worst)
        chunk, rest = pending[:granted], pending[granted:]
        left = Buffer(condition_id, buffer.attempt, {p.key: p for p in rest})
        if not chunk:
            return left
        reserved = sum(worst[:granted]) if self.capped else 0.0
        local_id = new_local_id()
        lines = [client.encode(f"{local_id}-{i}", p.request) for i, p in enumerate(chunk)]
        cells = cells_table(chunk)
        record = BatchRecord(
            local_id=local_id,
            stage="generate" if condition_id in self.context.generate else "grade",
            condition_id=condition_id,
            endpoint=endpoint_name,
            api=client.api,
            model=model,
            group=group,
            requests=len(chunk),
            cells=cells.num_rows,
            attempt=buffer.attempt,
            run_id=self.context.run_id,
            reserved_usd=reserved,
            prepared_at=now,
            deadline=deadline,
            owner=Owner.me(self.context.run_id),
            touched_at=now,
        )
        await asyncio.to_thread(self.records.prepare, record, cells)
        batch = OpenBatch(record, client, cells=cells, reserved=reserved)
        self._open[local_id] = batch
        await self._create(batch, lines)
        return left

    async def _create(self, batch: OpenBatch, lines: list[bytes]) -> None:
        record = batch.record
        try:
            status = await batch.client.create(record.local_id, lines)
        except UncertainCreate as exc:
            # It may exist: the next poll looks for it before anything is sent again.
            self.message(f"batch {record.local_id}: its create was unclear ({exc}); looking")
            batch.next_poll = time.time() + min(2.0, self._poll_s(record))
            return
        except BatchApiError as exc:
            if exc.transient:
                self.message(f"batch {record.local_id}: not created ({exc}); trying again")
                await self._abandon(batch, f"not created: {exc}", live=False)
            else:
                self.message(
                    f"batch {record.local_id}: the batch API refused it ({exc}); its "
                    f"{record.cells:,} cells of {self._slug(record.condition_id)} go live"
                )
                await self._abandon(batch, f"refused: {exc}", live=True)
            return
        batch.status = status
        await self._save(batch, state="submitted", batch_id=status.id, submitted_at=time.time())
        batch.next_poll = time.time() + self._poll_s(record)
        self.message(
            f"batch {record.local_id}: {record.requests:,} requests "
            f"({record.cells:,} cells) of {self._slug(record.condition_id)} submitted to "
            f"{record.endpoint} ({record.api} batch {status.id}); deadline "
            f"{_when(record.deadline)}"
        )

    async def _find(self, batch: OpenBatch) -> list[str]:
        record = batch.record
        for attempt in range(FIND_ATTEMPTS):
            try:
                return await batch.client.find(record.local_id, record.requests, record.prepared_at)
            except BatchApiError:
                if attempt + 1 == FIND_ATTEMPTS:
                    raise
                await asyncio.sleep(2.0**attempt)
        return []

    # ------------------------------------------------------------------ polling

    def _adopt(self, record: BatchRecord) -> None:
        client = self._client(record.condition_id, record.endpoint)
        batch = OpenBatch(record, client, adopted=True, next_poll=0.0)
        self._open[record.local_id] = batch
        self.message(
            f"batch {record.local_id}: resumed ({record.state}, {record.cells:,} cells of "
            f"{self._slug(record.condition_id)}, provider batch {record.batch_id or '?'})"
        )

    async def _poll(self, now: float) -> None:
        for local_id, batch in list(self._open.items()):
            if self._stopping:
                return
            if batch.next_poll > now:
                continue
            batch.next_poll = now + self._poll_s(batch.record)
            try:
                await self._poll_one(batch, now)
            except BatchApiError as exc:
                if now - batch.told_at > 60:  # say it once a minute at most
                    batch.told_at = now
                    self.message(f"batch {local_id}: {exc} (trying again)")

    async def _poll_one(self, batch: OpenBatch, now: float) -> None:
        record = batch.record
        if record.state == "prepared":  # adopted before its id was recorded
            found = await self._find(batch)
            if not found:
                await self._abandon(batch, "never created (nothing found at the provider)")
                return
            update: dict[str, Any] = {"state": "submitted", "submitted_at": now}
            update |= {"batch_id": found[0]} if len(found) == 1 else {"candidates": found}
            await self._save(batch, **update)
            record = batch.record
        ids = [record.batch_id] if record.batch_id else list(record.candidates)
        statuses = [await batch.client.retrieve(i) for i in ids]
        batch.status = statuses[0]
        if all(s.ended for s in statuses):
            await self._collect(batch, statuses)
            return
        if now >= record.deadline:
            await self._cancel(batch, statuses, now)

    async def _cancel(self, batch: OpenBatch, statuses: list[BatchStatus], now: float) -> None:
        record = batch.record
        if record.cancel_requested_at is None:
            if record.batch_id is None:  # unproven candidates are never cancelled
                return
            await batch.client.cancel(record.batch_id)
            await self._save(batch, cancel_requested_at=now)
            self.message(
                f"batch {record.local_id}: deadline passed; cancelled at the provider (what it "
                "finished is kept, the rest goes live)"
            )
        elif now - record.cancel_requested_at > CANCEL_WAIT_S:
            self.message(
                f"batch {record.local_id}: still {statuses[0].status} {CANCEL_WAIT_S:.0f} s "
                "after its cancel; its cells stay with it (run again later to collect it)"
            )
            self.outcome.unconfirmed.append(record.local_id)
            await self._save(batch, released=True)
            del self._open[record.local_id]

    # ------------------------------------------------------------------ collecting

    async def _collect(self, batch: OpenBatch, statuses: list[BatchStatus]) -> None:
        record = batch.record
        fetched = [
            (status, [] if status.failure else await batch.client.results(status))
            for status in statuses
        ]
        chosen, results = match_results(record.local_id, fetched)
        if chosen is None:
            await self._abandon(batch, "no candidate batch held its requests")
            return
        if chosen.failure:
            self.message(
                f"batch {record.local_id}: failed at the provider ({chosen.failure}); its cells "
                "go live"
            )
        if batch.cells is None:
            batch.cells = await asyncio.to_thread(self.records.cells, record.local_id)
        submitted = record.submitted_at or record.prepared_at
        collected = await asyncio.to_thread(
            collect_rows,
            record,
            batch.cells,
            results,
            context=self.context,
            runner=self.runner,
            price=self.context.pricing.price(record.model, "batch"),
            latency_ms=max(0.0, time.time() - submitted) * 1000,
            skip_stored=batch.adopted,
            shard_id=self._next_id(),
        )
        await self._write(record, collected)
        await self._settle(batch.reserved, collected.usd, collected.paid)
        await self._save(
            batch,
            state="collected",
            batch_id=chosen.id,
            collected_at=time.time(),
            status=chosen.status,
            usd=collected.usd,
            counts=collected.counts,
        )
        del self._open[record.local_id]
        await batch.client.cleanup(chosen)
        summary = collected.summary
        assert summary is not None
        self.report(summary)
        errors = sum(summary.errors.values())
        self.message(
            f"batch {record.local_id}: collected {summary.ok:,} ok, {errors:,} errors, "
            f"{len(collected.leftovers):,} unanswered; ${collected.usd:,.4f} at the batch price"
        )
        live = bool(chosen.failure)
        self._leftovers(record, collected.leftovers, live=live)

    async def _write(self, record: BatchRecord, collected: Collected) -> None:
        """Paid answers to the response cache first (flushed), then the store rows."""
        journal = self.runner.journal
        if journal is not None and collected.cache_rows:
            for row in collected.cache_rows:
                journal.add(record.group, row)
            await journal.flush()
        stage = SOLUTIONS if record.stage == "generate" else GRADES
        for partition, rows in collected.rows.items():
            if rows:
                await asyncio.to_thread(self.runner.store.write, stage, partition, rows)

    def _leftovers(self, record: BatchRecord, cells: list[dict[str, Any]], *, live: bool) -> None:
        """Unanswered cells: another batch while attempts and time are left, else live."""
        if not cells:
            return
        if (
            live
            or record.attempt >= self._max_attempts(record.endpoint)
            or (time.time() >= self._deadline_of(record.endpoint))
        ):
            self._to_live(record.condition_id, cells)
            return
        self._requeue.extend(shards_of(record, cells))

    def _to_live(self, condition_id: str, cells: list[dict[str, Any]]) -> None:
        self.outcome.leftovers.extend((condition_id, cell) for cell in cells)

    async def _abandon(self, batch: OpenBatch, note: str, *, live: bool = False) -> None:
        """Give a record up (nothing of it was or will be answered): its cells go into another
        batch (an attempt used), or live."""
        record = batch.record
        await self._settle(batch.reserved, 0.0, 0)
        await self._save(batch, state="abandoned", note=note)
        self._open.pop(record.local_id, None)
        if batch.cells is None:
            batch.cells = await asyncio.to_thread(self.records.cells, record.local_id)
        stored: pa.Table = batch.cells
        cells = [
            {k: c[k] for k in (*CELL_PLACE, "solution_hash", "fragment")}
            for c in stored.to_pylist()
        ]
        self._leftovers(record, cells, live=live)

    # ------------------------------------------------------------------ money

    async def _reserve(self, worst: list[float]) -> int:
        """How many of the asks (in order) the ledger grants now."""
        if not self.capped or not worst:
            return len(worst)
        assert self.spend is not None
        reply = await self.spend.exchange(0.0, 0.0, worst)
        return reply.granted

    async def _settle(self, reserved: float, usd: float, calls: int) -> None:
        if self.spend is None or (reserved <= 0 and usd <= 0 and not calls):
            return
        await self.spend.exchange(reserved if self.capped else 0.0, usd, [], calls)

    async def _refused(self, requests: int) -> None:
        if self.spend is not None:
            await self.spend.exchange(0.0, 0.0, [], 0, requests)

    # ------------------------------------------------------------------ records

    async def _save(self, batch: OpenBatch, **update: Any) -> None:
        batch.record = await asyncio.to_thread(
            self.records.write, batch.record.model_copy(update=update)
        )

    async def _touch(self, now: float) -> None:
        if now - self._heartbeat < HEARTBEAT_S:
            return
        self._heartbeat = now
        for local_id, batch in list(self._open.items()):
            if not await asyncio.to_thread(self.records.still_mine, batch.record):
                self.message(f"batch {local_id}: taken over by another driver; leaving it")
                del self._open[local_id]
                continue
            await self._save(batch)

    def _announce(self, now: float) -> None:
        if not self._open or now - self._announced < 60.0:
            return
        self._announced = now
        requests = sum(b.record.requests for b in self._open.values())
        states = sorted({b.status.status for b in self._open.values() if b.status is not None})
        deadline = min(b.record.deadline for b in self._open.values())
        self.message(
            f"batch: waiting for {len(self._open)} batch(es) of {requests:,} requests "
            f"({', '.join(states) or 'submitted'}); deadline in {_left(deadline - now)}"
        )

    # ------------------------------------------------------------------ lookups

    def _target(self, condition_id: str) -> tuple[str, str, str]:
        if condition_id in self.context.generate:
            target = generate_target(self.context.generate[condition_id])
        else:
            target = judge_target(self.context.grade[condition_id])
        return target.model, target.endpoint, target.group

    def _client(self, condition_id: str, endpoint: str | None = None) -> BatchClient:
        name = endpoint or self._target(condition_id)[1]
        client = self._clients.get(name)
        if client is None:
            client = make_batch_client(self.context.endpoints[name], field=f"endpoints.{name}")
            self._clients[name] = client
        return client

    def _deadline_of(self, endpoint: str) -> float:
        """Fixed at the stage's first submission to the endpoint."""
        if endpoint not in self._deadline:
            batch = self.context.endpoints[endpoint].batch
            start = datetime.now(UTC)
            moment = batch.deadline_after(start) if batch is not None else start
            self._deadline[endpoint] = moment.timestamp()
        return self._deadline[endpoint]

    def _max_attempts(self, endpoint: str) -> int:
        batch = self.context.endpoints[endpoint].batch
        return batch.max_attempts if batch is not None else 1

    def _poll_s(self, record: BatchRecord) -> float:
        batch = self.context.endpoints[record.endpoint].batch
        return max(MIN_POLL_S, batch.poll_interval_s if batch is not None else 60.0)

    def _slug(self, condition_id: str) -> str:
        found = self.context.generate.get(condition_id) or self.context.grade.get(condition_id)
        return found.slug if found is not None else condition_id

    def _next_id(self) -> int:
        self._shard_id += 1
        return self._shard_id


# ---------------------------------------------------------------------- helpers


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def _left(seconds: float) -> str:
    if seconds <= 0:
        return "0 s (passed)"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
