"""Paid answers on their way to the response cache: durable within about a second of arriving.

A contract (`../shared/design.md`, "Paid answers are durable"): an answer a provider billed is
in the response cache within about a second of arriving, before and independently of its
shard's store fragment. So a failed store write, a shard dispatched again or a re-run finds it
there and never pays for it again; a SIGKILL loses at most the calls in flight plus the answers
of the last flush interval.

`ResponseJournal` buffers rows per cache group and writes them as one fragment per group at most
`flush_s` seconds after the oldest of them arrived (also when a write was still going on then:
the next one is timed from the oldest row waiting, not from the end of the last write), and
whenever a shard asks (`flush`, before it writes its fragment). Writes run
in a thread, shielded from cancellation, so the event loop keeps every other call flowing and an
interrupted shard never drops what it paid for. A write that fails (a cache on a flaky object
store) keeps its rows for the next flush; the store fragment is written anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from typing import Any

from itemeval.store import ResponseCache

log = logging.getLogger("itemeval.journal")

#: How long an answer may wait in memory before it is written to the cache.
FLUSH_S = 0.5


class ResponseJournal:
    """Buffers fresh, successful answers and writes them to the response cache (module doc)."""

    def __init__(self, cache: ResponseCache, *, flush_s: float = FLUSH_S):
        self.cache = cache
        self.flush_s = flush_s
        self._rows: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        self._lock: asyncio.Lock | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._oldest: float | None = None  # when the oldest row waiting arrived
        self.written = 0  # rows written so far (for tests and logs)
        self.failures = 0  # writes that failed (their rows were kept for the next flush)

    def add(self, group: str, row: dict[str, Any]) -> None:
        """Queue one answer (call from the event loop, as soon as the answer arrives)."""
        self._rows[group].append(row)
        if self._oldest is None:
            self._oldest = time.monotonic()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush_soon())

    @property
    def pending(self) -> int:
        return sum(len(rows) for rows in self._rows.values())

    async def flush(self) -> None:
        """Write everything queued now; returns when it is in the cache (or the write failed).

        Shielded: cancelling the caller does not stop a write that has started."""
        await asyncio.shield(self._write_all())

    async def aclose(self) -> None:
        self._closed = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flush()

    async def _flush_soon(self) -> None:
        while True:
            oldest = self._oldest if self._oldest is not None else time.monotonic()
            await asyncio.sleep(max(0.0, oldest + self.flush_s - time.monotonic()))
            await asyncio.shield(self._write_all())
            if not self.pending or self._closed:
                return

    async def _write_all(self) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one write at a time, in arrival order
            batches, self._rows, self._oldest = self._rows, defaultdict(list), None
            for group, rows in batches.items():
                if not rows:
                    continue
                try:
                    await asyncio.to_thread(self._put, group, rows)
                    self.written += len(rows)
                except Exception as exc:  # the cache is down: keep the rows, try again later
                    self.failures += 1
                    self._rows[group][:0] = rows
                    if self._oldest is None:  # tried again `flush_s` from now
                        self._oldest = time.monotonic()
                    log.warning(
                        "response cache write failed (%s: %s); %d answer(s) kept for the next try",
                        type(exc).__name__,
                        exc,
                        len(rows),
                    )

    def _put(self, group: str, rows: list[dict[str, Any]]) -> None:
        self.cache.put(group, rows)  # built (and checked) once, by the cache
