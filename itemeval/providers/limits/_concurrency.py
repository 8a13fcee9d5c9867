"""Concurrency per endpoint, held as leases: the sum over all drivers and workers never exceeds
the endpoint's `max_concurrency`.

* `ConcurrencyPool` is the authority (in the endpoint's limiter: a Ray actor on a cluster, an
  object in this process otherwise). Each holder (one worker's limiter) leases a number of
  slots; the pool never lets the leases add up to more than the limit. A holder reports the
  slots it has in use and how many it wants; it gets at most what is free, never less than what
  it has in use, and no more than a fair share while another holder waits for slots. Leases
  expire after `ttl_s` without news (a dead worker's slots come back).
* `LeasedSlots` is a worker's side: a semaphore whose capacity is its lease. It asks for more
  when requests wait, renews while it holds slots, and gives idle slots back after `idle_s`, so
  another driver's workers can use them.

A pool that was restarted (its actor was reconstructed after its node died) lets no holder grow
for its first `freeze_s` (longer than a holder's renewal interval): every live holder re-reports
what it has in use first, so slots in use are never handed out twice.

Plain Python; the runtime's limiter actor holds a `ConcurrencyPool`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from itemeval.errors import PermitsUnavailable

log = logging.getLogger("itemeval.limits")
#: How often a caller that waits for a limiter that does not answer says so.
WARN_EVERY_S = 10.0


@dataclass
class _Lease:
    size: int
    in_use: int
    want: int
    seen: float


class ConcurrencyPool:
    """The authoritative concurrency of one endpoint (see the module doc). Not thread-safe."""

    def __init__(
        self,
        limit: int,
        *,
        ttl_s: float = 15.0,
        restarted: bool = False,
        freeze_s: float = 6.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        if limit < 1:
            raise ValueError("a concurrency limit must be at least 1")
        self.limit = limit
        self.ttl_s = ttl_s
        self._clock = clock
        self._leases: dict[str, _Lease] = {}
        self._frozen_until = clock() + freeze_s if restarted else -math.inf

    def lease(self, holder: str, in_use: int, want: int) -> int:
        """The holder's new lease size, given the slots it has in use and the size it wants."""
        now = self._clock()
        self._expire(now)
        entry = self._leases.get(holder)
        if entry is None:
            entry = self._leases[holder] = _Lease(0, 0, 0, now)
        entry.in_use, entry.want, entry.seen = max(0, in_use), max(0, want), now
        others = [lease for name, lease in self._leases.items() if name != holder]
        free = self.limit - sum(lease.size for lease in others)
        target = min(entry.want, free)
        if any(lease.want > lease.size for lease in others):
            wanting = 1 + sum(1 for lease in others if lease.want > 0)
            target = min(target, max(1, self.limit // wanting))
        if now < self._frozen_until:
            target = min(target, entry.size if entry.size else entry.in_use)
        entry.size = max(entry.in_use, target)
        if entry.size == 0 and entry.want == 0:
            del self._leases[holder]
        return entry.size

    def drop(self, holder: str) -> None:
        """Forget a holder at once (its process is known to be gone: its slots come back now,
        not after `ttl_s`)."""
        self._leases.pop(holder, None)

    def lease_holders(self) -> list[str]:
        return list(self._leases)

    def snapshot(self) -> dict[str, object]:
        """The leases and the freeze as plain values (see `RateBucket.snapshot`)."""
        return {
            "frozen_until": self._frozen_until,
            "leases": {
                name: [lease.size, lease.in_use, lease.want, lease.seen]
                for name, lease in self._leases.items()
            },
        }

    def restore(self, values: dict[str, object]) -> None:
        self._frozen_until = float(values["frozen_until"])  # type: ignore[arg-type]
        leases = values["leases"]
        assert isinstance(leases, dict)
        self._leases = {
            name: _Lease(int(size), int(in_use), int(want), float(seen))
            for name, (size, in_use, want, seen) in leases.items()
        }

    def leased(self) -> int:
        self._expire(self._clock())
        return sum(lease.size for lease in self._leases.values())

    def holders(self) -> int:
        self._expire(self._clock())
        return len(self._leases)

    def _expire(self, now: float) -> None:
        stale = [name for name, lease in self._leases.items() if now - lease.seen > self.ttl_s]
        for name in stale:
            del self._leases[name]


@runtime_checkable
class SlotSource(Protocol):
    """Where a worker leases slots (it may be a remote actor)."""

    async def lease(self, holder: str, in_use: int, want: int) -> int: ...


class LocalSlotSource:
    """A `ConcurrencyPool` in this process."""

    def __init__(self, pool: ConcurrencyPool):
        self.pool = pool

    async def lease(self, holder: str, in_use: int, want: int) -> int:
        return self.pool.lease(holder, in_use, want)


class LeasedSlots:
    """A semaphore whose capacity is this holder's lease from a `SlotSource` (module doc)."""

    def __init__(
        self,
        source: SlotSource,
        *,
        holder: str,
        max_slots: int,
        renew_s: float = 5.0,
        idle_s: float = 1.0,
        retry_s: float = 0.02,
        source_timeout_s: float = 120.0,
    ):
        self._source = source
        self.holder = holder
        self.max_slots = max_slots
        self._renew_s = renew_s
        self._idle_s = idle_s
        self._retry_s = retry_s
        self._source_timeout_s = source_timeout_s
        self.capacity = 0
        self.in_use = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._busy_at = time.monotonic()
        self._leased_at = -math.inf
        self.unavailable_since: float | None = None  # the source has not answered since then
        self._warned_at = -math.inf

    async def acquire(self) -> None:
        self._busy_at = time.monotonic()
        if not self._waiters and self.in_use < self.capacity:
            self.in_use += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        self._poke()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled() and future.exception() is None:
                self.release()  # granted just as we were cancelled: give the slot back
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(future)
            raise

    def release(self) -> None:
        self.in_use = max(0, self.in_use - 1)
        self._busy_at = time.monotonic()
        self._hand_out()
        if self.in_use < self.capacity:
            self._poke()  # the lease may shrink later, when idle

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            if self.capacity:
                await asyncio.wait_for(self._source.lease(self.holder, 0, 0), 5.0)
        self.capacity = 0

    # ---------------------------------------------------------------- internals

    def _hand_out(self) -> None:
        while self._waiters and self.in_use < self.capacity:
            future = self._waiters.popleft()
            if future.done():
                continue
            self.in_use += 1
            future.set_result(None)

    def _poke(self) -> None:
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def _want(self, now: float) -> int:
        waiting = sum(1 for f in self._waiters if not f.done())
        if waiting:
            return min(self.max_slots, self.in_use + waiting)
        if now - self._busy_at >= self._idle_s:
            return self.in_use  # idle: give back what is not in use
        return max(self.in_use, self.capacity)

    async def _loop(self) -> None:
        assert self._wake is not None
        while True:
            now = time.monotonic()
            want = self._want(now)
            due = now - self._leased_at >= self._renew_s and self.capacity > 0
            if want != self.capacity or due:
                await self._lease(want)
                self._hand_out()
                continue_soon = any(not f.done() for f in self._waiters)
                if continue_soon:
                    await asyncio.sleep(self._retry_s)  # others must free slots first
                    continue
            if self.capacity == 0 and self.in_use == 0 and not self._waiters:
                return
            self._wake.clear()
            wait = self._renew_s - (time.monotonic() - self._leased_at)
            if self.in_use < self.capacity:
                wait = min(wait, self._idle_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(wait, self._retry_s))

    async def _lease(self, want: int) -> None:
        try:
            self.capacity = await self._source.lease(self.holder, self.in_use, want)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            now = time.monotonic()
            if self.unavailable_since is None:
                self.unavailable_since = now
            waited = now - self.unavailable_since
            if now - self._warned_at >= WARN_EVERY_S:
                self._warned_at = now
                log.warning(
                    "concurrency slots: the endpoint's limiter has not answered for %.0f s "
                    "(%s: %s); %d request(s) wait, for up to %.0f s",
                    waited,
                    type(exc).__name__,
                    exc,
                    len(self._waiters),
                    self._source_timeout_s,
                )
            if waited >= self._source_timeout_s:
                self._fail_waiters(exc, waited)
            await asyncio.sleep(min(1.0, 0.1 + waited / 10))
            return
        if self.unavailable_since is not None:
            log.warning(
                "the endpoint's limiter answers again after %.0f s",
                time.monotonic() - self.unavailable_since,
            )
        self.unavailable_since = None
        self._leased_at = time.monotonic()

    def _fail_waiters(self, exc: Exception, waited: float) -> None:
        failure = PermitsUnavailable(
            f"no concurrency slot from the endpoint's limiter for {waited:.0f} s "
            f"({type(exc).__name__}: {exc})"
        )
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_exception(failure)
