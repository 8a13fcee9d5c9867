"""RetryPolicy (tenacity) and the Retry-After / rate-limit reset header parsing."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from itemeval.providers import (
    ErrorCode,
    ModelResult,
    RetryPolicy,
    TransientFailure,
    failure_result,
)
from itemeval.providers._retry import parse_duration, retry_after_from_headers


def flaky(failures: list[TransientFailure]):
    calls = {"n": 0}

    async def attempt() -> ModelResult:
        calls["n"] += 1
        if failures:
            raise failures.pop(0)
        return ModelResult(ok=True, text="done")

    return attempt, calls


def test_transient_failures_are_retried_until_success() -> None:
    attempt, calls = flaky(
        [TransientFailure(ErrorCode.SERVER_ERROR, "500"), TransientFailure(ErrorCode.TIMEOUT, "t")]
    )
    policy = RetryPolicy(max_attempts=5, backoff_initial_s=0.01, backoff_max_s=0.02)
    result = asyncio.run(policy.run(attempt))
    assert result.ok and result.text == "done"
    assert result.attempts == 3 and calls["n"] == 3
    assert result.latency_ms > 0


def test_attempts_are_bounded_and_the_last_failure_is_the_result() -> None:
    failures = [
        TransientFailure(ErrorCode.SERVER_ERROR, f"500 #{i}", http_status=500) for i in range(9)
    ]
    attempt, calls = flaky(failures)
    policy = RetryPolicy(max_attempts=4, backoff_initial_s=0.001, backoff_max_s=0.002)
    result = asyncio.run(policy.run(attempt))
    assert not result.ok
    assert result.error_code == ErrorCode.SERVER_ERROR
    assert result.error_message == "500 #3"
    assert result.http_status == 500
    assert result.attempts == 4 and calls["n"] == 4


def test_429s_do_not_use_up_the_attempts() -> None:
    """A rate-limited call goes on (the limiter paces it) until it is answered; the other
    failures still count to `max_attempts`."""
    failures = [
        TransientFailure(ErrorCode.RATE_LIMITED, f"429 #{i}", http_status=429) for i in range(12)
    ]
    failures.insert(5, TransientFailure(ErrorCode.SERVER_ERROR, "500", http_status=500))
    attempt, calls = flaky(failures)
    policy = RetryPolicy(max_attempts=2, backoff_initial_s=0.001, backoff_max_s=0.002)
    result = asyncio.run(policy.run(attempt))
    assert result.ok and result.attempts == 14 and calls["n"] == 14
    again, _ = flaky([TransientFailure(ErrorCode.SERVER_ERROR, "500", http_status=500)] * 2)
    assert asyncio.run(policy.run(again)).error_code == ErrorCode.SERVER_ERROR


def test_retry_after_is_a_lower_bound_on_the_wait() -> None:
    attempt, _ = flaky([TransientFailure(ErrorCode.RATE_LIMITED, "429", retry_after_s=0.3)])
    policy = RetryPolicy(max_attempts=3, backoff_initial_s=0.001, backoff_max_s=0.001)
    start = time.monotonic()
    result = asyncio.run(policy.run(attempt))
    assert result.ok and result.attempts == 2
    assert time.monotonic() - start >= 0.29


def test_a_retry_after_beyond_the_cap_ends_the_call_at_once() -> None:
    attempt, calls = flaky([TransientFailure(ErrorCode.RATE_LIMITED, "429", retry_after_s=900)])
    policy = RetryPolicy(max_attempts=5, max_retry_after_s=60)
    start = time.monotonic()
    result = asyncio.run(policy.run(attempt))
    assert result.error_code == ErrorCode.RATE_LIMITED and calls["n"] == 1
    assert time.monotonic() - start < 1.0


def test_final_results_and_bugs_are_not_retried() -> None:
    calls = {"n": 0}

    async def final() -> ModelResult:
        calls["n"] += 1
        return ModelResult(ok=False, error_code=ErrorCode.AUTH)

    result = asyncio.run(RetryPolicy().run(final))
    assert result.error_code == ErrorCode.AUTH and calls["n"] == 1

    async def bug() -> ModelResult:
        raise KeyError("oops")

    with pytest.raises(KeyError):
        asyncio.run(RetryPolicy().run(bug))


def test_secrets_are_redacted_from_failure_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    from itemeval.secrets import read_key

    monkeypatch.setenv("ITEMEVAL_TEST_RETRY_KEY", "sk-canary-1234567890")
    read_key("ITEMEVAL_TEST_RETRY_KEY")
    failure = TransientFailure(ErrorCode.AUTH, "bad key sk-canary-1234567890 given")
    assert "canary" not in (failure_result(failure).error_message or "")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("0.25", 0.25),
        ("0.100s", 0.1),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_parse_duration_rejects_garbage() -> None:
    assert parse_duration("soon") is None
    assert parse_duration("5 parsecs") is None


def test_retry_after_headers_in_order_of_precedence() -> None:
    now = 1_700_000_000.0
    assert retry_after_from_headers({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_from_headers({"retry-after": "3"}) == 3.0
    date = format_datetime(datetime.fromtimestamp(now + 7, tz=UTC), usegmt=True)
    assert retry_after_from_headers({"retry-after": date}, now_epoch=now) == pytest.approx(7, abs=1)
    assert retry_after_from_headers({}) is None


def test_reset_headers_of_the_exhausted_dimension_are_honoured() -> None:
    headers = {
        "x-ratelimit-remaining-requests": "12",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    assert retry_after_from_headers(headers) == 360.0
    headers["x-ratelimit-remaining-tokens"] = "50"
    assert retry_after_from_headers(headers) == 1.0  # nothing exhausted: the soonest reset


def test_a_gateways_passed_on_hints_are_read() -> None:
    """LiteLLM's proxy passes the provider's headers on with `llm_provider-` before them; its
    own hint, when it sends one, comes first."""
    assert retry_after_from_headers({"llm_provider-retry-after": "7"}) == 7.0
    assert retry_after_from_headers({"llm_provider-retry-after-ms": "250"}) == 0.25
    assert retry_after_from_headers({"retry-after": "2", "llm_provider-retry-after": "7"}) == 2.0
    passed_on = {
        "llm_provider-x-ratelimit-remaining-requests": "0",
        "llm_provider-x-ratelimit-reset-requests": "6m0s",
        "llm_provider-x-ratelimit-reset-tokens": "20ms",
    }
    assert retry_after_from_headers(passed_on) == 360.0
    assert retry_after_from_headers({"x-ratelimit-reset-tokens": "1s"}) == 1.0
    assert retry_after_from_headers({"llm_provider-x-ratelimit-reset-tokens": "1m30.5s"}) == 90.5


def test_anthropic_reset_times_are_rfc3339() -> None:
    now = 1_700_000_000.0
    reset = (datetime.fromtimestamp(now, tz=UTC) + timedelta(seconds=12)).isoformat()
    headers = {
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": reset.replace("+00:00", "Z"),
    }
    assert retry_after_from_headers(headers, now_epoch=now) == pytest.approx(12.0)
