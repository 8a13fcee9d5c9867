"""The attempts of one call as the bill sees them: which may have been billed, and whether one
more may be sent under the budget cap.

    meter = AttemptMeter(reserve_another)       # the caller reserved the first worst case
    token = ATTEMPTS.set(meter)                 # the call's task (a hedge's task inherits it)
    result = await provider.complete(request)   # AttemptDeadline reports each attempt sent
    charged = meter.abandoned * worst_case      # plus the usage the answers report

One rule for every request of a call, first attempts, retries and hedges alike: an attempt that
was sent (it entered `AttemptDeadline`, holding its permit) and ended without an answer from the
provider (the endpoint's `deadline_s`, the client's timeout, a connection lost after sending, a
cancellation: a hedge's loser, an interrupted run) is *abandoned*. The provider may bill it in
full and never says what it billed, so it is charged at its worst case. An attempt the provider
answered costs what its usage says (an error answer, 429 or 5xx, reports none and costs $0); one
that never connected (`sent=False` on its failure) cost nothing.

Under a cap each attempt in flight or abandoned needs a reservation of its own: the first comes
with the call, a hedge's with the hedge, and before a retry is sent `may_send` reserves another
worst case; when it does not fit the retry is not sent and the call ends with its last failure
(`refusal`), its cell left pending. So a call never costs more than what it reserved. When the
worst case itself grows while a call waits (a reply of the same model billed more than its
reservation), the attempt about to be sent first tops its reservation up (`top_up`); when that
does not fit it is not sent (`NotSent`), and the call ends unsent, its cell left pending.

Plain Python, importing only `providers/types.py`: the provider floor (`providers/_deadline.py`,
`providers/_retry.py`) reports into it and the call path (`calls/_shard_calls.py`) reads it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from itemeval.errors import NotSent, TransientFailure
from itemeval.providers._failures import failure_result
from itemeval.providers.types import ErrorCode, ModelResult

#: The meter of the call this task's attempts belong to (None: nobody is counting).
ATTEMPTS: ContextVar[AttemptMeter | None] = ContextVar("attempts", default=None)


class AttemptMeter:
    """The attempts of one call (see the module docstring)."""

    __slots__ = (
        "_reserve",
        "abandoned",
        "covered",
        "in_flight",
        "last_failure",
        "outdated",
        "refusal_result",
        "refused",
        "sent",
        "top_up",
    )

    def __init__(
        self, reserve: Callable[[], Awaitable[bool]] | None = None, *, covered: int = 1
    ) -> None:
        """`reserve`: reserves one more worst case for a retry (None: no cap, always send);
        `covered`: how many attempts the reservations made so far cover."""
        self._reserve = reserve
        self.covered = covered
        self.sent = 0
        self.in_flight = 0
        self.abandoned = 0
        self.refused = False
        self.last_failure: TransientFailure | None = None  # the last one an attempt ended in
        self.refusal_result: ModelResult | None = None  # what `refusal` returned (not an attempt)
        #: Whether the call's worst case grew since it reserved (cheap, asked before each send),
        #: and the top-up of its reservation (False: it does not fit; the attempt is not sent).
        self.outdated: Callable[[], bool] | None = None
        self.top_up: Callable[[], Awaitable[bool]] | None = None

    async def before_send(self) -> None:
        """Called as an attempt is about to be sent: raises `NotSent` when the call's worst case
        grew and the larger reservation does not fit."""
        if self.outdated is None or self.top_up is None or not self.outdated():
            return
        if await self.top_up():
            return
        self.refused = True
        raise NotSent(
            ModelResult(
                ok=False,
                error_code=ErrorCode.RATE_LIMITED,
                error_message="not sent: the model billed more than its reservation, and the "
                "call's worst case at the usage seen does not fit under the budget cap",
            )
        )

    @property
    def capped(self) -> bool:
        return self._reserve is not None

    def attempt_sent(self) -> None:
        self.sent += 1
        self.in_flight += 1

    def attempt_ended(self, exc: BaseException | None) -> None:
        """An attempt ended: normally (an answer, `exc` None), or with `exc`."""
        self.in_flight -= 1
        if exc is None:
            return
        if isinstance(exc, TransientFailure):
            self.last_failure = exc
            if getattr(exc, "http_status", None) is not None or not getattr(exc, "sent", True):
                return  # the provider answered with an error, or it never reached it
        self.abandoned += 1

    async def may_send(self) -> bool:
        """Whether one more attempt may be sent: covered by the reservations made, or by one
        more that fits now (under a cap)."""
        if self.abandoned + self.in_flight < self.covered or self._reserve is None:
            return True
        if await self._reserve():
            self.covered += 1
            return True
        self.refused = True
        return False

    def guard(self, attempt: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        """`attempt` that first asks `may_send`, and ends the call with `refusal()` when not."""

        async def guarded() -> Any:
            if not await self.may_send():
                return self.refusal()
            return await attempt()

        return guarded

    def refusal(self) -> Any:
        """The call's result when a retry did not fit under the cap: its last failure, saying
        why it was not retried (a transient code: the cell stays pending)."""
        last = self.last_failure
        why = "not retried: another attempt's worst case did not fit under the budget cap"
        if last is None:
            refusal = ModelResult(ok=False, error_code=ErrorCode.DEADLINE, error_message=why)
        else:
            result = failure_result(last)
            refusal = ModelResult(
                ok=False,
                error_code=result.error_code,
                error_message=f"{result.error_message}; {why}",
                http_status=result.http_status,
                request_id=result.request_id,
            )
        self.refusal_result = refusal
        return refusal
