"""`AttemptMeter`: which attempts may have been billed, and a retry's reservation under a cap."""

from __future__ import annotations

import asyncio

import pytest

from itemeval.providers import RetryPolicy, TransientFailure
from itemeval.providers._deadline import AttemptDeadline
from itemeval.providers.money import ATTEMPTS, AttemptMeter
from itemeval.providers.types import ErrorCode, ModelResult


async def _one_attempt(meter: AttemptMeter, body) -> None:
    ATTEMPTS.set(meter)
    with pytest.raises(BaseException):  # noqa: B017 (each body raises something else)
        async with AttemptDeadline(0.05, "a test"):
            await body()


@pytest.mark.parametrize(
    ("failure", "billed"),
    [
        (TransientFailure(ErrorCode.TIMEOUT, "client timeout"), True),
        (TransientFailure(ErrorCode.CONNECTION_ERROR, "reset after sending"), True),
        (TransientFailure(ErrorCode.CONNECTION_ERROR, "refused", sent=False), False),
        (TransientFailure(ErrorCode.RATE_LIMITED, "429", http_status=429), False),
        (TransientFailure(ErrorCode.SERVER_ERROR, "500", http_status=500), False),
    ],
)
def test_an_attempt_that_ended_without_an_answer_may_have_been_billed(failure, billed) -> None:
    meter = AttemptMeter()

    async def body() -> None:
        raise failure

    asyncio.run(_one_attempt(meter, body))
    assert (meter.sent, meter.in_flight, meter.abandoned) == (1, 0, int(billed))


def test_deadlines_and_cancellations_are_abandoned_attempts() -> None:
    meter = AttemptMeter()
    asyncio.run(_one_attempt(meter, lambda: asyncio.sleep(1)))  # past the 0.05 s deadline
    assert meter.abandoned == 1 and isinstance(meter.last_failure, TransientFailure)

    async def cancelled() -> None:
        ATTEMPTS.set(meter)
        task = asyncio.ensure_future(_one_attempt(meter, lambda: asyncio.sleep(1)))
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(cancelled())
    assert meter.abandoned == 2 and meter.in_flight == 0


def test_a_retry_is_sent_only_when_its_reservation_fits() -> None:
    grants = [True, False]  # the first retry fits, the second does not
    asked = []

    async def reserve() -> bool:
        asked.append(1)
        return grants.pop(0)

    meter = AttemptMeter(reserve)
    sent = []

    async def attempt() -> ModelResult:
        async with AttemptDeadline(None, "a test"):
            sent.append(1)
            raise TransientFailure(ErrorCode.TIMEOUT, "no answer")

    async def call() -> ModelResult:
        ATTEMPTS.set(meter)
        policy = RetryPolicy(max_attempts=5, backoff_initial_s=0.001, backoff_max_s=0.001)
        return await policy.run(attempt)

    result = asyncio.run(call())
    assert len(sent) == 2 and len(asked) == 2 and meter.refused and meter.abandoned == 2
    assert result.error_code == ErrorCode.TIMEOUT and result.attempts == 2
    assert "did not fit under the budget cap" in (result.error_message or "")
