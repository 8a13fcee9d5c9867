"""The run's ledger and the workers' accounts: the budget cap as a hard cap, in plain asyncio."""

from __future__ import annotations

import asyncio
import random

import pytest

from itemeval.calls import LocalSpendSource, SpendAccount, SpendLedger


def test_the_ledger_grants_in_order_while_asks_fit() -> None:
    ledger = SpendLedger(cap=1.0)
    reply = ledger.exchange(0.0, 0.0, [0.4, 0.4, 0.4, 0.1])
    assert reply.granted == 2 and reply.reserved == pytest.approx(0.8)
    # A settlement: 0.4 reserved, 0.1 paid; now 0.1 spent + 0.4 reserved.
    reply = ledger.exchange(0.4, 0.1, [0.4])
    assert reply.granted == 1 and reply.spent == pytest.approx(0.1)
    assert ledger.state().reserved == pytest.approx(0.8)


def test_without_a_cap_everything_is_granted_and_counted() -> None:
    ledger = SpendLedger(cap=None)
    assert ledger.exchange(0.0, 0.0, [1e9, 1e9]).granted == 2
    ledger.exchange(0.0, 2.5, [], settled_calls=3)
    state = ledger.state()
    assert state.spent == 2.5 and state.calls == 3 and state.left is None


def test_a_call_that_cannot_fit_is_refused_and_one_that_can_waits() -> None:
    async def scenario() -> tuple[bool, bool, bool]:
        ledger = SpendLedger(cap=1.0)
        account = SpendAccount(LocalSpendSource(ledger), capped=True)
        assert await account.reserve(0.7)
        waiting = asyncio.ensure_future(account.reserve(0.5))  # fits once 0.7 comes back
        await asyncio.sleep(0.2)
        assert not waiting.done()  # waits: 0.7 is outstanding
        account.settle(0.7, 0.2)  # the first call cost 0.2
        second = await asyncio.wait_for(waiting, 5)
        account.settle(0.5, 0.5)
        third = await asyncio.wait_for(account.reserve(0.31), 5)  # 0.7 spent: 0.31 never fits
        fourth = await asyncio.wait_for(account.reserve(0.3), 5)
        await account.aclose()
        state = ledger.state()
        assert state.spent == pytest.approx(0.7) and state.refused == 1
        return second, third, fourth

    assert asyncio.run(scenario()) == (True, False, True)


def test_many_accounts_never_cross_the_cap_and_use_most_of_it() -> None:
    """Four workers, 64 calls each in flight at most; actual cost is 10-60% of the worst case."""

    async def worker(account: SpendAccount, rng: random.Random, paid: list[float]) -> None:
        semaphore = asyncio.Semaphore(64)

        async def call() -> None:
            async with semaphore:
                worst = rng.uniform(0.01, 0.05)
                if not await account.reserve(worst):
                    return
                await asyncio.sleep(rng.uniform(0.0, 0.01))
                cost = worst * rng.uniform(0.1, 0.6)
                paid.append(cost)
                account.settle(worst, cost)

        await asyncio.gather(*(call() for _ in range(400)))
        await account.flush()

    async def scenario() -> tuple[float, float]:
        ledger = SpendLedger(cap=5.0)
        paid: list[float] = []
        accounts = [SpendAccount(LocalSpendSource(ledger), capped=True) for _ in range(4)]
        await asyncio.gather(*(worker(a, random.Random(i), paid) for i, a in enumerate(accounts)))
        for account in accounts:
            await account.aclose()
        return sum(paid), ledger.state().spent

    paid, spent = asyncio.run(scenario())
    assert paid == pytest.approx(spent)
    assert paid <= 5.0
    assert paid > 5.0 - 0.05  # it stopped only when the largest worst case no longer fit


def test_optional_spend_is_reserved_now_or_never_and_is_not_a_refusal() -> None:
    # A hedge: it must neither wait for outstanding reservations nor stop the run.
    async def scenario() -> None:
        ledger = SpendLedger(cap=1.0)
        account = SpendAccount(LocalSpendSource(ledger), capped=True)
        assert await account.reserve(0.7)
        assert not await asyncio.wait_for(account.try_reserve(0.5), 1.0)  # no wait: refused
        assert await account.try_reserve(0.2)
        state = ledger.state()
        assert state.reserved == pytest.approx(0.9) and state.refused == 0
        account.settle(0.2, 0.2)  # the hedge was paid in full
        await account.flush()
        assert ledger.state().spent == pytest.approx(0.2)

    asyncio.run(scenario())
