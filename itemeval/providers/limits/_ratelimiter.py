"""`RateLimiter`: what a client uses per request; it draws permits from a `PermitSource` in batches.

    limiter = RateLimiter(LocalPermitSource(bucket), max_concurrency=64)
    async with limiter.acquire(est_tokens=900) as permit:
        ...                      # the HTTP call
        permit.settle(used_tokens=812)

A limiter enforces concurrency (a fixed number of slots, or slots leased from the endpoint's
`ConcurrencyPool` so that every driver and worker together stay within `max_concurrency`: see
`concurrency.py`) and serves rate permits one by one from a small local pool. The pool is refilled
by one background task per limiter that asks the source for what the waiting requests need, or
for `horizon_s` of the observed demand when that is more, at most `batch` at a time; when the
source is short it sleeps for the `wait_s` the source tells it, but at least `poll_interval_s`.
So a remote source (the runtime's Ray actor around a `RateBucket`) is called a few dozen times a
second per busy limiter, not once per request, and several limiters on one source together stay
under the source's limits.

A permit counts when its request is sent: each permit is for a moment the source booked
(`Grant.at_s`), and its request waits for that moment. A permit whose moment passed more than
`late_s` ago (no request took it, or the event loop woke its request too late) is dropped, never
used late; its request takes the next one. A 429 drops every permit this limiter holds, those of
requests already waiting for their moment included.

Settlements (token corrections) and success counts ride along with the next `grant` call; 429s
are reported at once. A source that does not answer (a limiter actor restarting after its node
was lost) is asked again, with a warning in the log, for up to `source_timeout_s`; then the
waiting requests fail once with `PermitsUnavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections import deque
from typing import Protocol, runtime_checkable

from itemeval.providers.limits._concurrency import (
    WARN_EVERY_S,
    LeasedSlots,
    PermitsUnavailable,
    SlotSource,
)
from itemeval.providers.limits._ratebucket import Grant, RateBucket

log = logging.getLogger("itemeval.limits")

#: The moment of a permit granted without a schedule (a source with no limit to keep yet).
FREE = 0.0


@runtime_checkable
class PermitSource(Protocol):
    """Where rate permits come from: small, async, plain values only (it may be a remote actor).

    `grant` first applies `returned_tokens` (unused reservations given back; negative when calls
    used more than reserved) and `successes` (calls that succeeded since the last call), then
    grants up to `requests` permits carrying `tokens` token permits between them.
    """

    async def grant(
        self, requests: int, tokens: int, returned_tokens: int = 0, successes: int = 0
    ) -> Grant: ...

    async def report_429(self, retry_after_s: float | None) -> None: ...


class LocalPermitSource:
    """A `RateBucket` in this process (the no-Ray case, and tests)."""

    def __init__(self, bucket: RateBucket):
        self.bucket = bucket

    async def grant(
        self, requests: int, tokens: int, returned_tokens: int = 0, successes: int = 0
    ) -> Grant:
        return self.bucket.exchange(requests, tokens, returned_tokens, successes)

    async def report_429(self, retry_after_s: float | None) -> None:
        self.bucket.report_429(retry_after_s)


class Permit:
    """One request's permit, used as `async with limiter.acquire(est) as permit:`.

    Entering waits for a concurrency slot and a rate permit carrying the token reservation;
    `settle` corrects the reservation with the real usage; leaving frees the slot. (A plain class
    rather than a generator context manager: this is on every request's path.)
    """

    __slots__ = ("_limiter", "reserved_tokens", "settled")

    def __init__(self, limiter: RateLimiter, reserved_tokens: int):
        self._limiter = limiter
        self.reserved_tokens = reserved_tokens
        self.settled = False

    async def __aenter__(self) -> Permit:
        limiter = self._limiter
        await limiter._slots.acquire()
        if limiter._rate_limited:
            try:
                await limiter._take(self.reserved_tokens)
            except BaseException:
                limiter._slots.release()
                raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        # Not settled (failed or cancelled): the reservation stands, the provider may count it.
        self.settled = True
        self._limiter._slots.release()

    def settle(self, used_tokens: int) -> None:
        """The call succeeded and used `used_tokens` (input + output): correct the reservation."""
        if not self.settled:
            self.settled = True
            self._limiter._settle(self.reserved_tokens - used_tokens, success=True)


class RateLimiter:
    """Per-process (per-worker) limiter of one endpoint: concurrency cap plus batched permits.

    `source=None` (or `rate_limited=False`) means the endpoint has no rate limits: only the
    concurrency cap applies.
    `track_tokens=False` skips token reservations (no tokens-per-minute limit). `slots`: lease
    the concurrency from the endpoint's pool (up to `max_concurrency` for this limiter) instead
    of holding `max_concurrency` slots of its own.
    """

    def __init__(
        self,
        source: PermitSource | None,
        *,
        max_concurrency: int,
        track_tokens: bool = True,
        rate_limited: bool | None = None,
        slots: SlotSource | None = None,
        batch: int = 256,
        horizon_s: float = 0.1,
        late_s: float = 0.04,
        max_wait_s: float = 1.0,
        poll_interval_s: float = 0.025,
        source_timeout_s: float = 120.0,
    ):
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self._source = source
        self._rate_limited = source is not None if rate_limited is None else rate_limited
        self._track_tokens = track_tokens and source is not None
        self._slots: LeasedSlots | _FixedSlots = (
            LeasedSlots(
                slots,
                holder=f"{os.getpid()}-{uuid.uuid4().hex}",  # the process: see machine_limiter
                max_slots=max_concurrency,
                source_timeout_s=source_timeout_s,
            )
            if slots is not None
            else _FixedSlots(max_concurrency)
        )
        self._batch = max(1, batch)
        self._horizon_s = horizon_s
        self._served = 0  # permits handed out since the last refill (demand)
        self._demand_per_s = 0.0
        self._demand_since = time.monotonic()
        self._late_s = late_s
        self._max_wait_s = max_wait_s
        self._poll_s = poll_interval_s
        self._source_timeout_s = source_timeout_s
        self._pool: deque[list[float]] = deque()  # [moment, tokens] per permit, in order
        self._pool_tokens = 0
        self._epoch = 0  # a 429 or a new source: permits of an older epoch are void
        self.lapsed = 0  # permits dropped unused, their moment passed (for tests and logs)
        self._waiters: deque[tuple[asyncio.Future[float], int]] = deque()
        self._waiting_tokens = 0
        self._refiller: asyncio.Task[None] | None = None
        self._failing_since = 0.0
        self._returned_tokens = 0
        self._successes = 0
        self._avg_tokens = 0.0
        self.max_concurrency = max_concurrency

    def acquire(self, est_tokens: int = 0) -> Permit:
        """`async with` it: waits for a concurrency slot and one rate permit (with `est_tokens`
        token permits reserved when the endpoint has a tokens-per-minute limit), and for the
        moment that permit is for."""
        return Permit(self, est_tokens if self._track_tokens else 0)

    async def report_429(self, retry_after_s: float | None) -> None:
        """A 429 from the provider: drop local permits and tell the source (it pauses everyone)."""
        self._drop_pool()
        if self._source is not None:
            with contextlib.suppress(Exception):  # a limiter restarting: it starts paused anyway
                await self._source.report_429(retry_after_s)

    def switch_source(self, source: PermitSource) -> None:
        """Draw rate permits from `source` from now on (a local run whose Ray workers joined:
        the endpoint's shared limiter). Permits held locally are dropped."""
        self._source = source
        self._drop_pool()

    @property
    def slots_in_use(self) -> int:
        """Concurrency slots held by requests of this limiter right now."""
        return self._slots.in_use

    @property
    def waiting_for_source_s(self) -> float:
        """How long the limiter's source has not answered (0 when it answers)."""
        since = [t for t in (self._failing_since, self._slots_unavailable_since()) if t]
        return time.monotonic() - min(since) if since else 0.0

    async def aclose(self) -> None:
        if self._refiller is not None and not self._refiller.done():
            self._refiller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refiller
        self._refiller = None
        await self._slots.aclose()

    def _slots_unavailable_since(self) -> float | None:
        return getattr(self._slots, "unavailable_since", None)

    # ---------------------------------------------------------------- internals

    def _drop_pool(self) -> None:
        self._pool.clear()
        self._pool_tokens = 0
        self._epoch += 1

    def _settle(self, returned_tokens: int, *, success: bool) -> None:
        if self._track_tokens:
            self._returned_tokens += returned_tokens
        if success:
            self._successes += 1

    async def _take(self, tokens: int) -> None:
        if self._avg_tokens == 0.0:
            self._avg_tokens = float(tokens)
        else:
            self._avg_tokens += (tokens - self._avg_tokens) * 0.05
        retry = False
        while True:
            epoch = self._epoch
            moment = self._serve_now(tokens) if not self._waiters else None
            if moment is None:
                moment = await self._wait_for_permit(tokens, first=retry)
            if moment == FREE:
                return
            delay = moment - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
                delay = moment - time.monotonic()
            if -delay <= self._late_s and epoch == self._epoch:
                return
            # Its moment passed (or a 429 voided it) before the request could go: never send
            # late; the request takes the next permit, ahead of the queue.
            self.lapsed += 1
            retry = True

    async def _wait_for_permit(self, tokens: int, *, first: bool) -> float:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        if first:
            self._waiters.appendleft((future, tokens))
        else:
            self._waiters.append((future, tokens))
        self._waiting_tokens += tokens
        self._ensure_refiller()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                # Served just as we were cancelled: the permit is spent, nothing to give back.
                pass
            else:
                self._forget(future, tokens)
            raise

    def _serve_now(self, tokens: int) -> float | None:
        self._lapse()
        if not self._pool or tokens > self._pool_tokens:
            return None
        self._served += 1
        return self._consume(tokens)

    def _lapse(self) -> None:
        """Drop permits whose moment passed more than `late_s` ago: used now, their sends could
        crowd into a window with those of the permits booked after them."""
        cutoff = time.monotonic() - self._late_s
        pool = self._pool
        while pool and FREE < pool[0][0] < cutoff:
            _, tokens = pool.popleft()
            self._pool_tokens = max(0, self._pool_tokens - int(tokens))
            self.lapsed += 1

    def _consume(self, tokens: int) -> float:
        """The earliest permit, with `tokens` token permits from the pool: its moment."""
        moment, _ = self._pool.popleft()
        self._pool_tokens -= tokens
        return moment

    def _forget(self, future: asyncio.Future[float], tokens: int) -> None:
        try:
            self._waiters.remove((future, tokens))
            self._waiting_tokens -= tokens
        except ValueError:
            pass

    def _ensure_refiller(self) -> None:
        if self._refiller is None or self._refiller.done():
            self._refiller = asyncio.get_running_loop().create_task(self._refill_loop())

    def _wake(self) -> None:
        self._lapse()
        while self._waiters:
            future, tokens = self._waiters[0]
            if future.done():  # cancelled while waiting
                self._waiters.popleft()
                self._waiting_tokens -= tokens
                continue
            if not self._pool or tokens > self._pool_tokens:
                return
            self._waiters.popleft()
            self._waiting_tokens -= tokens
            self._served += 1
            future.set_result(self._consume(tokens))

    def _expected_demand(self) -> int:
        """Permits this limiter will hand out over the next `horizon_s`, from the recent rate."""
        now = time.monotonic()
        elapsed = now - self._demand_since
        if elapsed > 0.01:
            rate = self._served / elapsed
            weight = min(1.0, elapsed)  # about a one-second moving average
            self._demand_per_s += (rate - self._demand_per_s) * weight
            self._served, self._demand_since = 0, now
        return int(self._demand_per_s * self._horizon_s)

    def _fail_waiters(self, exc: Exception, waited: float) -> None:
        failure = PermitsUnavailable(
            f"no rate-limit permits from the endpoint's limiter for {waited:.0f} s "
            f"({type(exc).__name__}: {exc})"
        )
        while self._waiters:
            future, tokens = self._waiters.popleft()
            self._waiting_tokens -= tokens
            if not future.done():
                future.set_exception(failure)

    async def _refill_loop(self) -> None:
        assert self._source is not None
        warned_at = float("-inf")
        while self._waiters:
            self._wake()
            if not self._waiters:
                break
            # Only what is waiting, or the demand expected over the horizon: a permit booked
            # for no request is a moment of the shared schedule lost to every caller.
            target = max(len(self._waiters), self._expected_demand())
            want = max(1, min(self._batch, target - len(self._pool)))
            tokens = 0
            if self._track_tokens:
                extra = max(0, target - len(self._waiters))
                need = self._waiting_tokens + int(extra * self._avg_tokens)
                tokens = max(0, need - self._pool_tokens)
            returned, self._returned_tokens = self._returned_tokens, 0
            successes, self._successes = self._successes, 0
            epoch = self._epoch
            try:
                grant = await self._source.grant(want, tokens, returned, successes)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # A source that failed (a limiter actor restarting after its node was lost):
                # ask again, say so in the log, and after `source_timeout_s` fail the waiting
                # requests once (a later run retries their cells).
                self._returned_tokens += returned
                self._successes += successes
                now = time.monotonic()
                self._failing_since = self._failing_since or now
                waited = now - self._failing_since
                if waited >= self._source_timeout_s:
                    self._fail_waiters(exc, waited)
                    return
                if now - warned_at >= WARN_EVERY_S:
                    warned_at = now
                    log.warning(
                        "rate-limit permits: the endpoint's limiter has not answered for %.0f s "
                        "(%s: %s); %d request(s) wait, for up to %.0f s",
                        waited,
                        type(exc).__name__,
                        exc,
                        len(self._waiters),
                        self._source_timeout_s,
                    )
                await asyncio.sleep(min(1.0, 0.1 + waited / 10))
                continue
            if self._failing_since:
                log.warning(
                    "rate-limit permits: the endpoint's limiter answers again after %.0f s",
                    time.monotonic() - self._failing_since,
                )
            self._failing_since = 0.0
            if grant.requests and epoch == self._epoch:
                # The moments are counted from the grant; the answer's arrival is the closest
                # this process can tell (the same instant for a source in this process).
                received = time.monotonic()
                share = grant.tokens / grant.requests
                if grant.at_s:
                    self._pool.extend([received + offset, share] for offset in grant.at_s)
                else:  # no schedule (no limit found yet): for any moment, never lapsing
                    self._pool.extend([FREE, share] for _ in range(grant.requests))
                self._pool_tokens += grant.tokens
                self._wake()
            if self._waiters and grant.requests < want:
                # Short: wait for the source, and at least `poll_interval_s`, so that a limiter
                # that is rate-bound asks a few dozen times a second, not once per permit.
                await asyncio.sleep(min(max(grant.wait_s, self._poll_s), self._max_wait_s))


class _FixedSlots:
    """A fixed number of concurrency slots (an endpoint without a shared pool)."""

    def __init__(self, slots: int):
        self._semaphore = asyncio.Semaphore(slots)
        self.in_use = 0
        self.unavailable_since: float | None = None

    async def acquire(self) -> None:
        await self._semaphore.acquire()
        self.in_use += 1

    def release(self) -> None:
        self.in_use -= 1
        self._semaphore.release()

    async def aclose(self) -> None:
        return None
