"""Retries: tenacity around each attempt, `Retry-After` and rate-limit reset headers honoured.

An attempt either returns a final `ModelResult` (success, or a failure that retrying cannot fix)
or raises `TransientFailure` (429, 5xx, timeout, connection error). `RetryPolicy.run` retries
those with full-jitter exponential backoff, never sooner than the provider's `Retry-After`, for at
most `max_attempts` attempts, and turns the last transient failure into a result. A 429 is not
one of those attempts: the endpoint's limiter paces what follows it (it paused every caller and
slowed the shared schedule), so a rate-limited call waits the provider's hint (or up to
`backoff_initial_s`) and goes on, up to `max_rate_limited_attempts` 429s: a slow gateway makes a
run slow, not failed, while a limit that never lifts (a spent quota) still ends the call, as
`rate_limited`, for a later run to retry. A hint longer than `max_retry_after_s` ends it at once.
Nothing raises out of it except cancellation.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    wait_random_exponential,
)

from itemeval.errors import TransientFailure
from itemeval.providers._failures import failure_result
from itemeval.providers.money import ATTEMPTS, NotSent
from itemeval.providers.types import ErrorCode, ModelResult


def finish(result: ModelResult, attempts: int, latency_ms: float) -> ModelResult:
    """`result` with the call's attempts and latency filled in.

    Every result reaching this point was created by this call's attempt and has not been seen by
    anyone else, so it is completed in place; `dataclasses.replace` cost more than the rest of
    the retry path (measured)."""
    object.__setattr__(result, "attempts", attempts)
    object.__setattr__(result, "latency_ms", latency_ms)
    return result


class RetryPolicy:
    """Bounded attempts, jittered exponential backoff, Retry-After as a lower bound.

    A Retry-After above `max_retry_after_s` ends the call at once (waiting that long would stall
    a worker; the cell is retried by a later run instead).
    """

    def __init__(
        self,
        max_attempts: int = 6,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
        max_retry_after_s: float = 300.0,
        max_rate_limited_attempts: int = 100,
    ):
        self.max_attempts = max_attempts
        self.max_rate_limited_attempts = max_rate_limited_attempts
        self.max_retry_after_s = max_retry_after_s
        self._jitter = wait_random_exponential(multiplier=backoff_initial_s, max=backoff_max_s)
        self._rate_limited_jitter_s = backoff_initial_s
        # Copied per retried call (`AsyncRetrying` keeps its iteration state on the object).
        self._template = AsyncRetrying(
            sleep=asyncio.sleep,
            stop=self._gives_up,
            wait=self._wait,
            retry=retry_if_exception_type(TransientFailure),
            reraise=True,
        )

    def _wait(self, state: RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome is not None else None
        if isinstance(failure, TransientFailure) and failure.code == ErrorCode.RATE_LIMITED:
            # The limiter paces what follows a 429: a short jitter, or the provider's hint.
            delay = random.uniform(0.0, self._rate_limited_jitter_s)
        else:
            delay = self._jitter(state)
        if isinstance(failure, TransientFailure) and failure.retry_after_s is not None:
            delay = max(delay, failure.retry_after_s)
        return delay

    def _gives_up(self, state: RetryCallState) -> bool:
        return self._out_of_attempts(state) or self._retry_after_too_long(state)

    def _out_of_attempts(self, state: RetryCallState) -> bool:
        """`max_attempts` attempts that were not rate-limited, or `max_rate_limited_attempts`
        that were (429s are counted apart)."""
        failure = state.outcome.exception() if state.outcome is not None else None
        if isinstance(failure, TransientFailure) and failure.code == ErrorCode.RATE_LIMITED:
            limited = getattr(state, "rate_limited_attempts", 0) + 1
            state.rate_limited_attempts = limited  # type: ignore[attr-defined]
            return limited >= self.max_rate_limited_attempts
        counted = getattr(state, "counted_attempts", 0) + 1
        state.counted_attempts = counted  # type: ignore[attr-defined]
        return counted >= self.max_attempts

    def _retry_after_too_long(self, state: RetryCallState) -> bool:
        failure = state.outcome.exception() if state.outcome is not None else None
        return (
            isinstance(failure, TransientFailure)
            and failure.retry_after_s is not None
            and failure.retry_after_s > self.max_retry_after_s
        )

    async def run(self, attempt: Callable[[], Awaitable[ModelResult]]) -> ModelResult:
        """Call `attempt` until it returns a result or the policy gives up; never raises a
        `TransientFailure` (it becomes the result), only cancellation and bugs.

        The first attempt runs without any retry machinery (the common case, measured: tenacity's
        per-call setup is a sixth of the client's CPU); only after a transient failure does
        tenacity take over, seeded with that failure as attempt 1. Under a budget cap each retry
        is first covered by a reservation of its own (`attempts.AttemptMeter.may_send`).
        """
        started = time.perf_counter()
        try:
            result = await attempt()
            attempts = 1
        except NotSent as unsent:  # its larger reservation did not fit: never sent
            return finish(unsent.result, 0, (time.perf_counter() - started) * 1000.0)
        except TransientFailure as first:
            meter = ATTEMPTS.get()
            if meter is not None and meter.capped:
                attempt = meter.guard(attempt)
            try:
                result, attempts = await self._retry(first, attempt)
                if meter is not None and result is meter.refusal_result:
                    attempts -= 1  # the retry that did not fit was never sent
            except NotSent:  # a retry's larger reservation did not fit
                assert meter is not None
                result, attempts = meter.refusal(), meter.sent
        return finish(result, attempts, (time.perf_counter() - started) * 1000.0)

    async def _retry(
        self, first: TransientFailure, attempt: Callable[[], Awaitable[ModelResult]]
    ) -> tuple[ModelResult, int]:
        """tenacity's public `AsyncRetrying` from attempt 1 on, that attempt being the failure
        already seen (replayed, not sent again)."""
        attempts = 0

        async def replaying_the_first() -> ModelResult:
            nonlocal attempts
            attempts += 1
            if attempts == 1:
                raise first
            return await attempt()

        try:
            result: ModelResult = await self._template.copy()(replaying_the_first)
        except TransientFailure as last:  # the policy gave up (reraise=True)
            return failure_result(last), attempts
        return result, attempts


# --------------------------------------------------------------------------- header parsing

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_RESET_HEADERS = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
    ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"),
    ("anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"),
    ("anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"),
)


def parse_duration(text: str) -> float | None:
    """OpenAI's reset durations (`1s`, `6m0s`, `20ms`, `1h2m3.5s`) or plain seconds, in seconds."""
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


def _parse_reset(text: str, now_epoch: float) -> float | None:
    """A reset header: a duration (OpenAI) or an RFC 3339 time (Anthropic), as seconds from now."""
    duration = parse_duration(text)
    if duration is not None:
        return duration
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - now_epoch)


#: What a gateway puts before the headers it passes on from the provider behind it (LiteLLM's
#: proxy sends the upstream `retry-after` as `llm_provider-retry-after`).
GATEWAY_PREFIXES = ("", "llm_provider-")


def retry_after_from_headers(
    headers: Mapping[str, str], now_epoch: float | None = None
) -> float | None:
    """How long the provider asks us to wait, in seconds, or None when it does not say.

    `retry-after-ms`, then `retry-after` (seconds or an HTTP date); without those, the reset time
    of each rate-limit dimension that is exhausted (remaining 0), else the soonest reset given
    (`x-ratelimit-reset-requests` / `-tokens` as `1s`, `6m0s`, `20ms`; Anthropic's as RFC 3339
    times). Each is read as sent and as a gateway passes it on (`llm_provider-retry-after`, ...);
    the gateway's own hint first. `headers` must be case-insensitive (aiohttp's are) or
    lower-case.
    """
    now = time.time() if now_epoch is None else now_epoch
    for prefix in GATEWAY_PREFIXES:
        wait = _explicit_wait(headers, prefix, now)
        if wait is not None:
            return wait
    for prefix in GATEWAY_PREFIXES:
        wait = _reset_wait(headers, prefix, now)
        if wait is not None:
            return wait
    return None


def _explicit_wait(headers: Mapping[str, str], prefix: str, now: float) -> float | None:
    value = headers.get(f"{prefix}retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get(f"{prefix}retry-after")
    if value is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                return max(0.0, parsedate_to_datetime(value).timestamp() - now)
            except (TypeError, ValueError, IndexError):
                pass
    return None


def _reset_wait(headers: Mapping[str, str], prefix: str, now: float) -> float | None:
    exhausted: list[float] = []
    any_reset: list[float] = []
    for remaining_name, reset_name in _RESET_HEADERS:
        reset_text = headers.get(prefix + reset_name)
        if reset_text is None:
            continue
        reset = _parse_reset(reset_text, now)
        if reset is None or not math.isfinite(reset):
            continue
        any_reset.append(reset)
        if (headers.get(prefix + remaining_name) or "").strip() == "0":
            exhausted.append(reset)
    if exhausted:
        return max(exhausted)
    if any_reset:
        return min(any_reset)
    return None
