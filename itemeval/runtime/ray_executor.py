"""The Ray layer: worker actors around `ShardRunner`, one limiter actor per endpoint.

This is the only module that imports ray (with `cluster.py`, which connects). It is thin on
purpose: actors hold the plain-Python objects and forward calls.

* `WorkerActor`: an async actor; one call runs one shard (its calls run concurrently inside the
  actor, so a Ray call costs one per shard, not one per request). Restarted by Ray when its
  process dies; the driver re-dispatches the shard it was running.
* `LimiterActor`: holds the endpoint's `RateBucket`. Workers draw permits from it in batches
  through `ActorPermitSource`, so the limits hold for the sum of all workers on all nodes. It is
  a named actor (`itemeval-limiter-<endpoint identity>`), so two drivers on one cluster that use
  the same endpoint share it.
* `BudgetActor`: the run's `SpendLedger` (budget cap and spend), on the driver's node, so it
  lives exactly as long as the run. Workers exchange with it through `ActorSpendSource`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError, TaskCancelledError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from itemeval.ids import content_hash
from itemeval.providers.ratebucket import Grant, RateBucket
from itemeval.providers.settings import EndpointSettings
from itemeval.runtime.cluster import NAMESPACE
from itemeval.runtime.context import RunContext
from itemeval.runtime.shards import Shard, ShardSummary
from itemeval.runtime.spend import LedgerReply, LedgerState, SpendLedger
from itemeval.runtime.worker import ShardRunner


@ray.remote(num_cpus=0)
class LimiterActor:
    """The authoritative bucket of one endpoint (single-threaded: an async actor)."""

    def __init__(self, requests_per_minute: float | None, tokens_per_minute: float | None):
        self._limits = (requests_per_minute, tokens_per_minute)
        self._bucket = RateBucket(requests_per_minute, tokens_per_minute)

    async def configure(
        self, requests_per_minute: float | None, tokens_per_minute: float | None
    ) -> None:
        if (requests_per_minute, tokens_per_minute) != self._limits:
            self._limits = (requests_per_minute, tokens_per_minute)
            self._bucket = RateBucket(requests_per_minute, tokens_per_minute)

    async def exchange(
        self, requests: int, tokens: int, returned_tokens: int = 0, successes: int = 0
    ) -> Grant:
        return self._bucket.exchange(requests, tokens, returned_tokens, successes)

    async def report_429(self, retry_after_s: float | None) -> None:
        self._bucket.report_429(retry_after_s)

    async def state(self) -> Any:
        return self._bucket.state()


class ActorPermitSource:
    """`PermitSource` backed by a `LimiterActor` (one actor call per batch of permits)."""

    def __init__(self, handle: Any):
        self._handle = handle

    async def grant(
        self, requests: int, tokens: int, returned_tokens: int = 0, successes: int = 0
    ) -> Grant:
        return await self._handle.exchange.remote(requests, tokens, returned_tokens, successes)

    async def report_429(self, retry_after_s: float | None) -> None:
        await self._handle.report_429.remote(retry_after_s)


@ray.remote(num_cpus=0)
class BudgetActor:
    """The run's ledger (single-threaded: an async actor)."""

    def __init__(self, cap: float | None):
        self._ledger = SpendLedger(cap)

    async def exchange(
        self,
        released: float,
        spent: float,
        asks: list[float],
        settled_calls: int = 0,
        refused: int = 0,
    ) -> LedgerReply:
        return self._ledger.exchange(
            released, spent, asks, settled_calls=settled_calls, refused=refused
        )

    async def state(self) -> LedgerState:
        return self._ledger.state()


class ActorSpendSource:
    """`SpendSource` backed by a `BudgetActor` (one actor call per batch of asks)."""

    def __init__(self, handle: Any):
        self._handle = handle

    async def run_alive(self, timeout_s: float = 10.0) -> bool:
        """False once the run's driver is gone: the ledger it owns died with it (or the whole
        local Ray it started), and a worker Ray has not reaped yet must not write fragments a
        re-run is writing too. A ledger that does not answer counts as gone: the shard's
        answers are in the response cache, so a live driver's re-dispatch costs no payment."""
        try:
            await asyncio.wait_for(self._handle.state.remote(), timeout_s)
        except Exception:
            return False
        return True

    async def exchange(
        self,
        released: float,
        spent: float,
        asks: Any,
        settled_calls: int = 0,
        refused: int = 0,
    ) -> LedgerReply:
        return await self._handle.exchange.remote(
            released, spent, list(asks), settled_calls, refused
        )


@ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)
class WorkerActor:
    def __init__(self, context: RunContext, limiters: dict[str, str], budget: str):
        # Limiters and the ledger come by name, not as handles: a handle is a reference in a
        # constructor argument, which Ray cannot restore when it restarts this actor (ray#53727).
        sources = {
            endpoint: ActorPermitSource(ray.get_actor(actor_name, namespace=NAMESPACE))
            for endpoint, actor_name in limiters.items()
        }
        spend = ActorSpendSource(ray.get_actor(budget, namespace=NAMESPACE))
        self._runner = ShardRunner(context, sources, spend)

    async def run(self, shard: Shard) -> ShardSummary:
        return await self._runner.run(shard)

    async def close(self) -> None:
        await self._runner.aclose()

    def pid(self) -> int:
        return os.getpid()


def limiter_name(settings: EndpointSettings) -> str:
    """One limiter per provider endpoint identity (kind, URL, key variable), cluster-wide."""
    identity = {"kind": settings.kind, "url": settings.url, "key": settings.api_key_env}
    return f"itemeval-limiter-{content_hash(identity)[:16]}"


@dataclass
class _Task:
    shard: Shard
    worker: int


class RayExecutor:
    """Runs shards on `workers` worker actors, at most `per_worker` at a time on each."""

    def __init__(
        self,
        context: RunContext,
        *,
        workers: int,
        per_worker: int,
        shared_limiters: bool,
        budget_cap: float | None = None,
    ):
        self.workers = workers
        self.per_worker = per_worker
        limiters: dict[str, str] = {}
        self._limiters: list[Any] = []
        for name, settings in context.endpoints.items():
            if settings.requests_per_minute is None and settings.tokens_per_minute is None:
                continue
            actor_name = limiter_name(settings)
            options: dict[str, Any] = {"name": actor_name, "namespace": NAMESPACE}
            options["get_if_exists"] = True
            if shared_limiters:  # outlive this driver, so later drivers share the same bucket
                options["lifetime"] = "detached"
            handle = LimiterActor.options(**options).remote(
                settings.requests_per_minute, settings.tokens_per_minute
            )
            handle.configure.remote(settings.requests_per_minute, settings.tokens_per_minute)
            limiters[name] = actor_name
            self._limiters.append(handle)  # keeps a driver-owned limiter alive for the run
        budget_name = f"itemeval-budget-{context.run_id}"
        here = ray.get_runtime_context().get_node_id()
        self._budget = BudgetActor.options(
            name=budget_name,
            namespace=NAMESPACE,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False),
        ).remote(budget_cap)
        self._actors = [
            WorkerActor.options(max_concurrency=per_worker + 1).remote(
                context, limiters, budget_name
            )
            for _ in range(workers)
        ]
        self._tasks: dict[Any, _Task] = {}
        self._load = [0] * workers

    @property
    def capacity(self) -> int:
        return self.workers * self.per_worker

    def in_flight(self) -> list[Shard]:
        return [task.shard for task in self._tasks.values()]

    def submit(self, shard: Shard) -> None:
        worker = min(range(self.workers), key=lambda i: self._load[i])
        ref = self._actors[worker].run.remote(shard)
        self._tasks[ref] = _Task(shard, worker)
        self._load[worker] += 1

    def poll(self, timeout: float) -> list[tuple[Shard, ShardSummary | BaseException]]:
        """Shards that finished within `timeout` seconds (a summary, or why they failed)."""
        if not self._tasks:
            time.sleep(min(timeout, 0.05))
            return []
        ready, _ = ray.wait(list(self._tasks), num_returns=len(self._tasks), timeout=timeout)
        done: list[tuple[Shard, ShardSummary | BaseException]] = []
        for ref in ready:
            task = self._tasks.pop(ref)
            self._load[task.worker] -= 1
            try:
                done.append((task.shard, ray.get(ref)))
            except (RayError, TaskCancelledError) as exc:
                done.append((task.shard, exc))
        return done

    def cancel_all(self) -> None:
        for ref in list(self._tasks):
            ray.cancel(ref)

    def worker_pids(self) -> list[int]:
        return ray.get([actor.pid.remote() for actor in self._actors])

    def spend(self) -> LedgerState:
        """The run's ledger: what every worker reported spending, and reservations in flight."""
        return ray.get(self._budget.state.remote(), timeout=30)

    def close(self) -> None:
        with contextlib.suppress(RayError, GetTimeoutError):
            ray.get([actor.close.remote() for actor in self._actors], timeout=10)
        for actor in self._actors:
            ray.kill(actor)
        ray.kill(self._budget)
