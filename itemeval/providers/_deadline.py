"""The per-attempt deadline of an endpoint (`deadline_s`): a sent attempt that runs past it is
cancelled and fails as `deadline`, a transient failure the `RetryPolicy` retries within
`max_attempts`; when every attempt ran out, the cell's row is an error with code `deadline`.

    async with limiter.acquire(estimate) as permit:
        async with AttemptDeadline(settings.deadline_s, where):
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
from collections.abc import Callable
from contextvars import ContextVar
from types import TracebackType

from itemeval.providers._retry import TransientFailure
from itemeval.providers.money import ATTEMPTS, AttemptMeter
from itemeval.providers.types import ErrorCode

#: Called each time an attempt of this task is sent (holds its permit): how hedging
#: (`calls/_hedging.py`) tells a straggling call from one still waiting for a permit.
ATTEMPT_SENT: ContextVar[Callable[[], None] | None] = ContextVar("attempt_sent", default=None)


class AttemptDeadline:
    """Cancel the body after `seconds` and raise `TransientFailure(deadline)`; no bound when
    `seconds` is None. Only its own expiry becomes `deadline`: a `TimeoutError` raised by the
    body itself passes through unchanged. Entering it marks the attempt as sent
    (`ATTEMPT_SENT`).

    A class, not an `asynccontextmanager`: every attempt enters one, and a generator-based
    manager costs an async generator and the loop's hooks for it per call (issue 14)."""

    __slots__ = ("_meter", "_scope", "_seconds", "_where")

    def __init__(self, seconds: float | None, where: str) -> None:
        self._seconds = seconds
        self._where = where
        self._scope: asyncio.Timeout | None = None
        self._meter: AttemptMeter | None = None

    async def __aenter__(self) -> None:
        meter = self._meter = ATTEMPTS.get()
        if meter is not None:
            if meter.outdated is not None:
                await meter.before_send()  # raises NotSent: its larger worst case did not fit
            meter.attempt_sent()
        sent = ATTEMPT_SENT.get()
        if sent is not None:
            sent()
        if self._seconds is not None:
            self._scope = asyncio.timeout(self._seconds)
            await self._scope.__aenter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        meter = self._meter
        if meter is None:
            return await self._exit(exc_type, exc, tb)
        try:
            await self._exit(exc_type, exc, tb)
        except BaseException as raised:
            meter.attempt_ended(raised)
            raise
        meter.attempt_ended(exc)

    async def _exit(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        scope = self._scope
        if scope is None:
            return
        try:
            await scope.__aexit__(exc_type, exc, tb)
        except TimeoutError:
            if not scope.expired():
                raise
            raise TransientFailure(
                ErrorCode.DEADLINE,
                f"no answer from {self._where} within deadline_s = {self._seconds:g} s",
            ) from None


#: The name docs/providers.md gave plugin authors before `AttemptDeadline` became a class;
#: kept so their providers go on working.
attempt_deadline = AttemptDeadline
