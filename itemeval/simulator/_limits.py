"""The sim-server's own limits, enforced as a provider does: 429s and limit headers.

Per minute (requests, tokens) and, when asked, requests in flight at once (`max_concurrency`:
an arrival beyond it is refused with a 429 at once, and counted apart).

A token bucket per dimension (requests, tokens) starts full, holds `burst_s` seconds' worth and
refills continuously at the limit's rate. A request that finds a bucket empty is refused with the
wait until it would fit; every response carries the remaining capacity in the headers of its wire
format (`x-ratelimit-*`, or `anthropic-ratelimit-*`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True, slots=True)
class ServerLimits:
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    burst_s: float = 1.0
    #: Requests in flight at once; an arrival beyond it is refused with a 429 (None: no limit).
    max_concurrency: int | None = None
    #: Tokens added to every live answer's reported (and billed) input and output: a backend
    #: that bills more than the request allows (output over max_tokens; input over its bytes).
    overreport_input: int = 0
    overreport_output: int = 0


class Bucket:
    """A provider-side limit: starts full, holds `burst_s` of the rate, refills continuously."""

    __slots__ = ("capacity", "last", "level", "limit", "rate")

    def __init__(self, per_minute: int, burst_s: float):
        self.limit = per_minute
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, per_minute * burst_s / 60.0)
        self.level = self.capacity
        self.last = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.last) * self.rate)
        self.last = now

    def wait_for(self, amount: float) -> float:
        return max(0.0, (amount - self.level) / self.rate)

    def reset_s(self) -> float:
        return max(0.0, (self.capacity - self.level) / self.rate)


class Limiter:
    """The request and token buckets of one server."""

    def __init__(self, limits: ServerLimits):
        self.limits = limits
        self.requests = (
            Bucket(limits.requests_per_minute, limits.burst_s)
            if limits.requests_per_minute
            else None
        )
        self.tokens = (
            Bucket(limits.tokens_per_minute, limits.burst_s) if limits.tokens_per_minute else None
        )
        self.refused_by = ""
        self._dims = tuple(
            (bucket, dim)
            for bucket, dim in ((self.requests, "requests"), (self.tokens, "tokens"))
            if bucket is not None
        )

    def admit(self, tokens: int, now: float) -> float | None:
        """Take one request and `tokens`; the wait in seconds when refused (nothing taken, and
        `refused_by` says which limit: `requests`, or `tokens` when only that one refused)."""
        wait = 0.0
        self.refused_by = ""
        if self.requests is not None:
            self.requests.refill(now)
            if self.requests.level < 1.0:
                wait = self.requests.wait_for(1.0)
                self.refused_by = "requests"
        if self.tokens is not None:
            self.tokens.refill(now)
            if self.tokens.level <= 0.0:
                wait = max(wait, self.tokens.wait_for(min(tokens, self.tokens.capacity)))
                self.refused_by = self.refused_by or "tokens"
        if wait > 0:
            return wait
        if self.requests is not None:
            self.requests.level -= 1.0
        if self.tokens is not None:
            self.tokens.level -= tokens
        return None

    def openai_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        for bucket, dim in self._dims:
            headers[f"x-ratelimit-limit-{dim}"] = str(bucket.limit)
            headers[f"x-ratelimit-remaining-{dim}"] = str(max(0, int(bucket.level)))
            headers[f"x-ratelimit-reset-{dim}"] = f"{bucket.reset_s():.3f}s"
        return headers

    def anthropic_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        if not self._dims:
            return headers
        now = time.time()
        for bucket, dim in self._dims:
            reset = datetime.fromtimestamp(now + bucket.reset_s(), tz=UTC)
            headers[f"anthropic-ratelimit-{dim}-limit"] = str(bucket.limit)
            headers[f"anthropic-ratelimit-{dim}-remaining"] = str(max(0, int(bucket.level)))
            headers[f"anthropic-ratelimit-{dim}-reset"] = reset.isoformat().replace("+00:00", "Z")
        return headers
