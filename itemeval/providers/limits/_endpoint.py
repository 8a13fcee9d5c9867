"""`EndpointLimiter`: everything one endpoint's limits need, in one place, for every caller.

On a cluster one of these lives in a named Ray actor per endpoint (`runtime/_actors.py`), shared
by every worker of every driver that calls the endpoint; without Ray one lives in the process.
It holds:

* the `RateBucket` (requests and tokens per minute) that grants permits in batches;
* the `ConcurrencyPool` that leases concurrency slots, so that all callers together stay within
  `max_concurrency`;
* who uses it (`attach`, `touch`, `detach` by job), so that a limiter no job uses can go away.

Limits are declared once: a driver that declares other limits for the same endpoint is told so
(`conflict`), and the running bucket is never silently replaced (that would also drop a 429
pause in force).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from itemeval.ids import content_hash
from itemeval.providers._settings import EndpointSettings
from itemeval.providers.limits._concurrency import ConcurrencyPool
from itemeval.providers.limits._ratebucket import Grant, RateBucket

#: A job that has not touched its limiter for this long is considered gone (killed drivers).
JOB_TTL_S = 60.0


@dataclass(frozen=True, slots=True)
class EndpointLimits:
    requests_per_minute: int | None
    tokens_per_minute: int | None
    max_concurrency: int

    def describe(self) -> str:
        parts = [f"max_concurrency {self.max_concurrency}"]
        if self.requests_per_minute is not None:
            parts.append(f"requests_per_minute {self.requests_per_minute}")
        if self.tokens_per_minute is not None:
            parts.append(f"tokens_per_minute {self.tokens_per_minute}")
        return ", ".join(parts)


def endpoint_identity(settings: EndpointSettings) -> str:
    """One limiter per provider endpoint identity (kind, URL, key variable): 16 hex digits."""
    identity = {"kind": settings.kind, "url": settings.url, "key": settings.api_key_env}
    return content_hash(identity)[:16]


def endpoint_limits(settings: EndpointSettings) -> EndpointLimits:
    return EndpointLimits(
        settings.requests_per_minute, settings.tokens_per_minute, settings.max_concurrency
    )


class EndpointLimiter:
    """The shared limits of one endpoint (see the module doc). Not thread-safe: keep it in one
    event loop (an async actor) or behind a lock."""

    def __init__(
        self,
        limits: EndpointLimits,
        *,
        restarted: bool = False,
        clock: Callable[[], float] = time.monotonic,
        job_ttl_s: float | None = JOB_TTL_S,
    ):
        """`job_ttl_s`: a job not touched for this long is gone (None: jobs stay until
        detached; the machine's limiter drops a job when its process has exited)."""
        self.limits = limits
        self._job_ttl_s = job_ttl_s
        self._clock = clock
        self.bucket = RateBucket(
            limits.requests_per_minute,
            limits.tokens_per_minute,
            restarted=restarted,
            clock=clock,
        )
        self.pool = ConcurrencyPool(limits.max_concurrency, restarted=restarted, clock=clock)
        self.restarted = restarted
        self._jobs: dict[str, float] = {}
        self._last_use = clock()

    # -- who uses it ---------------------------------------------------------------------
    def conflict(self, limits: EndpointLimits) -> str | None:
        """Why `limits` cannot be used with this limiter (None when they are its own)."""
        if limits == self.limits:
            return None
        return (
            f"this endpoint's limiter already runs with {self.limits.describe()} (another "
            f"job declared them); this study declares {limits.describe()}"
        )

    def attach(self, job: str) -> None:
        self._jobs[job] = self._clock()

    touch = attach

    def detach(self, job: str) -> None:
        self._jobs.pop(job, None)

    def jobs(self) -> list[str]:
        if self._job_ttl_s is not None:
            now, ttl = self._clock(), self._job_ttl_s
            self._jobs = {job: seen for job, seen in self._jobs.items() if now - seen <= ttl}
        return sorted(self._jobs)

    def job_state(self) -> tuple[dict[str, float], float]:
        """The jobs and when the limiter was last used, as plain values (`restore_jobs`)."""
        return dict(self._jobs), self._last_use

    def restore_jobs(self, jobs: dict[str, float], last_use: float) -> None:
        self._jobs = {str(job): float(seen) for job, seen in jobs.items()}
        self._last_use = float(last_use)

    def idle(self, idle_s: float) -> bool:
        """No job uses it and nothing was asked of it for `idle_s`: it may go away."""
        return not self.jobs() and self._clock() - self._last_use >= idle_s

    # -- what callers ask ----------------------------------------------------------------
    def exchange(
        self, requests: int, tokens: int, returned_tokens: int = 0, successes: int = 0
    ) -> Grant:
        self._last_use = self._clock()
        return self.bucket.exchange(requests, tokens, returned_tokens, successes)

    def lease(self, holder: str, in_use: int, want: int) -> int:
        self._last_use = self._clock()
        return self.pool.lease(holder, in_use, want)

    def report_429(self, retry_after_s: float | None) -> None:
        self._last_use = self._clock()
        self.bucket.report_429(retry_after_s)

    def state(self) -> dict[str, Any]:
        return {
            "limits": asdict(self.limits),
            "bucket": asdict(self.bucket.state()),
            "leased": self.pool.leased(),
            "holders": self.pool.holders(),
            "jobs": self.jobs(),
            "restarted": self.restarted,
        }
