"""RateBucket: permits booked for the moment they are sent, the window bound, token
reservations, 429 pause, AIMD (fake clock)."""

from __future__ import annotations

import math
import pickle
import random

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


def most_in_window(moments: list[float], window_s: float) -> int:
    """The most moments in any window (t - window_s, t], as the sim-server counts."""
    moments = sorted(moments)
    most, start = 0, 0
    for end, moment in enumerate(moments):
        while moments[start] <= moment - window_s:
            start += 1
        most = max(most, end - start + 1)
    return most


def greedy_sends(bucket: RateBucket, clock: FakeClock, seconds: float, late_s: float) -> list:
    """A greedy client asking every 10 ms, sending each permit at its moment plus a random
    lateness up to `late_s` (what the limiter allows)."""
    sends: list[float] = []
    rng = random.Random(7)
    for _ in range(int(seconds / 0.01)):
        grant = bucket.grant(64)
        sends += [clock.now + at + rng.uniform(0, late_s) for at in grant.at_s]
        clock.advance(0.01)
    return sends


def test_permits_are_booked_one_after_another_within_the_horizon() -> None:
    bucket, clock = make(1200)  # 20 a second: booked 20 / (1 + 0.05 s of slack) a second
    rate = 20 / 1.05
    assert bucket.send_rates[0] == pytest.approx(rate)
    grant = bucket.grant(32)
    assert grant.at_s[0] == 0.0  # a new bucket is full: its first permit is for now
    steps = [b - a for a, b in zip(grant.at_s, grant.at_s[1:], strict=False)]
    assert steps == pytest.approx([1 / rate] * len(steps))
    assert grant.requests == len(grant.at_s) == int(0.25 * rate) + 1  # horizon 0.25 s
    assert grant.wait_s == pytest.approx(grant.at_s[-1] + 1 / rate - 0.25)
    again = bucket.grant(32)  # booked up to the horizon: nothing more now
    assert again.requests == 0 and again.wait_s == pytest.approx(grant.wait_s)
    clock.advance(again.wait_s)
    assert bucket.grant(32).requests == 1


@pytest.mark.parametrize(
    ("rpm", "window"), [(1200, 1), (6000, 1), (600, 1), (60, 1), (1000, 1), (150, 2), (66, 10)]
)
def test_no_window_of_sends_exceeds_the_limit_even_when_each_is_late(rpm, window) -> None:
    """The window the bound holds for is 1 s, or the fewest whole seconds whose share of the
    limit is a whole number of requests to within 5%; and every whole multiple of it."""
    bucket, clock = make(rpm)
    clock.advance(30)
    sends = greedy_sends(bucket, clock, 120.0, late_s=0.05)
    per_s = rpm / 60
    for w in (window, 2 * window, 3 * window, 60.0):
        assert most_in_window(sends, w) <= math.floor(per_s * w + 1e-9), w
    # ... and the limit is still used: at least 90% of it over the two minutes
    assert len(sends) >= 0.9 * per_s * 120


def test_a_provider_bucket_of_a_tenth_of_a_second_never_runs_dry() -> None:
    """The sim-server's own limit: a bucket holding `burst_s` of the rate, refilled
    continuously; a request is refused when it holds less than one."""
    bucket, clock = make(1200)
    sends = sorted(greedy_sends(bucket, clock, 60.0, late_s=0.02))
    capacity, rate = 1200 / 60 * 0.1, 1200 / 60
    level, last = capacity, sends[0]
    for moment in sends:
        level = min(capacity, level + (moment - last) * rate)
        last = moment
        assert level >= 1.0
        level -= 1.0


def test_a_restarted_bucket_books_nothing_in_its_first_horizon() -> None:
    bucket, _ = make(1200, restarted=True)
    grant = bucket.grant(8)
    assert grant.requests and min(grant.at_s) >= 0.25 - 1e-9


def test_tokens_per_minute_and_settlement() -> None:
    bucket, clock = make(None, 60_000)  # 1000 tokens/s; 20 tokens of capacity
    rate = (1000 - 20) / 1.05
    assert bucket.send_rates[1] == pytest.approx(rate)
    grant = bucket.grant(10, 2000)  # 200 tokens each, larger than the bucket: one when full
    assert grant.requests == 2
    assert grant.at_s[1] == pytest.approx(200 / rate)
    clock.advance(0.1)
    bucket.settle(reserved_tokens=400, used_tokens=40)  # 360 unused flow back ...
    after = bucket.grant(1, 100)
    assert after.at_s == (0.0,)  # ... so far that the bucket is full again now
    bucket.return_tokens(-500)  # a debt: the next permit waits for it
    owed = bucket.grant(1, 10)  # due when the bucket holds 10 of its 20 again
    assert owed.requests == 0
    assert owed.wait_s == pytest.approx((100 + 500 - 10) / rate - 0.25)


def test_a_request_larger_than_the_bucket_goes_from_a_full_bucket_then_waits() -> None:
    bucket, clock = make(None, 600)  # capacity 1 token (at least one)
    clock.advance(5)
    big = bucket.grant(1, 50)
    assert big.requests == 1 and big.at_s == (0.0,)
    blocked = bucket.grant(1, 50)
    assert blocked.requests == 0 and blocked.wait_s > 0  # the debt is paid back first


def test_report_429_pauses_everyone_until_retry_after_then_rate_is_halved() -> None:
    bucket, clock = make(1200)
    step = 2 * 1.05 / 20  # at half the rate
    bucket.report_429(retry_after_s=2.0)
    paused = bucket.grant(5)
    assert paused.requests == 0 and paused.wait_s == pytest.approx(2.0 - 0.25 + step)
    clock.advance(2.0)
    assert bucket.state().rate_factor == pytest.approx(0.5)
    grant = bucket.grant(32)
    # empty when the pause ended, at half the rate: the first is due one step after it
    assert grant.at_s[0] == pytest.approx(step)
    assert grant.at_s[1] - grant.at_s[0] == pytest.approx(step)


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
    first = bucket.exchange(4, 400)
    assert first.requests >= 1
    clock.advance(2)
    second = bucket.exchange(4, 400, returned_tokens=300, successes=4)
    assert second.requests >= 1 and second.at_s[0] == 0.0


def test_unlimited_bucket_grants_everything_and_grants_pickle() -> None:
    bucket, _ = make(None, None)
    grant = bucket.grant(1000, 10**9)
    assert grant == Grant(1000, 10**9, 0.0)
    assert not bucket.limited
    booked = make(1200)[0].grant(4)
    assert pickle.loads(pickle.dumps(booked)) == booked


def test_snapshot_and_restore_carry_the_schedule() -> None:
    bucket, clock = make(1200, 60_000)
    bucket.grant(4, 400)
    copy = RateBucket(1200, 60_000, clock=clock)
    copy.restore(bucket.snapshot())
    assert copy.grant(4, 400) == bucket.grant(4, 400)


def test_a_limit_nobody_declared_is_found_from_a_429_without_a_hint() -> None:
    bucket, clock = make(None)
    for _ in range(200):  # 20 a second, unpaced, for 10 s
        assert bucket.grant(2).at_s == ()
        clock.advance(0.1)
    bucket.report_429(retry_after_s=0.5)  # a hint: its call waits; nothing is paced
    assert not bucket.limited and bucket.state().found_per_minute is None
    bucket.report_429(None)  # none: the rate granted until now, halved, paces every caller
    found = bucket.state().found_per_minute / 60
    assert found == pytest.approx(20, rel=0.05)
    assert bucket.limited and bucket.state().rate_factor == pytest.approx(0.5)
    clock.advance(1.0)  # the default pause
    assert len(bucket.grant(64).at_s) == pytest.approx(0.25 * found / 2, abs=1)
    for _ in range(30):  # successes: additive increase, past the rate found (probing)
        clock.advance(1.0)
        bucket.report_ok(5)
    assert bucket.send_rates[0] * bucket.state().rate_factor > 20
    copy = RateBucket(None, clock=clock)
    copy.restore(bucket.snapshot())
    assert copy.state().found_per_minute == bucket.state().found_per_minute
