"""`RateBucket`: the one authoritative schedule of an endpoint's sends (requests and tokens per
minute).

There is exactly one bucket per endpoint: in-process (`LocalPermitSource`), in the machine's
limiter file, or inside a Ray actor that the runtime owns. Clients never talk to it per request:
a `RateLimiter` takes permits in batches (`grant`) and hands them out one by one.

**A permit counts when its request is sent.** Each permit the bucket grants carries the moment
it is for (`Grant.at_s`, seconds after the grant); the limiter sends its request at that moment
and drops the permit when it could not send it promptly (`RateLimiter(late_s=...)`), never later.
So the bucket books *sends*, not grants: permits are booked up to `horizon_s` ahead, one after
another, as a token bucket spends them (the generic cell rate algorithm: each dimension keeps the
time at which its bucket would be full again, `tat`).

Requests are booked at least 1 / rate apart (a bucket of one request), at rate = floor(limit x
W) / (W + `slack_s`), W being `window_s` (1 s; a few seconds for limits whose per-second share is
not near a whole number of requests). A window of W then holds at most floor(rate x (W + slack))
+ 1 <= the limit's share of it of sends, even when each reaches the provider up to `slack_s`
after its moment (the limiter's lateness and the way there), and so does every whole multiple of
W (a minute too); a provider's own bucket holding a tenth of a second of the limit never runs dry.
Tokens are booked through a bucket of 2% of a window's tokens refilled at (limit x W - C) /
(W + slack). docs/decisions/0039-permits-count-when-sent.md has the arithmetic.

Adaptive: a 429 anywhere (`report_429`) empties the bucket, pauses every grant until the
provider's `Retry-After` / reset time has passed, and halves the rate (at most once per
`decrease_cooldown_s`, so a volley of 429s from requests already in flight counts once). While
calls succeed (`report_ok`) the rate climbs back linearly, `recovery_per_s` of the configured rate
per second, up to the configured limit (AIMD). Token permits are reserved from an estimate before
a call and settled with the real usage after it (`settle`): unused tokens are given back to the
schedule (never further back than a full bucket now), extra use is booked as a debt.

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
    """What the bucket gave: `requests` permits with `tokens` token permits between them, the
    moment each permit is for (`at_s`, seconds after the grant, in order; empty: all of them
    now), and, when it gave fewer requests than asked, how long to wait before asking again."""

    requests: int
    tokens: int
    wait_s: float
    at_s: tuple[float, ...] = ()


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
    #: The requests per minute found from 429s on an endpoint that declared none (None: none
    #: found yet, or a declared limit).
    found_per_minute: float | None = None


class RateBucket:
    """The send schedule of one endpoint over requests and tokens per minute, granting permits
    in batches, each for its own moment; adaptive on 429s.

    `requests_per_minute` / `tokens_per_minute` of None mean "no limit on that dimension"; with
    `adaptive` (the default) a requests limit nobody declared is found from the 429s that carry
    no hint of their own: the rate the bucket was granting then, halved, and AIMD from there.
    `restarted`: a bucket that replaces one that may have booked permits others still hold (a
    limiter actor restarted, a limiter file that could not be read): it books nothing in its
    first `horizon_s`. `clock` is injectable for tests (seconds, monotonic).
    """

    def __init__(
        self,
        requests_per_minute: float | None,
        tokens_per_minute: float | None = None,
        *,
        window_s: float = 1.0,
        slack_s: float = 0.05,
        horizon_s: float = 0.25,
        min_rate_factor: float = 0.05,
        decrease_factor: float = 0.5,
        decrease_cooldown_s: float = 1.0,
        recovery_per_s: float = 0.05,
        max_pause_s: float = 300.0,
        default_pause_s: float = 1.0,
        restarted: bool = False,
        adaptive: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        if not 0 < window_s <= 60:
            raise ValueError("window_s must be more than 0 and at most 60 seconds")
        self._clock = clock
        self._req = _Dimension.requests(requests_per_minute, window_s, slack_s)
        self._tok = _Dimension.tokens(tokens_per_minute, window_s, slack_s)
        self._horizon = horizon_s
        self._min_factor = min_rate_factor
        self._decrease = decrease_factor
        self._cooldown = decrease_cooldown_s
        self._recovery = recovery_per_s
        self._max_pause = max_pause_s
        self._default_pause = default_pause_s
        self._factor = 1.0
        now = clock()
        start = now + horizon_s if restarted else now
        self._req.tat = self._tok.tat = start
        self._last_recovery = now
        self._paused_until = now
        self._last_decrease = -math.inf
        self._granted_requests = 0
        self._granted_tokens = 0
        self._rate_limited = 0
        self._adaptive = adaptive and not self._req.limited
        self._found = 0.0  # requests a second found from 429s (0: none)
        self._seen_rate = 0.0  # requests granted a second, a moving average (adaptive only)
        self._seen_at = now

    @classmethod
    def for_limits(
        cls, requests_per_minute: int | None, tokens_per_minute: int | None, **kwargs: float
    ) -> RateBucket:
        return cls(requests_per_minute, tokens_per_minute, **kwargs)  # type: ignore[arg-type]

    @property
    def limited(self) -> bool:
        return self._req.limited or self._tok.limited

    @property
    def send_rates(self) -> tuple[float | None, float | None]:
        """The schedule's full rates per second (requests, tokens; None: unlimited)."""
        return (
            self._req.rate if self._req.limited else None,
            self._tok.rate if self._tok.limited else None,
        )

    # ---------------------------------------------------------------- the protocol

    def grant(self, requests: int, tokens: int = 0) -> Grant:
        """Book up to `requests` permits, each for the earliest moment the schedule allows within
        `horizon_s` from now, with `tokens` token permits spread evenly over them.

        Returns fewer (possibly none) when the schedule is booked that far, with `wait_s` > 0:
        the time after which at least one more permit can be booked (or the pause ends).
        """
        if requests <= 0:
            return Grant(0, 0, 0.0)
        now = self._clock()
        tokens = max(0, tokens)
        per_request = tokens / requests
        if not self.limited:
            if now < self._paused_until:
                return Grant(0, 0, self._paused_until - now)
            if self._adaptive:
                self._observe(now, requests)
            return Grant(requests, tokens, 0.0)
        factor = self._factor
        req, tok = self._req, self._tok
        earliest = max(now, self._paused_until)
        latest = now + self._horizon
        at: list[float] = []
        for _ in range(requests):
            moment = earliest
            if req.limited:
                moment = max(moment, req.due(1.0, factor))
            if tok.limited and per_request > 0:
                moment = max(moment, tok.due(per_request, factor))
            if moment > latest:
                break
            if req.limited:
                req.book(moment, 1.0, factor)
            if tok.limited:
                tok.book(moment, per_request, factor)
            at.append(moment - now)
        count = len(at)
        if self._adaptive and not req.limited:
            self._observe(now, count)
        granted_tokens = tokens if count == requests else math.ceil(per_request * count)
        self._granted_requests += count
        self._granted_tokens += granted_tokens
        wait = 0.0
        if count < requests:
            wait = max(0.001, self._next_moment(per_request) - latest)
        return Grant(count, granted_tokens, wait, tuple(at))

    def settle(self, reserved_tokens: int, used_tokens: int) -> None:
        """Correct a token reservation with the real usage (unused tokens flow back; extra use
        becomes debt)."""
        self.return_tokens(reserved_tokens - used_tokens)

    def return_tokens(self, tokens: int) -> None:
        """`settle` summed over many calls: positive gives tokens back, negative takes more."""
        if tokens and self._tok.limited:
            self._tok.give(tokens, self._clock(), self._factor)

    def report_ok(self, count: int = 1) -> None:
        """Calls succeeded: let the rate climb back towards the configured limit."""
        if count <= 0:
            return
        now = self._clock()
        if now < self._paused_until:
            return
        # A declared limit is climbed back to; a found one is probed past (additive increase).
        ceiling = math.inf if self._found else 1.0
        if self._factor < ceiling:
            elapsed = now - max(self._last_recovery, self._paused_until)
            factor = min(ceiling, self._factor + self._recovery * max(0.0, elapsed))
            self._set_factor(factor, now)
        self._last_recovery = now

    def report_429(self, retry_after_s: float | None = None) -> None:
        """A provider said 429: pause all grants, empty the bucket, decrease the rate.

        On an endpoint that declared no requests limit and has not shown one yet, a 429 with a
        hint of its own (`retry_after_s`) only makes its call wait that long; one without starts
        pacing every caller at half the rate granted until then."""
        now = self._clock()
        self._rate_limited += 1
        if self._adaptive and not self._found:
            if retry_after_s is not None:
                return
            self._find_rate(now)
        pause = self._default_pause if retry_after_s is None else retry_after_s
        pause = min(max(0.0, pause), self._max_pause)
        self._paused_until = max(self._paused_until, now + pause)
        if now - self._last_decrease >= self._cooldown:
            self._set_factor(max(self._min_factor, self._factor * self._decrease), now)
            self._last_decrease = now
        # Empty when the pause ends: nothing accrues during it (the provider asked for silence,
        # not for a burst afterwards).
        for dimension in (self._req, self._tok):
            if dimension.limited:
                dimension.empty_at(self._paused_until, self._factor)
        self._last_recovery = now

    def exchange(
        self, requests: int, tokens: int, returned_tokens: int = 0, successes: int = 0
    ) -> Grant:
        """Settle, report successes and grant in one call (what a remote limiter sends)."""
        self.return_tokens(returned_tokens)
        self.report_ok(successes)
        return self.grant(requests, tokens)

    def state(self) -> BucketState:
        now = self._clock()
        return BucketState(
            request_level=self._req.level(now, self._factor),
            token_level=self._tok.level(now, self._factor),
            rate_factor=self._factor,
            paused_for_s=max(0.0, self._paused_until - now),
            granted_requests=self._granted_requests,
            granted_tokens=self._granted_tokens,
            rate_limited=self._rate_limited,
            found_per_minute=self._found * 60 if self._found else None,
        )

    def snapshot(self) -> list[float]:
        """What changes in the bucket, as plain numbers (the machine's limiter keeps it in a file
        between callers); `restore` puts it back into a bucket made with the same limits."""
        return [
            self._req.tat,
            self._tok.tat,
            self._factor,
            self._last_recovery,
            self._paused_until,
            self._last_decrease,
            self._granted_requests,
            self._granted_tokens,
            self._rate_limited,
            self._found,
            self._seen_rate,
            self._seen_at,
        ]

    def restore(self, values: list[float]) -> None:
        (
            self._req.tat,
            self._tok.tat,
            self._factor,
            self._last_recovery,
            self._paused_until,
            self._last_decrease,
            granted_requests,
            granted_tokens,
            rate_limited,
            self._found,
            self._seen_rate,
            self._seen_at,
        ) = values
        if self._adaptive and self._found:
            tat = self._req.tat
            self._req = _Dimension(self._found, 1.0, self._found, 1.0)
            self._req.tat = tat
        self._granted_requests = int(granted_requests)
        self._granted_tokens = int(granted_tokens)
        self._rate_limited = int(rate_limited)

    # ---------------------------------------------------------------- internals

    def _observe(self, now: float, count: int) -> None:
        """The rate of grants, averaged over about `SEEN_RATE_S` (an exponential average)."""
        decay = math.exp(-max(0.0, now - self._seen_at) / SEEN_RATE_S)
        self._seen_rate = self._seen_rate * decay + count / SEEN_RATE_S
        self._seen_at = now

    def _find_rate(self, now: float) -> None:
        """The first 429 without a hint: the rate granted until now becomes the requests limit
        (`report_429` then halves it)."""
        self._observe(now, 0)
        self._found = max(MIN_FOUND_PER_S, self._seen_rate)
        self._req = _Dimension(self._found, 1.0, self._found, 1.0)
        self._req.tat = now
        self._factor = 1.0
        self._last_decrease = -math.inf

    def _set_factor(self, factor: float, now: float) -> None:
        for dimension in (self._req, self._tok):
            if dimension.limited:
                dimension.rescale(now, self._factor, factor)
        self._factor = factor

    def _next_moment(self, tokens_per_request: float) -> float:
        moment = self._paused_until
        if self._req.limited:
            moment = max(moment, self._req.due(1.0, self._factor))
        if self._tok.limited and tokens_per_request > 0:
            moment = max(moment, self._tok.due(tokens_per_request, self._factor))
        return moment


#: The rate of grants is averaged over about this long (the rate a first 429 finds).
SEEN_RATE_S = 2.0
#: The least requests a second a limit found from 429s starts at.
MIN_FOUND_PER_S = 0.1
#: A tokens-per-minute bucket holds this share of a window's tokens.
TOKEN_CAPACITY_SHARE = 0.02
#: A requests-per-minute limit is held over the shortest whole number of windows whose share of
#: the limit is a whole number of requests to within this share (1 s for 1,200 a minute, 2 s for
#: 150, 10 s for 66; never more than 20 windows).
WHOLE_REQUESTS_SHARE = 0.95


class _Dimension:
    """One scheduled quantity (requests or tokens), as the time its bucket is full again."""

    __slots__ = ("capacity", "limited", "rate", "tat", "window")

    def __init__(self, per_s: float | None, capacity: float, rate: float, window: float):
        self.limited = per_s is not None
        self.tat = 0.0  # when the bucket is full again (<= now: full)
        self.capacity = capacity if self.limited else math.inf
        self.rate = rate if self.limited else math.inf
        self.window = window

    @classmethod
    def requests(cls, per_minute: float | None, window_s: float, slack_s: float) -> _Dimension:
        """Requests are whole: a bucket of one request sends them at least 1 / rate apart, so a
        window of W holds at most floor(rate x W) + 1 of them, and a send up to `slack_s` late
        keeps that true for W + `slack_s`. With rate = floor(limit x W) / (W + slack) (a hair
        less) no window of W, nor of a whole multiple of W, holds more than its share."""
        if per_minute is None or per_minute <= 0:
            return cls(None, 0.0, 0.0, window_s)
        per_s = per_minute / 60.0
        window = window_s
        for multiple in range(1, 21):
            window = window_s * multiple
            if math.floor(per_s * window) >= WHOLE_REQUESTS_SHARE * per_s * window:
                break
        whole = max(1, math.floor(per_s * window))
        return cls(per_s, 1.0, whole / (window + slack_s) * (1 - 1e-9), window)

    @classmethod
    def tokens(cls, per_minute: float | None, window_s: float, slack_s: float) -> _Dimension:
        """C + rate x (W + slack) = the limit's share of W."""
        if per_minute is None or per_minute <= 0:
            return cls(None, 0.0, 0.0, window_s)
        per_s = per_minute / 60.0
        capacity = max(1.0, per_s * window_s * TOKEN_CAPACITY_SHARE)
        return cls(per_s, capacity, (per_s * window_s - capacity) / (window_s + slack_s), window_s)

    def due(self, amount: float, factor: float) -> float:
        """The earliest moment `amount` more fits (a request larger than the bucket: when it is
        full, leaving a debt)."""
        return self.tat - (self.capacity - min(amount, self.capacity)) / (self.rate * factor)

    def book(self, moment: float, amount: float, factor: float) -> None:
        self.tat = max(self.tat, moment) + amount / (self.rate * factor)

    def give(self, amount: float, now: float, factor: float) -> None:
        if amount > 0:
            if self.tat > now:  # never beyond a full bucket now
                self.tat = max(now, self.tat - amount / (self.rate * factor))
        else:
            self.tat = max(self.tat, now) - amount / (self.rate * factor)

    def empty_at(self, moment: float, factor: float) -> None:
        self.tat = max(self.tat, moment + self.capacity / (self.rate * factor))

    def rescale(self, now: float, old: float, new: float) -> None:
        """The rate changes: keep the level (the backlog in units), not the time."""
        if self.tat > now:
            self.tat = now + (self.tat - now) * old / new

    def level(self, now: float, factor: float) -> float:
        if not self.limited:
            return math.inf
        return self.capacity - max(0.0, self.tat - now) * self.rate * factor
