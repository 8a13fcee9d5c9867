"""RateBucket: batch grants, the 60 s bound, token reservations, 429 pause, AIMD (fake clock)."""

from __future__ import annotations

import pickle

import pytest

from itemeval.providers import Grant, RateBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make(rpm: float | None = 600, tpm: float | None = None, **kwargs: float):
    clock = FakeClock()
    return RateBucket(rpm, tpm, clock=clock, **kwargs), clock


def test_starts_empty_and_grants_in_batches_with_a_wait() -> None:
    bucket, clock = make(600)  # capacity 10, refill (600 - 10) / (60 + 1) per second
    first = bucket.grant(32)
    assert first.requests == 0 and first.wait_s > 0
    clock.advance(first.wait_s)
    assert bucket.grant(32).requests == 1
    clock.advance(5.0)
    grant = bucket.grant(32)
    assert grant.requests == 10  # capped by the capacity (one second's worth)
    assert grant.wait_s == pytest.approx(61 / 590, rel=0.01)
    clock.advance(1.0)  # 9.7 permits accrue
    assert bucket.grant(3) == Grant(3, 0, 0.0)
    assert bucket.grant(3) == Grant(3, 0, 0.0)


def test_no_sixty_second_window_exceeds_the_limit() -> None:
    bucket, clock = make(600)
    clock.advance(30)  # idle: the bucket is full when the window starts
    granted = 0
    for _ in range(6000):  # a greedy client asking every 10 ms for a minute
        granted += bucket.grant(32).requests
        clock.advance(0.01)
    assert granted <= 600
    assert granted >= 585


def test_no_sixty_second_window_of_sends_exceeds_the_limit_when_permits_are_held() -> None:
    """A client may use a permit up to `hold_s` after its grant (then it lapses): the sends of
    any 60 s window still stay within the limit."""
    bucket, clock = make(600, hold_s=1.0)
    clock.advance(30)  # idle: full at the start
    pivot = clock.now + 1.0
    sends: list[float] = []
    for _ in range(9000):  # 90 s of a greedy client asking every 10 ms
        granted = bucket.grant(32).requests
        # the worst case: the first second's permits are held to the last moment and sent
        # together with the fresh ones granted right after
        sends += [clock.now + (1.0 if clock.now < pivot else 0.0)] * granted
        clock.advance(0.01)
    sends.sort()
    start = 0
    for end, moment in enumerate(sends):
        while sends[start] <= moment - 60.0:
            start += 1
        assert end - start + 1 <= 600


def test_tokens_per_minute_limit_and_settlement() -> None:
    bucket, clock = make(None, 6000)  # capacity 100 tokens, 5900/60 per second
    clock.advance(10)
    grant = bucket.grant(10, 200)  # 20 tokens each: 5 fit in the 100 available
    assert grant.requests == 5 and grant.tokens == 100 and grant.wait_s > 0
    bucket.settle(reserved_tokens=100, used_tokens=40)  # 60 unused flow back
    again = bucket.grant(3, 60)
    assert again.requests == 3 and again.tokens == 60


def test_a_request_larger_than_the_bucket_passes_from_a_full_bucket_then_waits() -> None:
    bucket, clock = make(None, 600)  # capacity 10 tokens
    clock.advance(5)
    big = bucket.grant(1, 50)
    assert big.requests == 1
    blocked = bucket.grant(1, 50)
    assert blocked.requests == 0 and blocked.wait_s > 0  # the debt is paid back first


def test_report_429_pauses_everyone_until_retry_after_then_rate_is_halved() -> None:
    bucket, clock = make(600)
    clock.advance(5)
    bucket.report_429(retry_after_s=2.0)
    paused = bucket.grant(5)
    assert paused == Grant(0, 0, pytest.approx(2.0))
    clock.advance(1.99)
    assert bucket.grant(5).requests == 0
    clock.advance(0.01 + 1.0)  # one second after the pause: half the rate accrued
    assert bucket.state().rate_factor == pytest.approx(0.5)
    assert bucket.grant(32).requests == 4  # 1 s at 590/60/2 = 4.9 per second


def test_a_volley_of_429s_decreases_once_and_successes_recover_gradually() -> None:
    bucket, clock = make(600, recovery_per_s=0.1)
    for _ in range(20):
        bucket.report_429(0.1)
    assert bucket.state().rate_factor == pytest.approx(0.5)
    assert bucket.state().rate_limited == 20
    clock.advance(0.1)
    factors = []
    for _ in range(6):
        clock.advance(1.0)
        bucket.report_ok(5)
        factors.append(bucket.state().rate_factor)
    assert factors == sorted(factors)
    assert factors[0] == pytest.approx(0.6)
    assert factors[-1] == pytest.approx(1.0)  # back to the configured limit, not above


def test_repeated_429s_back_off_multiplicatively_to_a_floor() -> None:
    bucket, clock = make(600, min_rate_factor=0.1)
    for _ in range(10):
        bucket.report_429(0.0)
        clock.advance(1.1)
    assert bucket.state().rate_factor == pytest.approx(0.1)


def test_retry_after_is_capped_and_default_pause_applies() -> None:
    bucket, _ = make(600, max_pause_s=5.0, default_pause_s=0.3)
    bucket.report_429(3600.0)
    assert bucket.state().paused_for_s == pytest.approx(5.0)
    other, _ = make(600, default_pause_s=0.3)
    other.report_429(None)
    assert other.state().paused_for_s == pytest.approx(0.3)


def test_exchange_settles_reports_and_grants_in_one_call() -> None:
    bucket, clock = make(600, 60_000)
    clock.advance(2)
    first = bucket.exchange(4, 400)
    assert first.requests == 4
    second = bucket.exchange(4, 400, returned_tokens=300, successes=4)
    assert second.requests == 4


def test_unlimited_bucket_grants_everything_and_grants_pickle() -> None:
    bucket, _ = make(None, None)
    grant = bucket.grant(1000, 10**9)
    assert grant == Grant(1000, 10**9, 0.0)
    assert not bucket.limited
    assert pickle.loads(pickle.dumps(grant)) == grant
