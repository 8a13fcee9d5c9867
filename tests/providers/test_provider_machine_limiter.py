"""The machine's limiter: callers in separate processes (here, separate open files, which the
kernel's locks treat alike) hold one endpoint's limits together; a process that is gone gives its
slots back at once; a limiter that cannot be reached is waited for, never bypassed."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import subprocess
import sys
import time

import pytest

from itemeval.errors import ConfigError
from itemeval.providers import EndpointSettings
from itemeval.providers.limits import EndpointLimits, RateLimiter
from itemeval.providers.limits._machine import (
    MachineLimiter,
    MachineLimiterSource,
    attached,
    machine_source,
)

NAME = "endpoint"


def _source(tmp_path, limits: EndpointLimits, **kwargs) -> MachineLimiterSource:
    return MachineLimiterSource(MachineLimiter(NAME, limits, tmp_path), **kwargs)


def _limiter(source: MachineLimiterSource, limits: EndpointLimits) -> RateLimiter:
    return RateLimiter(
        source if limits.requests_per_minute else None,
        max_concurrency=limits.max_concurrency,
        track_tokens=False,
        slots=source,
    )


def test_two_callers_share_one_rate(tmp_path):
    limits = EndpointLimits(600, None, 64)  # 10 a second: sends booked 10 / 1.05 a second

    async def main() -> int:
        limiters = [_limiter(_source(tmp_path, limits), limits) for _ in range(2)]
        granted = [0]

        async def call(limiter: RateLimiter) -> None:
            async with limiter.acquire():
                granted[0] += 1

        tasks = [asyncio.ensure_future(call(lim)) for lim in limiters for _ in range(100)]
        await asyncio.sleep(2.0)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for limiter in limiters:
            await limiter.aclose()
        return granted[0]

    # One schedule for both: at most one request plus 2 s of its rate and a little clock slack;
    # two schedules of their own would grant about twice that.
    assert asyncio.run(main()) <= 1 + 2.2 * 10 / 1.05


def test_two_callers_share_one_endpoints_slots(tmp_path):
    limits = EndpointLimits(None, None, 4)

    async def main() -> int:
        limiters = [_limiter(_source(tmp_path, limits), limits) for _ in range(2)]
        now, most = [0], [0]

        async def call(limiter: RateLimiter) -> None:
            async with limiter.acquire():
                now[0] += 1
                most[0] = max(most[0], now[0])
                await asyncio.sleep(0.005)
                now[0] -= 1

        await asyncio.gather(*(call(lim) for lim in limiters for _ in range(60)))
        for limiter in limiters:
            await limiter.aclose()
        return most[0]

    assert asyncio.run(main()) == 4


def test_a_process_that_is_gone_gives_its_slots_back_at_once(tmp_path):
    limits = EndpointLimits(None, None, 4)
    child = (
        "import os, sys; sys.path.insert(0, sys.argv[3]);"
        "from itemeval.providers.limits._machine import MachineLimiter;"
        "from itemeval.providers.limits._endpoint import EndpointLimits;"
        "m = MachineLimiter(sys.argv[1], EndpointLimits(None, None, 4), sys.argv[2]);"
        "print(m.call(lambda l: l.lease(f'{os.getpid()}-x', 4, 4)), flush=True);"
        "os._exit(0)"  # killed, as it were: no release
    )
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(
        [sys.executable, "-c", child, NAME, str(tmp_path), repo],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "4"
    limiter = MachineLimiter(NAME, limits, tmp_path)
    # Its lease has not expired (15 s), but its process is gone: the slots are free now.
    assert limiter.call(lambda pool: pool.lease(f"{os.getpid()}-y", 0, 4)) == 4


def test_a_locked_limiter_is_waited_for_and_said_so(tmp_path, caplog):
    limits = EndpointLimits(6000, None, 8)
    source = _source(tmp_path, limits, lock_wait_s=0.1)
    limiter = _limiter(source, limits)
    path = tmp_path / f"{NAME}.json"
    path.touch()
    holder = os.open(path, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process holds the lock and does not let go

    async def main() -> None:
        call = asyncio.ensure_future(limiter.acquire().__aenter__())
        await asyncio.sleep(1.0)
        assert not call.done()  # no slot, no permit: not sent
        fcntl.flock(holder, fcntl.LOCK_UN)
        await asyncio.wait_for(call, 5.0)  # it goes on once the limiter answers
        limiter._slots.release()
        await limiter.aclose()

    with caplog.at_level(logging.WARNING, logger="itemeval.limits"):
        asyncio.run(main())
    os.close(holder)
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "has not answered" in said and "locked by another process" in said, said
    assert "answers again" in said


def test_limits_are_declared_once_while_a_run_holds_them(tmp_path):
    settings = EndpointSettings.model_validate(
        {"kind": "sim", "base_url": "http://127.0.0.1:9/v1", "max_concurrency": 8}
    )
    other = settings.model_copy(update={"max_concurrency": 4})
    with attached({"sim": settings}, tmp_path):
        refused = pytest.raises(ConfigError, match="already runs with max_concurrency 8")
        with refused as failure, attached({"sim": other}, tmp_path):
            pass
        assert "max_concurrency 4" in str(failure.value)
    with attached({"sim": other}, tmp_path):  # no run holds the old ones: replaced
        state = machine_source(other, tmp_path).limiter.state()  # type: ignore[union-attr]
        assert state["limits"]["max_concurrency"] == 4


def test_an_unreadable_file_starts_as_a_restarted_limiter(tmp_path):
    limits = EndpointLimits(600, None, 8)
    limiter = MachineLimiter(NAME, limits, tmp_path)
    assert limiter.call(lambda state: state.lease("1-a", 0, 8)) == 8
    (tmp_path / f"{NAME}.json").write_text('{"version": 1, "boo')  # a writer killed mid-write
    # The pool does not know who holds what: nobody grows until holders have re-reported.
    assert limiter.call(lambda state: state.lease(f"{os.getpid()}-b", 0, 8)) == 0
    # ... and the bucket books nothing for its first horizon (permits others may still hold).
    assert min(limiter.call(lambda state: state.exchange(5, 0)).at_s) >= 0.2


@pytest.mark.serial  # a time per call on the wall clock
def test_one_call_costs_well_under_a_millisecond(tmp_path):
    limiter = MachineLimiter(NAME, EndpointLimits(600_000, 10_000_000, 64), tmp_path)
    limiter.call(lambda state: state.lease(f"{os.getpid()}-a", 0, 64))
    started = time.perf_counter()
    for _ in range(200):
        limiter.call(lambda state: state.exchange(32, 3200, 0, 32))
    assert (time.perf_counter() - started) / 200 < 0.002  # measured: see architecture.md
