"""The lease pool (`ConcurrencyPool`) and a worker's side of it (`LeasedSlots`): never above the
limit in sum, fair shares while someone waits, expiry of a silent holder, the restart freeze."""

from __future__ import annotations

import asyncio
import random

import pytest

from itemeval.providers.limits import ConcurrencyPool, LeasedSlots, LocalSlotSource


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_leases_never_add_up_to_more_than_the_limit():
    rng = random.Random(7)
    pool = ConcurrencyPool(8, clock=Clock())
    sizes = dict.fromkeys("abcde", 0)
    for _ in range(5000):
        holder = rng.choice("abcde")
        in_use = rng.randint(0, sizes[holder])  # a holder never uses more than its lease
        sizes[holder] = pool.lease(holder, in_use, rng.randint(0, 12))
        assert sizes[holder] >= in_use  # what is in use is never taken away
        assert sum(sizes.values()) <= 8
        assert pool.leased() == sum(sizes.values())


def test_a_waiting_holder_gets_a_fair_share():
    pool = ConcurrencyPool(8, clock=Clock())
    assert pool.lease("a", 0, 8) == 8  # alone: all of it
    assert pool.lease("b", 0, 8) == 0  # nothing free
    # `a` renews while `b` waits: it keeps what it uses, and asks no more than half.
    assert pool.lease("a", 8, 8) == 8
    assert pool.lease("a", 3, 8) == 4
    assert pool.lease("b", 0, 8) == 4  # the other half
    assert pool.lease("a", 4, 8) == 4 and pool.lease("b", 4, 8) == 4
    # `b` idle gives its slots back, and `a` may have them all again.
    assert pool.lease("b", 0, 0) == 0
    assert pool.lease("a", 4, 8) == 8
    assert pool.holders() == 1


def test_a_silent_holders_lease_expires():
    clock = Clock()
    pool = ConcurrencyPool(8, ttl_s=15.0, clock=clock)
    assert pool.lease("dead", 8, 8) == 8
    clock.now += 14.9
    assert pool.lease("alive", 0, 8) == 0  # not yet
    clock.now += 0.2
    assert pool.lease("alive", 0, 8) == 8  # the silent holder's slots came back
    assert pool.holders() == 1


def test_a_restarted_pool_lets_no_holder_grow_until_it_thaws():
    clock = Clock()
    pool = ConcurrencyPool(8, restarted=True, freeze_s=6.0, clock=clock)
    # A holder that had 5 in use before the restart re-reports them: it keeps them, no more.
    assert pool.lease("old", 5, 8) == 5
    # A new holder (or one that lost track) gets nothing while frozen: the pool does not yet
    # know what every holder uses, so slots in use could be handed out twice.
    assert pool.lease("new", 0, 8) == 0
    clock.now += 5.9
    assert pool.lease("old", 5, 8) == 5
    clock.now += 0.2
    assert pool.lease("new", 0, 8) == 3  # thawed: what is free
    assert pool.lease("old", 5, 8) <= 5


def test_a_pool_that_was_not_restarted_does_not_freeze():
    pool = ConcurrencyPool(8, clock=Clock())
    assert pool.lease("new", 0, 8) == 8


async def _hammer(slots: LeasedSlots, calls: int, seen: dict[str, int], total: list[int]) -> None:
    async def one() -> None:
        await slots.acquire()
        try:
            total[0] += 1
            seen["max"] = max(seen["max"], total[0])
            await asyncio.sleep(0.002)
        finally:
            total[0] -= 1
            slots.release()

    await asyncio.gather(*(one() for _ in range(calls)))


def test_leased_slots_share_the_pool_and_hand_idle_slots_back():
    async def main() -> None:
        pool = ConcurrencyPool(6)
        source = LocalSlotSource(pool)
        a = LeasedSlots(source, holder="a", max_slots=6, idle_s=0.1, retry_s=0.005)
        b = LeasedSlots(source, holder="b", max_slots=6, idle_s=0.1, retry_s=0.005)
        seen, total = {"max": 0}, [0]
        await asyncio.gather(_hammer(a, 200, seen, total), _hammer(b, 200, seen, total))
        assert seen["max"] <= 6  # both holders together, never above the limit
        assert seen["max"] >= 5  # ... and they used it
        await asyncio.sleep(0.4)  # idle: both give their slots back
        assert pool.leased() == 0
        await a.aclose()
        await b.aclose()

    asyncio.run(main())


def test_a_lease_comes_back_when_its_holder_stops_renewing():
    async def main() -> None:
        clock = Clock()
        pool = ConcurrencyPool(4, ttl_s=15.0, clock=clock)
        source = LocalSlotSource(pool)
        dead = LeasedSlots(source, holder="dead", max_slots=4)
        for _ in range(4):
            await dead.acquire()
        assert pool.leased() == 4
        dead._task.cancel()  # its process died: no renewal, no release
        alive = LeasedSlots(source, holder="alive", max_slots=4, retry_s=0.005)
        waiting = asyncio.ensure_future(alive.acquire())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        clock.now += 16.0
        await asyncio.wait_for(waiting, 2.0)
        assert alive.in_use == 1
        await alive.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("limit", [1, 3])
def test_a_lease_is_at_least_one_slot_for_a_lone_waiter(limit):
    pool = ConcurrencyPool(limit, clock=Clock())
    assert pool.lease("a", 0, 1) == 1
