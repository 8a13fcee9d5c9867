"""`RateLimiter`: what a client uses per request; it draws permits from a `PermitSource` in batches.

    limiter = RateLimiter(LocalPermitSource(bucket), max_concurrency=64)
    async with limiter.acquire(est_tokens=900) as permit:
        ...                      # the HTTP call
        permit.settle(used_tokens=812)

A limiter enforces the concurrency it is given (its share of the endpoint's `max_concurrency`) and
serves rate permits one by one from a small local pool. The pool is refilled by one background
task per limiter that asks the source for what the waiting requests need plus a few ahead, or for
`horizon_s` of the observed demand when that is more, at most `batch` at a time; when the source
is short it sleeps for the `wait_s` the source tells it, but at least `poll_interval_s`. So a
remote source (the runtime's Ray actor around a `RateBucket`) is called about ten times a second
per busy limiter, never once per request, and several limiters on one source together stay under
the source's limits (the source counts permits when it grants them; unused ones lapse after
`max_hold_s`).

Settlements (token corrections) and success counts ride along with the next `grant` call; 429s
are reported at once, and also empty this limiter's pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import Protocol, runtime_checkable

from itemeval.providers.ratebucket import Grant, RateBucket
from itemeval.providers.retry import TransientFailure
from itemeval.providers.types import ErrorCode


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
        if limiter._source is not None:
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

    `source=None` means the endpoint has no rate limits: only the concurrency cap applies.
    `track_tokens=False` skips token reservations (no tokens-per-minute limit).
    """

    def __init__(
        self,
        source: PermitSource | None,
        *,
        max_concurrency: int,
        track_tokens: bool = True,
        batch: int = 256,
        ahead: int = 4,
        horizon_s: float = 0.1,
        max_hold_s: float = 2.0,
        max_wait_s: float = 1.0,
        poll_interval_s: float = 0.025,
        source_timeout_s: float = 30.0,
    ):
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self._source = source
        self._track_tokens = track_tokens and source is not None
        self._slots = asyncio.Semaphore(max_concurrency)
        self._batch = max(1, batch)
        self._ahead = max(0, ahead)
        self._horizon_s = horizon_s
        self._served = 0  # permits handed out since the last refill (demand)
        self._demand_per_s = 0.0
        self._demand_since = time.monotonic()
        self._max_hold_s = max_hold_s
        self._max_wait_s = max_wait_s
        self._poll_s = poll_interval_s
        self._source_timeout_s = source_timeout_s
        self._pool_requests = 0
        self._pool_tokens = 0
        self._pool_time = 0.0
        self._waiters: deque[tuple[asyncio.Future[None], int]] = deque()
        self._waiting_tokens = 0
        self._refiller: asyncio.Task[None] | None = None
        self._returned_tokens = 0
        self._successes = 0
        self._avg_tokens = 0.0
        self.max_concurrency = max_concurrency

    def acquire(self, est_tokens: int = 0) -> Permit:
        """`async with` it: waits for a concurrency slot and one rate permit (with `est_tokens`
        token permits reserved when the endpoint has a tokens-per-minute limit)."""
        return Permit(self, est_tokens if self._track_tokens else 0)

    async def report_429(self, retry_after_s: float | None) -> None:
        """A 429 from the provider: drop local permits and tell the source (it pauses everyone)."""
        self._pool_requests = 0
        self._pool_tokens = 0
        if self._source is not None:
            await self._source.report_429(retry_after_s)

    async def aclose(self) -> None:
        if self._refiller is not None and not self._refiller.done():
            self._refiller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refiller
        self._refiller = None

    # ---------------------------------------------------------------- internals

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
        if not self._waiters and self._serve_now(tokens):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((future, tokens))
        self._waiting_tokens += tokens
        self._ensure_refiller()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                # Served just as we were cancelled: the permit is spent, nothing to give back.
                pass
            else:
                self._forget(future, tokens)
            raise

    def _serve_now(self, tokens: int) -> bool:
        if self._pool_requests <= 0 or tokens > self._pool_tokens:
            return False
        if time.monotonic() - self._pool_time > self._max_hold_s:
            # Stale permits would add a burst on top of fresh ones: let them lapse.
            self._pool_requests = 0
            self._pool_tokens = 0
            return False
        self._pool_requests -= 1
        self._pool_tokens -= tokens
        self._served += 1
        return True

    def _forget(self, future: asyncio.Future[None], tokens: int) -> None:
        try:
            self._waiters.remove((future, tokens))
            self._waiting_tokens -= tokens
        except ValueError:
            pass

    def _ensure_refiller(self) -> None:
        if self._refiller is None or self._refiller.done():
            self._refiller = asyncio.get_running_loop().create_task(self._refill_loop())

    def _wake(self) -> None:
        while self._waiters:
            future, tokens = self._waiters[0]
            if future.done():  # cancelled while waiting
                self._waiters.popleft()
                self._waiting_tokens -= tokens
                continue
            if self._pool_requests <= 0 or tokens > self._pool_tokens:
                return
            self._waiters.popleft()
            self._waiting_tokens -= tokens
            self._pool_requests -= 1
            self._pool_tokens -= tokens
            self._served += 1
            future.set_result(None)

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

    def _fail_waiters(self, exc: Exception) -> None:
        failure = TransientFailure(
            ErrorCode.CONNECTION_ERROR,
            f"the rate-limit permit source did not answer for {self._source_timeout_s:g} s: "
            f"{type(exc).__name__}: {exc}",
        )
        while self._waiters:
            future, tokens = self._waiters.popleft()
            self._waiting_tokens -= tokens
            if not future.done():
                future.set_exception(failure)

    async def _refill_loop(self) -> None:
        assert self._source is not None
        failing_since = 0.0
        while self._waiters:
            target = max(len(self._waiters) + self._ahead, self._expected_demand())
            want = max(1, min(self._batch, target - self._pool_requests))
            tokens = 0
            if self._track_tokens:
                extra = max(0, target - len(self._waiters))
                need = self._waiting_tokens + int(extra * self._avg_tokens)
                tokens = max(0, need - self._pool_tokens)
            returned, self._returned_tokens = self._returned_tokens, 0
            successes, self._successes = self._successes, 0
            try:
                grant = await self._source.grant(want, tokens, returned, successes)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # A source that failed (e.g. a restarting actor): try again shortly; after
                # `source_timeout_s` of failures, fail the waiting requests (transiently: the
                # call is retried, and a later run retries the cell).
                self._returned_tokens += returned
                self._successes += successes
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since >= self._source_timeout_s:
                    self._fail_waiters(exc)
                    return
                await asyncio.sleep(0.1)
                continue
            failing_since = 0.0
            if grant.requests:
                self._pool_requests += grant.requests
                self._pool_tokens += grant.tokens
                self._pool_time = time.monotonic()
                self._wake()
            if self._waiters and grant.requests < want:
                # Short: wait for the source, and at least `poll_interval_s`, so that a limiter
                # that is rate-bound asks a few dozen times a second, not once per permit.
                await asyncio.sleep(min(max(grant.wait_s, self._poll_s), self._max_wait_s))
