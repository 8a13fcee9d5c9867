"""`RateBucket`: the one authoritative token bucket of an endpoint (requests and tokens per minute).

There is exactly one bucket per endpoint: in-process (`LocalPermitSource`) or inside a Ray actor
that the runtime owns. Clients never talk to it per request: a `RateLimiter` takes permits in
batches (`grant`) and hands them out one by one, so a remote bucket costs one call per batch.

Why the limit holds for any 60-second window of *sends*: the bucket holds at most `burst_s`
seconds' worth of permits (its capacity C) and refills at (limit - C) / (60 + hold_s) per second,
where `hold_s` is how long a client may keep a granted permit before it lapses
(`RateLimiter.max_hold_s`). The sends of any 60 s window used permits granted within a window of
60 + hold_s seconds, and no such window is granted more than C + (limit - C) = limit. It starts
empty, so a fresh (or restarted) bucket does not burst either.

Adaptive: a 429 anywhere (`report_429`) empties the bucket, pauses every grant until the
provider's `Retry-After` / reset time has passed, and halves the rate (at most once per
`decrease_cooldown_s`, so a volley of 429s from requests already in flight counts once). While
calls succeed (`report_ok`) the rate climbs back linearly, `recovery_per_s` of the configured rate
per second, up to the configured limit (AIMD). Token permits are reserved from an estimate before
a call and settled with the real usage after it (`settle`), which may leave the bucket in debt.

Plain Python and plain values only (a Ray actor holds this object and pickles `Grant`s). Not
thread-safe: keep it in one event loop (an async actor) or guard it with a lock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Grant:
    """What the bucket gave: `requests` permits with `tokens` token permits between them, and, when
    it gave fewer requests than asked, how long to wait before asking again."""

    requests: int
    tokens: int
    wait_s: float


@dataclass(frozen=True, slots=True)
class BucketState:
    """A snapshot for logs, progress displays and tests."""

    request_level: float
    token_level: float
    rate_factor: float
    paused_for_s: float
    granted_requests: int
    granted_tokens: int
    rate_limited: int


class RateBucket:
    """Token bucket over requests and tokens per minute, granting in batches, adaptive on 429s.

    `requests_per_minute` / `tokens_per_minute` of None mean "no limit on that dimension".
    `clock` is injectable for tests (seconds, monotonic).
    """

    def __init__(
        self,
        requests_per_minute: float | None,
        tokens_per_minute: float | None = None,
        *,
        burst_s: float = 1.0,
        hold_s: float = 1.0,
        min_rate_factor: float = 0.05,
        decrease_factor: float = 0.5,
        decrease_cooldown_s: float = 1.0,
        recovery_per_s: float = 0.05,
        max_pause_s: float = 300.0,
        default_pause_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        if not 0 < burst_s < 60:
            raise ValueError("burst_s must be between 0 and 60 seconds")
        self._clock = clock
        self._req = _Dimension(requests_per_minute, burst_s, hold_s, minimum_capacity=1.0)
        self._tok = _Dimension(tokens_per_minute, burst_s, hold_s, minimum_capacity=1.0)
        self._min_factor = min_rate_factor
        self._decrease = decrease_factor
        self._cooldown = decrease_cooldown_s
        self._recovery = recovery_per_s
        self._max_pause = max_pause_s
        self._default_pause = default_pause_s
        self._factor = 1.0
        now = clock()
        self._last = now
        self._last_recovery = now
        self._paused_until = now
        self._last_decrease = -math.inf
        self._granted_requests = 0
        self._granted_tokens = 0
        self._rate_limited = 0

    @classmethod
    def for_limits(
        cls, requests_per_minute: int | None, tokens_per_minute: int | None, **kwargs: float
    ) -> RateBucket:
        return cls(requests_per_minute, tokens_per_minute, **kwargs)  # type: ignore[arg-type]

    @property
    def limited(self) -> bool:
        return self._req.limited or self._tok.limited

    # ---------------------------------------------------------------- the protocol

    def grant(self, requests: int, tokens: int = 0) -> Grant:
        """Grant up to `requests` permits now, with `tokens` token permits spread evenly over them.

        Returns fewer (possibly none) when the bucket is short, with `wait_s` > 0: the time after
        which at least one more permit will be available (or the pause ends).
        """
        if requests <= 0:
            return Grant(0, 0, 0.0)
        now = self._refill()
        if now < self._paused_until:
            return Grant(0, 0, self._paused_until - now)
        tokens = max(0, tokens)
        per_request = tokens / requests
        count = requests
        if self._req.limited:
            count = min(count, int(self._req.level + 1e-9))
        if self._tok.limited and per_request > 0:
            affordable = int(self._tok.level / per_request + 1e-9)
            if affordable == 0 and self._tok.level >= self._tok.capacity - 1e-9:
                # One request larger than the whole bucket: let it through from a full bucket
                # (the debt it leaves is paid back before anything else is granted).
                affordable = 1
            count = min(count, affordable)
        granted_tokens = tokens if count == requests else math.ceil(per_request * count)
        if count > 0:
            self._req.take(count)
            self._tok.take(granted_tokens)
            self._granted_requests += count
            self._granted_tokens += granted_tokens
        wait = 0.0 if count == requests else self._time_for_one(per_request)
        return Grant(count, granted_tokens, wait)

    def settle(self, reserved_tokens: int, used_tokens: int) -> None:
        """Correct a token reservation with the real usage (unused tokens flow back; extra use
        becomes debt)."""
        if self._tok.limited:
            self._refill()
            self._tok.give(reserved_tokens - used_tokens)

    def return_tokens(self, tokens: int) -> None:
        """`settle` summed over many calls: positive gives tokens back, negative takes more."""
        if tokens and self._tok.limited:
            self._refill()
            self._tok.give(tokens)

    def report_ok(self, count: int = 1) -> None:
        """Calls succeeded: let the rate climb back towards the configured limit."""
        if count <= 0:
            return
        now = self._refill()
        if now < self._paused_until:
            return
        if self._factor < 1.0:
            elapsed = now - max(self._last_recovery, self._paused_until)
            self._factor = min(1.0, self._factor + self._recovery * max(0.0, elapsed))
        self._last_recovery = now

    def report_429(self, retry_after_s: float | None = None) -> None:
        """A provider said 429: pause all grants, empty the bucket, decrease the rate."""
        now = self._refill()
        self._rate_limited += 1
        pause = self._default_pause if retry_after_s is None else retry_after_s
        pause = min(max(0.0, pause), self._max_pause)
        self._paused_until = max(self._paused_until, now + pause)
        for dimension in (self._req, self._tok):
            if dimension.limited:
                dimension.level = min(dimension.level, 0.0)
        if now - self._last_decrease >= self._cooldown:
            self._factor = max(self._min_factor, self._factor * self._decrease)
            self._last_decrease = now
        self._last_recovery = now

    def exchange(
        self, requests: int, tokens: int, returned_tokens: int = 0, successes: int = 0
    ) -> Grant:
        """Settle, report successes and grant in one call (what a remote limiter sends)."""
        self.return_tokens(returned_tokens)
        self.report_ok(successes)
        return self.grant(requests, tokens)

    def state(self) -> BucketState:
        now = self._refill()
        return BucketState(
            request_level=self._req.level,
            token_level=self._tok.level,
            rate_factor=self._factor,
            paused_for_s=max(0.0, self._paused_until - now),
            granted_requests=self._granted_requests,
            granted_tokens=self._granted_tokens,
            rate_limited=self._rate_limited,
        )

    def snapshot(self) -> list[float]:
        """What changes in the bucket, as plain numbers (the machine's limiter keeps it in a file
        between callers); `restore` puts it back into a bucket made with the same limits."""
        return [
            self._req.level,
            self._tok.level,
            self._factor,
            self._last,
            self._last_recovery,
            self._paused_until,
            self._last_decrease,
            self._granted_requests,
            self._granted_tokens,
            self._rate_limited,
        ]

    def restore(self, values: list[float]) -> None:
        (
            self._req.level,
            self._tok.level,
            self._factor,
            self._last,
            self._last_recovery,
            self._paused_until,
            self._last_decrease,
            granted_requests,
            granted_tokens,
            rate_limited,
        ) = values
        self._granted_requests = int(granted_requests)
        self._granted_tokens = int(granted_tokens)
        self._rate_limited = int(rate_limited)

    # ---------------------------------------------------------------- internals

    def _refill(self) -> float:
        now = self._clock()
        elapsed = now - self._last
        self._last = now
        if elapsed > 0:
            # Nothing accrues during a pause: the provider asked for silence, not for a burst
            # afterwards.
            active = min(elapsed, max(0.0, now - self._paused_until))
            self._req.refill(active, self._factor)
            self._tok.refill(active, self._factor)
        return now

    def _time_for_one(self, tokens_per_request: float) -> float:
        wait = 0.0
        if self._req.limited:
            wait = max(wait, self._req.time_until(1.0, self._factor))
        if self._tok.limited and tokens_per_request > 0:
            need = min(tokens_per_request, self._tok.capacity)
            wait = max(wait, self._tok.time_until(need, self._factor))
        return max(wait, 0.001)


class _Dimension:
    """One refilling quantity (requests or tokens)."""

    __slots__ = ("capacity", "level", "limited", "rate")

    def __init__(
        self, per_minute: float | None, burst_s: float, hold_s: float, minimum_capacity: float
    ):
        self.limited = per_minute is not None
        if per_minute is None:
            self.capacity = math.inf
            self.rate = math.inf
            self.level = math.inf
            return
        self.capacity = max(minimum_capacity, per_minute * burst_s / 60.0)
        # Capacity plus (60 + hold) seconds of refill equals the limit: no 60 s window of sends
        # exceeds it, even when each permit is used `hold_s` after its grant.
        self.rate = max(per_minute - self.capacity, per_minute * 0.5) / (60.0 + hold_s)
        self.level = 0.0

    def refill(self, seconds: float, factor: float) -> None:
        if self.limited and self.level < self.capacity:
            self.level = min(self.capacity, self.level + seconds * self.rate * factor)

    def take(self, amount: float) -> None:
        if self.limited:
            self.level -= amount

    def give(self, amount: float) -> None:
        if self.limited:
            self.level = min(self.capacity, self.level + amount)

    def time_until(self, amount: float, factor: float) -> float:
        missing = amount - self.level
        return missing / (self.rate * factor) if missing > 0 else 0.0
