"""Hedging: a second request for a straggling call in the tail of a shard (an endpoint's
`hedge:`, `providers/_hedge_settings.py`).

    hedges = Hedges(settings.hedge)                 # one per worker, endpoint and model
    tail = ShardTail(hedges, calls=len(todo))       # one per shard's fresh calls
    watcher = asyncio.ensure_future(tail.watch())   # decides which cells get a hedge
    ... in each cell:  clock = tail.sent(index) ... race(send, clock, reserve_hedge) ...

*When.* A worker keeps the latencies of its recent answered calls per endpoint and model, from
the moment an attempt is sent (holds its permit) to its answer: a call waiting for a rate permit
or a concurrency slot is not straggling. Once `after_done` of a shard's calls have ended, a call
whose attempt has been out for longer than
`max(min_wait_s, factor x quantile(latencies))` gets a hedge, while the worker's hedges stay
within `max_share` of the calls it sent (so the run's do too). A worker hedges nothing before
it has seen `min_samples` answers: without a typical latency nothing is late.

*Who wins.* `race` sends the hedge beside the first request; the first ok answer wins and the
other request is cancelled. A request that ends in a failure does not win while the other may
still answer; when both fail, the first request's failure stands. One cell, one row.

*What it costs.* The hedge's worst case is reserved under the cap before it is sent, without
waiting (a hedge that does not fit now is not sent, and never stops the run as a call that does
not fit does). Both requests are paid: the winner at its real cost; the loser at its real cost
when its answer came, else, cancelled in flight, at its worst case, since the provider may bill
it in full and what it billed is never known; a hedge cancelled while it still waited for a
permit was never sent and costs nothing (and is no call). The cell's row carries both (`usd`,
`attempts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from itemeval.providers import ATTEMPT_SENT, HedgeSettings
from itemeval.providers.types import ModelResult

#: Latencies kept per worker, endpoint and model (a quantile of the recent past).
LATENCY_WINDOW = 512
#: How often a shard's tail is looked at, at least and at most (seconds).
_TICK_MIN_S = 0.02
_TICK_MAX_S = 0.5


class Hedges:
    """One worker's hedging for one endpoint and model: latencies seen, calls and hedges sent."""

    def __init__(self, settings: HedgeSettings):
        self.settings = settings
        self._latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.calls = 0  # first requests sent
        self.hedges = 0  # hedges sent (or about to be)

    def observe(self, seconds: float) -> None:
        """An answered call took `seconds` (from sending to its answer)."""
        self._latencies.append(seconds)

    def straggling_after_s(self) -> float | None:
        """How long a call may run before it is straggling; None before `min_samples`."""
        if len(self._latencies) < self.settings.min_samples:
            return None
        ordered = sorted(self._latencies)
        typical = ordered[min(len(ordered) - 1, int(self.settings.quantile * len(ordered)))]
        return max(self.settings.min_wait_s, self.settings.factor * typical)

    def take(self) -> bool:
        """One more hedge, if it stays within `max_share` of the calls sent."""
        if self.hedges + 1 > self.settings.max_share * self.calls:
            return False
        self.hedges += 1
        return True

    def give_back(self) -> None:
        """A hedge taken was not sent (it did not fit under the cap, or its call answered while
        it still waited for a permit)."""
        self.hedges -= 1


@dataclass(slots=True)
class CellClock:
    """One call in flight: when its current attempt was sent (None while it waits for a
    permit), and the signal that it deserves a hedge."""

    hedge_now: asyncio.Event
    sent_at: float | None = None

    def mark(self) -> None:
        """An attempt was sent (the provider holds its permit): the clock starts again."""
        self.sent_at = time.monotonic()


class ShardTail:
    """One shard's fresh calls as hedging sees them (see the module docstring)."""

    def __init__(self, hedges: Hedges, calls: int):
        self.hedges = hedges
        self._in_flight: dict[int, CellClock] = {}
        self._ended = 0
        # The tail begins once this many calls ended (floor: a one-call shard is all tail).
        self._tail_from = math.floor(hedges.settings.after_done * calls)

    def sent(self, index: int) -> CellClock:
        """A cell's call begins (its reservation granted); `clock.mark` runs in its task as
        each attempt is sent (`providers._deadline.ATTEMPT_SENT`)."""
        clock = CellClock(asyncio.Event())
        self._in_flight[index] = clock
        self.hedges.calls += 1
        return clock

    def ended(self, index: int) -> None:
        self._in_flight.pop(index, None)
        self._ended += 1

    def not_sent(self) -> None:
        self._ended += 1

    async def watch(self) -> None:
        """Signal a hedge to each straggling call in the tail, within the bound; runs until
        cancelled (when the shard's calls are done)."""
        while True:
            wait_s = self.hedges.straggling_after_s()
            tick = _TICK_MAX_S if wait_s is None else wait_s / 4
            await asyncio.sleep(min(_TICK_MAX_S, max(_TICK_MIN_S, tick)))
            if wait_s is None or self._ended < self._tail_from:
                continue
            now = time.monotonic()
            for clock in list(self._in_flight.values()):
                sent_at = clock.sent_at
                if sent_at is None or now - sent_at <= wait_s or clock.hedge_now.is_set():
                    continue
                if not self.hedges.take():
                    break
                clock.hedge_now.set()


@dataclass(frozen=True, slots=True)
class RaceResult:
    """What a cell's requests came to: the result it keeps and what the other request was."""

    result: ModelResult
    hedged: bool = False
    loser: ModelResult | None = None  # the other request's result when it came
    loser_abandoned: bool = False  # the other request was cancelled before it ended
    loser_sent: bool = True  # ... after an attempt of it reached the provider


async def race(
    send: Callable[[], Awaitable[ModelResult]],
    clock: CellClock,
    reserve_hedge: Callable[[], Awaitable[bool]],
) -> RaceResult:
    """`send()` once; if `clock.hedge_now` is set before it answers and `reserve_hedge()`
    grants, `send()` again and keep the first ok answer (see the module docstring). Cancelled,
    it cancels what it sent and re-raises. A cell without hedging does not race: its caller
    awaits its one request."""

    async def first_request() -> ModelResult:
        ATTEMPT_SENT.set(clock.mark)  # this task's attempts start the cell's clock
        return await send()

    first = asyncio.ensure_future(first_request())
    hedge_now = clock.hedge_now
    signal = asyncio.ensure_future(hedge_now.wait())
    second: asyncio.Future[ModelResult] | None = None
    try:
        await asyncio.wait({first, signal}, return_when=asyncio.FIRST_COMPLETED)
        if first.done() or not await reserve_hedge():
            return RaceResult(await first)
        hedge_sent = False

        def mark_hedge_sent() -> None:
            nonlocal hedge_sent
            hedge_sent = True

        async def hedge_request() -> ModelResult:
            ATTEMPT_SENT.set(mark_hedge_sent)
            return await send()

        second = asyncio.ensure_future(hedge_request())
        pending = {first, second}
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            winner = next((t for t in (first, second) if t in done and t.result().ok), None)
            if winner is not None:
                break
        else:
            winner = first  # both failed: the first request's failure stands
        other = second if winner is first else first
        abandoned = not other.done()
        if abandoned:
            other.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await other
        return RaceResult(
            winner.result(),
            hedged=True,
            loser=None if abandoned else other.result(),
            loser_abandoned=abandoned,
            # The first request was sent (it straggled); a hedge may have waited for a permit.
            loser_sent=other is first or hedge_sent,
        )
    finally:
        signal.cancel()
        for task in (first, second):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
