"""RateLimiter: batched permits, several limiters on one bucket (one behind a slow, remote-like
source), the concurrency cap, cancellation and 429s. Real time, a few seconds at most."""

from __future__ import annotations

import asyncio
import time

import pytest

from itemeval.providers import Grant, LocalPermitSource, RateBucket, RateLimiter


class CountingSource(LocalPermitSource):
    """A local source that counts calls and can add latency per call, as a Ray actor would."""

    def __init__(self, bucket: RateBucket, latency_s: float = 0.0):
        super().__init__(bucket)
        self.latency_s = latency_s
        self.calls = 0

    async def grant(
        self, requests: int, tokens: int, returned_tokens: int = 0, successes: int = 0
    ) -> Grant:
        self.calls += 1
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return await super().grant(requests, tokens, returned_tokens, successes)


async def hammer(limiter: RateLimiter, seconds: float, stamps: list[float], workers: int) -> None:
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        while time.monotonic() < deadline:
            async with limiter.acquire(est_tokens=10) as permit:
                stamps.append(time.monotonic())
                await asyncio.sleep(0.001)
                permit.settle(10)

    await asyncio.gather(*(worker() for _ in range(workers)))


def test_several_limiters_on_one_bucket_stay_under_the_limit() -> None:
    async def main() -> tuple[list[list[float]], CountingSource, float]:
        bucket = RateBucket(1200)  # 20 a second: booked 20 / 1.05 a second
        local = CountingSource(bucket)
        remote = CountingSource(bucket, latency_s=0.02)
        limiters = [
            RateLimiter(local, max_concurrency=16),
            RateLimiter(local, max_concurrency=16),
            RateLimiter(remote, max_concurrency=16),
        ]
        stamps: list[list[float]] = [[], [], []]
        start = time.monotonic()
        await asyncio.gather(
            *(hammer(lim, 3.0, s, 16) for lim, s in zip(limiters, stamps, strict=True))
        )
        for limiter in limiters:
            await limiter.aclose()
        return stamps, remote, time.monotonic() - start

    stamps, remote, elapsed = asyncio.run(main())
    total = sum(len(s) for s in stamps)
    assert remote.calls > 0
    allowed = 20 / 1.05 * elapsed
    assert total <= allowed + 1
    assert total >= 0.8 * 20 / 1.05 * 3.0
    assert all(len(s) > 0 for s in stamps)  # the slow (remote-like) limiter is served too
    # In any 1-second window of sends no more than the limit's share of it.
    every = sorted(t for s in stamps for t in s)
    for i, t in enumerate(every):
        in_window = sum(1 for u in every[i:] if u - t < 1.0)
        assert in_window <= 20


def test_permits_are_drawn_in_batches() -> None:
    async def main() -> tuple[int, int]:
        source = CountingSource(RateBucket(60_000))  # 1000/s
        limiter = RateLimiter(source, max_concurrency=64, batch=32)
        stamps: list[float] = []
        await hammer(limiter, 1.0, stamps, 64)
        await limiter.aclose()
        return len(stamps), source.calls

    permits, calls = asyncio.run(main())
    assert permits > 300
    assert calls * 4 < permits  # many permits per source call


def test_concurrency_cap_without_rate_limits() -> None:
    async def main() -> int:
        limiter = RateLimiter(None, max_concurrency=3)
        active = peak = 0

        async def task() -> None:
            nonlocal active, peak
            async with limiter.acquire():
                active += 1
                peak = max(peak, active)
                await asyncio.sleep(0.02)
                active -= 1

        await asyncio.gather(*(task() for _ in range(12)))
        return peak

    assert asyncio.run(main()) == 3


def test_cancelled_waiters_do_not_block_others() -> None:
    async def main() -> int:
        limiter = RateLimiter(LocalPermitSource(RateBucket(600)), max_concurrency=50)
        served = 0

        async def task() -> None:
            nonlocal served
            async with limiter.acquire():
                served += 1

        doomed = [asyncio.ensure_future(task()) for _ in range(20)]
        await asyncio.sleep(0.05)
        for t in doomed:
            t.cancel()
        await asyncio.gather(*doomed, return_exceptions=True)
        await asyncio.wait_for(asyncio.gather(*(task() for _ in range(3))), timeout=3.0)
        await limiter.aclose()
        return served

    assert asyncio.run(main()) >= 3


def test_report_429_pauses_the_source_and_drops_local_permits() -> None:
    async def main() -> float:
        bucket = RateBucket(60_000)
        limiter = RateLimiter(LocalPermitSource(bucket), max_concurrency=8)
        async with limiter.acquire():
            pass
        await limiter.report_429(0.4)
        start = time.monotonic()
        async with limiter.acquire():
            waited = time.monotonic() - start
        await limiter.aclose()
        return waited

    assert asyncio.run(main()) >= 0.39


def test_token_reservations_are_returned_through_the_next_grant() -> None:
    async def main() -> int:
        bucket = RateBucket(None, 60_000)  # 1000 tokens/s, capacity 1000
        limiter = RateLimiter(LocalPermitSource(bucket), max_concurrency=4)
        await asyncio.sleep(1.0)
        for _ in range(4):
            async with limiter.acquire(est_tokens=200) as permit:
                permit.settle(used_tokens=20)
        await limiter.aclose()
        return bucket.state().granted_tokens

    assert asyncio.run(main()) >= 800


def test_max_concurrency_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        RateLimiter(None, max_concurrency=0)


def test_a_dead_source_fails_waiters_once_after_the_bounded_wait() -> None:
    from itemeval.providers import PermitsUnavailable

    class DeadSource(LocalPermitSource):
        async def grant(self, *args: int) -> Grant:
            raise ConnectionError("actor died")

    async def main() -> tuple[PermitsUnavailable, float]:
        limiter = RateLimiter(DeadSource(RateBucket(600)), max_concurrency=4, source_timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises(PermitsUnavailable) as info:
            async with limiter.acquire():
                pass
        waited = time.monotonic() - started
        await limiter.aclose()
        return info.value, waited

    failure, waited = asyncio.run(asyncio.wait_for(main(), timeout=5))
    assert "actor died" in str(failure) and 0.5 <= waited < 3.0


def test_a_source_that_comes_back_serves_the_waiting_requests() -> None:
    class FlakySource(LocalPermitSource):
        down_until = time.monotonic() + 0.6

        async def grant(self, *args: int) -> Grant:
            if time.monotonic() < self.down_until:
                raise ConnectionError("restarting")
            return await super().grant(*args)

    async def main() -> float:
        limiter = RateLimiter(FlakySource(RateBucket(60_000)), max_concurrency=4)
        started = time.monotonic()
        async with limiter.acquire():
            waited = time.monotonic() - started
        await limiter.aclose()
        return waited

    assert 0.5 <= asyncio.run(asyncio.wait_for(main(), timeout=10)) < 5.0


def test_unused_permits_lapse_once_their_moment_has_passed() -> None:
    class Generous(LocalPermitSource):
        async def grant(self, requests: int, tokens: int, *args: int) -> Grant:
            return Grant(5, 0, 0.0, (0.0, 0.0, 0.01, 0.02, 0.03))

    async def main() -> RateLimiter:
        limiter = RateLimiter(Generous(RateBucket(60_000)), max_concurrency=4, late_s=0.02)
        async with limiter.acquire():  # one permit of five used, four held
            pass
        await asyncio.sleep(0.1)
        async with limiter.acquire():  # their moments passed: dropped, a new grant is drawn
            pass
        await limiter.aclose()
        return limiter

    limiter = asyncio.run(main())
    assert limiter.lapsed == 4


def test_a_request_woken_too_late_for_its_moment_is_not_sent_then() -> None:
    """The event loop blocked past a permit's moment: the request takes the next permit."""

    async def main() -> tuple[RateLimiter, list[tuple[float, float]]]:
        bucket = RateBucket(1200)
        limiter = RateLimiter(CountingSource(bucket), max_concurrency=4, late_s=0.02)
        async with limiter.acquire():  # the first permit, for now
            pass
        sent: list[tuple[float, float]] = []

        async def one() -> None:
            async with limiter.acquire():
                sent.append((time.monotonic(), bucket.state().granted_requests))

        task = asyncio.ensure_future(one())
        await asyncio.sleep(0.01)  # it holds the second permit, due in ~55 ms, and sleeps
        time.sleep(0.2)  # the loop is blocked well past that moment
        await task
        await limiter.aclose()
        return limiter, sent

    limiter, sent = asyncio.run(main())
    assert limiter.lapsed >= 1
    assert sent[0][1] >= 3  # sent on a permit booked after the one it missed
