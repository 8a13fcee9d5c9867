"""The per-attempt deadline of an endpoint (`deadline_s`): a sent attempt that runs past it is
cancelled and fails as `deadline`, a transient failure the `RetryPolicy` retries within
`max_attempts`; when every attempt ran out, the cell's row is an error with code `deadline`.

    async with limiter.acquire(estimate) as permit:
        async with attempt_deadline(settings.deadline_s, where):
            ...send, read the answer...

The clock starts once the attempt holds its permit: waiting for a rate permit or a concurrency
slot is the limiter's business (it has its own bound) and never counts as a straggler. Unlike
`timeout_s` (aiohttp's timeout of the HTTP exchange), the deadline is enforced by itemeval
around whatever the attempt awaits, so it holds for the in-process simulator and for provider
plugins that use it too (every `HttpProvider` subclass does). A stage whose calls hang ends:
each attempt is bounded, attempts are bounded, and so are the waits between them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar

from itemeval.providers.retry import TransientFailure
from itemeval.providers.types import ErrorCode

#: Called each time an attempt of this task is sent (holds its permit): how hedging
#: (`runtime/hedging.py`) tells a straggling call from one still waiting for a permit.
ATTEMPT_SENT: ContextVar[Callable[[], None] | None] = ContextVar("attempt_sent", default=None)


@contextlib.asynccontextmanager
async def attempt_deadline(seconds: float | None, where: str) -> AsyncIterator[None]:
    """Cancel the body after `seconds` and raise `TransientFailure(deadline)`; no bound when
    `seconds` is None. Only its own expiry becomes `deadline`: a `TimeoutError` raised by the
    body itself passes through unchanged. Entering it marks the attempt as sent
    (`ATTEMPT_SENT`)."""
    sent = ATTEMPT_SENT.get()
    if sent is not None:
        sent()
    if seconds is None:
        yield
        return
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            yield
    except TimeoutError:
        if not scope.expired():
            raise
        raise TransientFailure(
            ErrorCode.DEADLINE, f"no answer from {where} within deadline_s = {seconds:g} s"
        ) from None
