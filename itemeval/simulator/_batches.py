"""Batch processing shared by the OpenAI Batch API and Anthropic's Message Batches.

A `Batch` holds its requests and, once each is done, its result as one JSON line in the format of
its API. `BatchRunner` works a batch off in the background, in order, the requests finishing
evenly spread over `BatchSettings.delay_s` (request i of n at created + delay * (i+1)/n). Each is
answered by the same simulator as the live routes (`Simulator.answer`: the same text and usage for
the same request), without the live limits, latency or injected faults; a share `error_rate` ends
in an error instead (drawn from the seed, the batch's serial number on this server and the
custom_id: reproducible run to run, and a request resubmitted in a new batch can succeed).

How a batch ends:

* **completed**: every request succeeded or errored;
* **expired**: the completion window (`window_s`, default the 24 h requested) ended first, or
  `force_expire` is set (the batch then does nothing and expires when `delay_s` has passed); the
  requests not done are expired;
* **cancelled**: a cancel arrived first; the requests not done are cancelled (requests already
  answered keep their results);
* **failed**: an OpenAI input file did not validate (nothing ran), or the simulator itself failed
  while processing (`errors` code `server_error`, also printed on stderr: a bug to report).

State lives in memory only (the server is for tests): a driver that restarts against the same
server finds its batches by id; a new server knows none of them. The API modules
(`openai_batches.py`, `anthropic_batches.py`) turn requests into `Batch`es and batches into JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from itemeval.simulator._model import stable_unit
from itemeval.simulator._settings import BatchSettings
from itemeval.simulator._stats import BatchStats

#: The completion window both APIs offer.
DEFAULT_WINDOW_S = 24 * 3600.0
#: Between two requests due at the same moment, yield to the event loop this often.
_YIELD_EVERY = 256
#: A request's outcome code in `Batch.codes` (0 while it is not done).
PENDING, SUCCEEDED, ERRORED, EXPIRED, CANCELED = range(5)


@dataclass(slots=True)
class BatchItem:
    custom_id: str
    body: Any  # the request body: chat completions body, or Anthropic `params`


@dataclass(slots=True)
class BatchAnswer:
    """One answered batch request: the HTTP status and body a live call would have had."""

    status: int
    body: dict[str, Any]
    request_id: str
    model: str = ""


class Answerer(Protocol):
    def batch_answer(self, api: str, body: Any, fail: bool) -> BatchAnswer: ...


class BatchFormat(Protocol):
    """What an API module tells the runner: how to validate, and how to write result lines."""

    api: str

    def validate(self, batch: Batch) -> tuple[list[BatchItem], list[dict[str, Any]]]:
        """The batch's requests, and the problems that fail it (OpenAI's input file)."""
        ...

    def result_line(
        self, batch: Batch, index: int, item: BatchItem, answer: BatchAnswer
    ) -> bytes: ...

    def unfinished_line(self, batch: Batch, index: int, item: BatchItem, outcome: str) -> bytes: ...

    def ended(self, batch: Batch) -> None: ...


@dataclass(eq=False)
class Batch:
    """One batch of either API (`fields` holds what only one of them has)."""

    id: str
    format: BatchFormat
    items: list[BatchItem]
    created_at: float  # epoch seconds
    expires_at: float
    t0: float = 0.0  # time.monotonic() at creation: the schedule's origin
    serial: int = 0  # 1, 2, ... in order of creation on this server
    fields: dict[str, Any] = field(default_factory=dict)
    status: str = "validating"  # validating | in_progress | cancelling | ended
    outcome: str | None = None  # completed | expired | cancelled | failed, once ended
    in_progress_at: float | None = None
    cancelled_at: float | None = None  # when the cancel arrived
    ended_at: float | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)  # validation errors (OpenAI)
    # One JSON line per request once it is done (None before), its outcome code (`OUTCOMES`),
    # and the counts by outcome.
    lines: list[bytes | None] = field(default_factory=list)
    codes: bytearray = field(default_factory=bytearray)
    succeeded: int = 0
    errored: int = 0
    expired: int = 0
    canceled: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None

    @property
    def done(self) -> int:
        return self.succeeded + self.errored

    @property
    def ended(self) -> bool:
        return self.status == "ended"

    def prepare(self) -> None:
        """Room for a result per request (once the requests are known)."""
        if len(self.lines) != len(self.items):
            self.lines = [None] * len(self.items)
            self.codes = bytearray(len(self.items))

    def add_usage(self, usage: dict[str, int]) -> None:
        for key, value in usage.items():
            self.usage[key] = self.usage.get(key, 0) + value


class BatchRunner:
    """Runs batches in the background; see the module docstring."""

    def __init__(
        self,
        settings: BatchSettings,
        seed: int,
        answerer: Answerer,
        stats: Callable[[], BatchStats],
    ):
        self.settings = settings
        self.seed = seed
        self.answerer = answerer
        self.stats = stats
        self.batches: dict[str, Batch] = {}  # in creation order
        self._tag = os.urandom(4).hex()  # ids of one server never match another's
        self._serial = 0  # of ids
        self._created = 0  # of batches

    def new_id(self, prefix: str) -> str:
        self._serial += 1
        return f"{prefix}{self._tag}{self._serial:06d}"

    def window_s(self, requested_s: float = DEFAULT_WINDOW_S) -> float:
        return self.settings.window_s or requested_s

    def submit(self, batch: Batch) -> None:
        batch.t0 = time.monotonic()
        self._created += 1
        batch.serial = self._created
        self.batches[batch.id] = batch
        self.stats().submitted += 1
        batch.prepare()
        batch.task = asyncio.get_running_loop().create_task(self._run(batch))
        batch.task.add_done_callback(lambda _: self._after_cancel(batch))

    def cancel(self, batch: Batch) -> None:
        """Ask a batch to stop; it ends `cancelled` at once (requests not done: cancelled)."""
        if batch.ended or batch.status == "cancelling":
            return
        batch.status = "cancelling"
        batch.cancelled_at = time.time()
        if batch.task is not None:
            batch.task.cancel()

    def find(self, batch_id: str, api: str) -> Batch | None:
        batch = self.batches.get(batch_id)
        return batch if batch is not None and batch.format.api == api else None

    def listed(self, api: str) -> list[Batch]:
        """This API's batches, newest first."""
        return [b for b in reversed(self.batches.values()) if b.format.api == api]

    async def close(self) -> None:
        tasks = [b.task for b in self.batches.values() if b.task is not None and not b.task.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # ---------------------------------------------------------------- the work

    async def _run(self, batch: Batch) -> None:
        await asyncio.sleep(0)  # the create call answers first, with `validating`
        try:
            # In a thread: a large input file must not stall the live routes.
            items, errors = await asyncio.to_thread(batch.format.validate, batch)
            batch.items, batch.errors = items, errors
            if batch.errors:
                self._end(batch, "failed")
                return
            batch.prepare()
            batch.status = "in_progress"
            batch.in_progress_at = time.time()
            await self._work(batch)
        except Exception as exc:  # a bug here must end the batch, not leave drivers polling
            print(f"sim-server: batch {batch.id} failed: {exc!r}", file=sys.stderr, flush=True)
            batch.errors = [{"code": "server_error", "message": repr(exc), "param": None}]
            self._end(batch, "failed")

    def _after_cancel(self, batch: Batch) -> None:
        """The task is over: if a cancel stopped it (at any point, even before it started),
        the batch ends `cancelled` now."""
        if batch.status == "cancelling":
            self._close_unfinished(batch, "canceled")
            self._end(batch, "cancelled")

    async def _work(self, batch: Batch) -> None:
        settings = self.settings
        start = batch.t0
        deadline = start + (batch.expires_at - batch.created_at)
        if settings.force_expire:
            await _sleep_until(min(deadline, start + settings.delay_s))
            self._close_unfinished(batch, "expired")
            self._end(batch, "expired")
            return
        n = len(batch.items)
        for i, item in enumerate(batch.items):
            due = start + settings.delay_s * (i + 1) / n
            if due > deadline:
                await _sleep_until(deadline)
                self._close_unfinished(batch, "expired")
                self._end(batch, "expired")
                return
            if due - time.monotonic() > 0.001:
                await _sleep_until(due)
            elif i % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
            self._answer(batch, i, item)
        self._end(batch, "completed")

    def _answer(self, batch: Batch, index: int, item: BatchItem) -> None:
        fail = (
            self.settings.error_rate > 0
            and stable_unit("batch-error", self.seed, batch.serial, item.custom_id)
            < self.settings.error_rate
        )
        answer = self.answerer.batch_answer(batch.format.api, item.body, fail)
        if answer.status == 200:
            batch.succeeded += 1
            batch.codes[index] = SUCCEEDED
        else:
            batch.errored += 1
            batch.codes[index] = ERRORED
        batch.lines[index] = batch.format.result_line(batch, index, item, answer)

    def _close_unfinished(self, batch: Batch, outcome: str) -> None:
        batch.prepare()
        count = 0
        code = EXPIRED if outcome == "expired" else CANCELED
        for index, item in enumerate(batch.items):
            if batch.lines[index] is None:
                batch.lines[index] = batch.format.unfinished_line(batch, index, item, outcome)
                batch.codes[index] = code
                count += 1
        stats = self.stats()
        if outcome == "expired":
            batch.expired += count
            stats.expired_requests += count
        else:
            batch.canceled += count
            stats.cancelled_requests += count

    def _end(self, batch: Batch, outcome: str) -> None:
        batch.status = "ended"
        batch.outcome = outcome
        batch.ended_at = time.time()
        stats = self.stats()
        setattr(stats, outcome, getattr(stats, outcome) + 1)
        batch.format.ended(batch)


async def _sleep_until(moment: float) -> None:
    delay = moment - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


# --------------------------------------------------------------------------- shared helpers


def rfc3339(epoch: float | None) -> str | None:
    """Anthropic's timestamps: RFC 3339 in UTC."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat().replace("+00:00", "Z")


def page(
    items: list[Any],
    key: Callable[[Any], str],
    *,
    after: str | None = None,
    before: str | None = None,
    limit: int = 20,
) -> tuple[list[Any], bool]:
    """A cursor page of `items` (already in list order): those after `after` (or before
    `before`), at most `limit`; and whether more follow in that direction."""
    ids = [key(item) for item in items]
    if before is not None:
        end = ids.index(before) if before in ids else len(ids)
        start = max(0, end - limit)
        return items[start:end], start > 0
    start = ids.index(after) + 1 if after is not None and after in ids else 0
    chosen = items[start : start + limit]
    return chosen, start + limit < len(items)


def lines_of(batch: Batch, codes: Iterable[int] | None = None) -> Iterable[bytes]:
    """The result lines of a batch (of the outcomes `codes`, or all), in request order."""
    wanted = None if codes is None else set(codes)
    for line, code in zip(batch.lines, batch.codes, strict=True):
        if line is not None and (wanted is None or code in wanted):
            yield line
