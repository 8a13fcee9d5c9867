"""Money during a run: one ledger per run, and each worker's account with it.

The budget cap is a contract (`../shared/design.md`, "Budget cap"): before each call its worst
case (input tokens at the input price plus the most output it may produce at the output price)
is reserved against `max_usd`; the reservation is settled with what the call really cost when the
answer arrives; a call that does not fit is not sent. So the cap holds whatever the shard size,
the number of workers or nodes, or how far the estimate was off.

* `SpendLedger` is the one authority of a run (in the driver's process, or in a Ray actor pinned
  to the driver's node). It grants reservations in order while
  `spent + reserved + ask <= cap` and records every settled dollar, also of shards that later
  fail, so the run's spend is what the providers were paid, not what reached the store.
* `SpendAccount` is what a worker uses per call. It batches: asks and settlements made within a
  few milliseconds travel in one `exchange`, so a remote ledger costs one call per batch, never
  one per request (the same idea as rate permits, `providers/limits/_ratelimiter.py`).

A call that does not fit waits while other calls' reservations are outstanding anywhere (their
settlements may free enough); it is refused only when nothing is outstanding and it still does
not fit. Without a cap, asks are granted locally and settlements are only reported.

Plain Python (no Ray here): `LocalSpendSource` serves a ledger in this process; the runtime's
`BudgetActor` serves one to workers on a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from itemeval.errors import LedgerUnavailable

#: Reservations below this many dollars are rounding noise.
_EPSILON = 1e-12


@dataclass(frozen=True, slots=True)
class LedgerReply:
    """The ledger's answer to one exchange."""

    granted: int  # how many of the asks, in order, were granted
    spent: float  # dollars settled so far, by every worker
    reserved: float  # dollars reserved by calls in flight anywhere, after this exchange
    cap: float | None


@dataclass(frozen=True, slots=True)
class LedgerState:
    """A snapshot for the driver, progress and the manifest."""

    cap: float | None
    spent: float
    reserved: float
    calls: int  # settled calls (fresh answers and failures alike)
    refused: int  # calls that were not sent because they did not fit

    @property
    def left(self) -> float | None:
        return None if self.cap is None else max(0.0, self.cap - self.spent)


class SpendLedger:
    """The run's authoritative spend and reservations (thread-safe; see the module doc)."""

    def __init__(self, cap: float | None, start: LedgerState | None = None):
        """`start`: take over another ledger's state (a local run whose Ray workers join: the
        ledger moves from the driver's process to an actor, reservations in flight included)."""
        self.cap = cap
        self._spent = start.spent if start else 0.0
        self._reserved = start.reserved if start else 0.0
        self._calls = start.calls if start else 0
        self._refused = start.refused if start else 0
        self._lock = threading.Lock()

    def exchange(
        self,
        released: float,
        spent: float,
        asks: Sequence[float],
        *,
        settled_calls: int = 0,
        refused: int = 0,
    ) -> LedgerReply:
        """Settle first (`released` reserved dollars come back, `spent` dollars were paid), then
        grant `asks` in order while they fit under the cap."""
        with self._lock:
            self._reserved = max(0.0, self._reserved - released)
            self._spent += spent
            self._calls += settled_calls
            self._refused += refused
            granted = 0
            for ask in asks:
                if self.cap is not None and (
                    self._spent + self._reserved + ask > self.cap + _EPSILON
                ):
                    break
                self._reserved += ask
                granted += 1
            return LedgerReply(granted, self._spent, self._reserved, self.cap)

    def state(self) -> LedgerState:
        with self._lock:
            return LedgerState(self.cap, self._spent, self._reserved, self._calls, self._refused)


@runtime_checkable
class SpendSource(Protocol):
    """Where a worker's account exchanges with the ledger (it may be a remote actor)."""

    async def exchange(
        self,
        released: float,
        spent: float,
        asks: Sequence[float],
        settled_calls: int = 0,
        refused: int = 0,
    ) -> LedgerReply: ...


class LocalSpendSource:
    """A `SpendLedger` in this process (`--no-ray`, tests)."""

    def __init__(self, ledger: SpendLedger):
        self.ledger = ledger

    async def exchange(
        self,
        released: float,
        spent: float,
        asks: Sequence[float],
        settled_calls: int = 0,
        refused: int = 0,
    ) -> LedgerReply:
        return self.ledger.exchange(
            released, spent, asks, settled_calls=settled_calls, refused=refused
        )


class SpendAccount:
    """One worker's side of the ledger (one per worker process, used from one event loop).

        if await account.reserve(worst_case_usd):     # False: it does not fit; do not send
            result = await provider.complete(request)
            account.settle(worst_case_usd, result.usd)

    `capped=False` (no `max_usd`): `reserve` grants at once and settlements are only reported,
    every `report_s`. A worker flushes before it returns a shard (`flush`).
    """

    def __init__(
        self,
        source: SpendSource | None,
        *,
        capped: bool,
        batch_s: float = 0.01,
        retry_s: float = 0.05,
        report_s: float = 0.25,
        source_timeout_s: float = 60.0,
    ):
        self._source = source
        self.capped = capped and source is not None
        self._batch_s = batch_s
        self._retry_s = retry_s
        self._report_s = report_s
        self._source_timeout_s = source_timeout_s
        self._asks: deque[tuple[asyncio.Future[bool], float]] = deque()
        self._released = 0.0
        self._spent = 0.0
        self._settled_calls = 0
        self._refused = 0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._reported_at = time.monotonic()
        self.last_reply: LedgerReply | None = None
        self._exchanging: asyncio.Lock | None = None

    @property
    def unreported(self) -> bool:
        return bool(self._settled_calls or self._refused or self._released or self._spent)

    async def reserve(self, amount: float) -> bool:
        """Reserve `amount` dollars for one call; False when it can never fit (do not send)."""
        if not self.capped or amount <= 0:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._asks.append((future, amount))
        self._poke()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled() and future.result():
                self.settle(amount, 0.0, calls=0)  # granted as we were cancelled: give it back
            else:
                with contextlib.suppress(ValueError):
                    self._asks.remove((future, amount))
            raise

    async def try_reserve(self, amount: float) -> bool:
        """Reserve `amount` now or not at all: one exchange, no waiting, and a refusal is not
        counted as a call that did not fit (for optional spend, a hedge, which must never hold
        up or stop the run)."""
        if not self.capped or amount <= 0:
            return True
        try:
            reply = await self._exchange([amount])
        except LedgerUnavailable:
            return False
        return reply.granted == 1

    def settle(self, reserved: float, actual: float, *, calls: int = 1) -> None:
        """A call ended: `reserved` dollars come back, `actual` dollars were paid."""
        if self._source is None:
            return
        self._released += reserved if self.capped else 0.0
        self._spent += actual
        self._settled_calls += calls
        self._poke()

    async def flush(self) -> None:
        """Report everything settled so far now (before a shard returns its summary)."""
        if self._source is not None and self.unreported:
            await self._exchange([])

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.flush()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._task = None

    # ---------------------------------------------------------------- internals

    def _poke(self) -> None:
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        assert self._wake is not None
        while True:
            if not self._asks:
                if not self.unreported:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                # Settlements only: report them at most every `report_s`, unless asks arrive.
                due = self._reported_at + self._report_s - time.monotonic()
                if due > 0:
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), due)
                    if self._asks:
                        continue
                await self._send([])
                continue
            await asyncio.sleep(self._batch_s)  # let the asks of this moment join one batch
            waiting = [(f, a) for f, a in self._asks if not f.done()]
            self._asks = deque(waiting)
            if not waiting:
                continue
            reply = await self._send([a for _, a in waiting])
            if reply is None:
                continue
            for _ in range(reply.granted):
                future, _amount = self._asks.popleft()
                if not future.done():
                    future.set_result(True)
            if not self._asks:
                continue
            future, amount = self._asks[0]
            cap = reply.cap if reply.cap is not None else float("inf")
            if reply.reserved <= _EPSILON and not self.unreported and reply.spent + amount > cap:
                # Nothing is outstanding anywhere that could come back: it will never fit.
                self._asks.popleft()
                self._refused += 1
                if not future.done():
                    future.set_result(False)
                continue
            await asyncio.sleep(self._retry_s)  # others' settlements may free enough

    async def _send(self, asks: list[float]) -> LedgerReply | None:
        try:
            return await self._exchange(asks)
        except LedgerUnavailable as exc:
            while self._asks:
                future, _ = self._asks.popleft()
                if not future.done():
                    future.set_exception(exc)
            return None

    async def hand_over(self, make_source: Any) -> None:
        """Move to another ledger: with no exchange in flight, `make_source()` (called in a
        thread) takes the current ledger's state over and returns its source; settlements and
        asks from now on go there."""
        if self._exchanging is None:
            self._exchanging = asyncio.Lock()
        async with self._exchanging:
            self._source = await asyncio.to_thread(make_source)

    async def _exchange(self, asks: list[float]) -> LedgerReply:
        if self._exchanging is None:
            self._exchanging = asyncio.Lock()
        async with self._exchanging:
            return await self._exchange_now(asks)

    async def _exchange_now(self, asks: list[float]) -> LedgerReply:
        assert self._source is not None
        released, spent = self._released, self._spent
        calls, refused = self._settled_calls, self._refused
        self._released = self._spent = 0.0
        self._settled_calls = self._refused = 0
        failing_since = time.monotonic()
        while True:
            try:
                reply = await self._source.exchange(released, spent, asks, calls, refused)
                break
            except asyncio.CancelledError:
                self._restore(released, spent, calls, refused)
                raise
            except Exception as exc:
                if time.monotonic() - failing_since >= self._source_timeout_s:
                    self._restore(released, spent, calls, refused)
                    raise LedgerUnavailable(
                        f"the run's budget ledger did not answer for "
                        f"{self._source_timeout_s:g} s ({type(exc).__name__}: {exc})"
                    ) from None
                await asyncio.sleep(0.2)
        self._reported_at = time.monotonic()
        self.last_reply = reply
        return reply

    def _restore(self, released: float, spent: float, calls: int, refused: int) -> None:
        self._released += released
        self._spent += spent
        self._settled_calls += calls
        self._refused += refused
