"""Shards run in this process, on an event loop in a background thread (`--no-ray`).

For debugging and tiny studies: the same `ShardRunner` as on Ray, with the endpoints' limits
held by process-local buckets and the run's ledger in this process. It has the executor
interface of `RayExecutor`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

from itemeval.calls import LedgerState, LocalSpendSource, SpendLedger
from itemeval.runtime._context import RunContext
from itemeval.runtime._event_loop import new_event_loop
from itemeval.runtime._shards import Shard, ShardSummary
from itemeval.runtime._worker import ShardRunner


class InlineExecutor:
    def __init__(self, context: RunContext, *, per_worker: int, budget_cap: float | None = None):
        self.workers = 1
        self._ledger = SpendLedger(budget_cap)
        self.per_worker = per_worker
        self._loop = new_event_loop()  # uvloop's when installed (see event_loop.py)
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._runner = ShardRunner(context, spend_source=LocalSpendSource(self._ledger))
        self._futures: dict[concurrent.futures.Future[Any], Shard] = {}
        self._handed_over: Any = None

    @property
    def capacity(self) -> int:
        return self.per_worker

    def in_flight(self) -> list[Shard]:
        return list(self._futures.values())

    def submit(self, shard: Shard) -> None:
        future = asyncio.run_coroutine_threadsafe(self._runner.run(shard), self._loop)
        self._futures[future] = shard

    def poll(self, timeout: float) -> list[tuple[Shard, ShardSummary | BaseException]]:
        if not self._futures:
            return []
        done, _ = concurrent.futures.wait(
            list(self._futures), timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
        )
        out: list[tuple[Shard, ShardSummary | BaseException]] = []
        for future in done:
            shard = self._futures.pop(future)
            try:
                out.append((shard, future.result()))
            except BaseException as exc:
                out.append((shard, exc))
        return out

    def cancel_all(self) -> None:
        for future in self._futures:
            future.cancel()

    def worker_pids(self) -> list[int]:
        return []

    def spend(self) -> LedgerState:
        return self._ledger.state() if self._handed_over is None else self._handed_over()

    def share_limits(self, permit_sources: dict[str, Any]) -> None:
        """Draw rate permits from the endpoints' shared limiters from now on."""
        self._loop.call_soon_threadsafe(self._runner.share_limits, permit_sources)

    def slots_in_use(self) -> dict[str, int]:
        future = asyncio.run_coroutine_threadsafe(_on_loop(self._runner.slots_in_use), self._loop)
        return future.result(timeout=10)

    def hand_ledger_over(self, make_source: Any, state: Any) -> None:
        """Move this runner's spend to another ledger: `make_source(ledger_state)` creates it
        from this process's ledger (while no exchange is in flight) and returns its source;
        `state()` reads it from then on."""
        coroutine = self._runner.account.hand_over(lambda: make_source(self._ledger.state()))
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=300)
        self._handed_over = state

    def spend_source(self) -> LocalSpendSource:
        """The run's ledger for the driver's own calls (the batch tier's reservations)."""
        return LocalSpendSource(self._ledger)

    def health(self) -> list[str]:
        return []

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.aclose(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


async def _on_loop(function: Any) -> Any:
    return function()
