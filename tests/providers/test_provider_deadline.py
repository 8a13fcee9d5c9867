"""`deadline_s`: an attempt that runs past it is cancelled, fails as `deadline` (transient) and
is retried within `max_attempts`; a request the provider never answers ends as `deadline` after
its attempts, in bounded time. Checked on the in-process simulator and over HTTP against
`itemeval sim-server`, whose own counts say how many attempts reached it."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import ValidationError
from test_provider_sim_server import mc_request, run_client

from itemeval.providers import EndpointSettings, ErrorCode, TransientFailure
from itemeval.providers._deadline import AttemptDeadline, attempt_deadline
from itemeval.providers.types import TRANSIENT_CODES


def test_deadline_is_a_transient_code_and_at_most_the_timeout() -> None:
    assert ErrorCode.DEADLINE in TRANSIENT_CODES  # a later run retries the cell
    EndpointSettings(kind="sim", deadline_s=5, timeout_s=5)
    with pytest.raises(ValidationError, match=r"deadline_s .* longer than timeout_s"):
        EndpointSettings(kind="sim", deadline_s=30, timeout_s=10)
    with pytest.raises(ValidationError):
        EndpointSettings(kind="sim", deadline_s=0)


def test_only_its_own_expiry_becomes_deadline() -> None:
    async def main() -> None:
        with pytest.raises(TransientFailure) as caught:
            async with AttemptDeadline(0.05, "here"):
                await asyncio.sleep(5)
        assert caught.value.code == ErrorCode.DEADLINE
        with pytest.raises(TimeoutError):  # the body's own timeout is not the deadline's
            async with AttemptDeadline(5, "here"):
                raise TimeoutError
        async with AttemptDeadline(None, "here"):
            await asyncio.sleep(0)
        with pytest.raises(TransientFailure):  # the name plugins were given still works
            async with attempt_deadline(0.01, "here"):
                await asyncio.sleep(5)

        # Cancelled from outside before its expiry: a cancellation, never a deadline.
        async def waits() -> None:
            async with AttemptDeadline(5, "here"):
                await asyncio.sleep(5)

        task = asyncio.create_task(waits())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


@pytest.mark.serial  # deadlines of tenths of a second
def test_in_process_never_answered_calls_end_as_deadline_after_every_attempt() -> None:
    endpoint = {
        "kind": "sim",
        "deadline_s": 0.2,
        "timeout_s": 5,
        "max_attempts": 3,
        "backoff_initial_s": 0,
        "backoff_max_s": 0,
        "sim": {"faults": {"never_answer": 0.5}, "latency": {"median_ms": 5}},
    }
    started = time.monotonic()
    results = run_client(endpoint, [mc_request(i) for i in range(40)])
    elapsed = time.monotonic() - started
    late = [r for r in results if not r.ok]
    assert 5 < len(late) < 35  # some never answered, the rest answered
    assert {r.error_code for r in late} == {ErrorCode.DEADLINE}
    assert {r.attempts for r in late} == {3}  # retried within max_attempts
    assert all(r.ok and r.attempts == 1 for r in results if r.ok)
    assert elapsed < 3 * 0.2 + 3.0  # three deadlines, not the 600 s hang


@pytest.mark.serial  # deadlines of tenths of a second
def test_over_http_a_deadline_is_retried_and_the_server_saw_every_attempt(
    start_sim_server,
) -> None:
    # Half the attempts hang (drawn per attempt), so retries after a deadline succeed.
    server = start_sim_server("--fault-timeout", "0.5", "--hang-s", "60", "--seed", "3")
    endpoint = {
        "kind": "sim",
        "base_url": f"{server.url}/v1",
        "deadline_s": 0.3,
        "timeout_s": 5,
        "max_attempts": 8,
        "backoff_initial_s": 0,
        "backoff_max_s": 0,
    }
    started = time.monotonic()
    results = run_client(endpoint, [mc_request(i) for i in range(16)])
    assert time.monotonic() - started < 8 * 0.3 + 5.0
    assert all(r.ok for r in results), [r.error_message for r in results if not r.ok]
    retried = [r for r in results if r.attempts > 1]
    assert retried  # a deadline was retried, and the retry answered
    stats = server.stats()
    assert stats["requests"] == sum(r.attempts for r in results)
    assert stats["faults"]["timeout"] == sum(r.attempts - 1 for r in results)


@pytest.mark.serial  # deadlines of tenths of a second
def test_over_http_a_never_answered_request_is_an_error_with_code_deadline(
    start_sim_server,
) -> None:
    server = start_sim_server("--fault-never-answer", "1", "--hang-s", "600")
    endpoint = {
        "kind": "sim",
        "base_url": f"{server.url}/v1",
        "deadline_s": 0.2,
        "timeout_s": 5,
        "max_attempts": 2,
        "backoff_initial_s": 0,
        "backoff_max_s": 0,
    }
    started = time.monotonic()
    results = run_client(endpoint, [mc_request(i) for i in range(4)])
    assert time.monotonic() - started < 2 * 0.2 + 5.0
    assert [(r.error_code, r.attempts) for r in results] == [(ErrorCode.DEADLINE, 2)] * 4
    assert server.stats()["requests"] == 8
