"""The Ray actors of a run, and the sources through which workers reach the shared ones.

* `WorkerActor`: an async actor around `ShardRunner`; one call runs one shard (its calls run
  concurrently inside the actor). Restarted by Ray when its process dies.
* `LimiterActor`: one endpoint's `EndpointLimiter` (rate bucket, concurrency pool, its jobs),
  named `itemeval-limiter-<endpoint identity>` so that every driver on a cluster that calls the
  endpoint shares it. Placed on the head node (losing a worker node never takes it along) and
  restartable; one placed elsewhere (by an older version, say) is restarted by Ray on any node
  when its node is lost. A restarted limiter starts with an empty bucket and a frozen pool
  (safe). On a shared cluster it is detached and exits by itself once no job has used it for
  `LIMITER_IDLE_EXIT_S`.
* `BudgetActor`: the run's `SpendLedger`, pinned to the driver's node: it lives exactly as long
  as the run, which also tells orphaned workers that their driver is gone.

Workers find the shared actors by name (a handle in a restartable actor's constructor cannot be
restored: ray#53727), and find them again when a call fails (`ActorLimiterSource`): a limiter
that was restarted answers through the same name; one that is gone for good is created again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import warnings
from dataclasses import dataclass
from typing import Any

import ray

from itemeval._util.heap import limit_malloc_arenas, settle_worker_heap
from itemeval.calls import LedgerReply, LedgerState, SpendLedger
from itemeval.providers import EndpointSettings
from itemeval.providers.limits import EndpointLimiter, EndpointLimits, Grant, endpoint_identity
from itemeval.runtime._cluster import NAMESPACE
from itemeval.runtime._context import RunContext
from itemeval.runtime._shards import Shard, ShardSummary
from itemeval.runtime._worker import ShardRunner

#: A detached limiter that no job has used for this long exits by itself.
LIMITER_IDLE_EXIT_S = 300.0
LIMITER_PREFIX = "itemeval-limiter-"
#: A resource only the head node of a Ray cluster has.
HEAD_RESOURCE = "node:__internal_head__"


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
class LimiterActor:
    """One endpoint's limits for every caller on the cluster (an async actor)."""

    def __init__(self, limits: EndpointLimits, idle_exit_s: float | None):
        with warnings.catch_warnings():  # Ray's own property uses a deprecated API inside
            warnings.simplefilter("ignore")
            restarted = ray.get_runtime_context().was_current_actor_reconstructed
        self._limiter = EndpointLimiter(limits, restarted=restarted)
        self._idle_exit_s = idle_exit_s
        self._watchdog: asyncio.Task[None] | None = None

    async def configure(self, limits: EndpointLimits, job: str) -> str | None:
        """Attach `job`; a text saying why not when it declares other limits."""
        self._watch()
        problem = self._limiter.conflict(limits)
        if problem is None:
            self._limiter.attach(job)
        return problem

    async def touch(self, job: str) -> None:
        self._limiter.touch(job)

    async def detach(self, job: str) -> None:
        self._limiter.detach(job)

    async def exchange(
        self, requests: int, tokens: int, returned_tokens: int = 0, successes: int = 0
    ) -> Grant:
        return self._limiter.exchange(requests, tokens, returned_tokens, successes)

    async def lease(self, holder: str, in_use: int, want: int) -> int:
        return self._limiter.lease(holder, in_use, want)

    async def report_429(self, retry_after_s: float | None) -> None:
        self._limiter.report_429(retry_after_s)

    async def state(self) -> dict[str, Any]:
        return {**self._limiter.state(), "node": ray.get_runtime_context().get_node_id()}

    def _watch(self) -> None:
        if self._idle_exit_s is None or self._watchdog is not None:
            return

        async def watchdog() -> None:
            while True:
                await asyncio.sleep(min(30.0, self._idle_exit_s or 30.0))
                if self._limiter.idle(float(self._idle_exit_s or 0.0)):
                    ray.actor.exit_actor()

        self._watchdog = asyncio.get_running_loop().create_task(watchdog())


@dataclass(frozen=True, slots=True)
class LimiterSpec:
    """How to find (or create again) one endpoint's limiter actor."""

    name: str
    limits: EndpointLimits
    detached: bool

    def get_or_create(self) -> Any:
        # On the head node: Ray places zero-CPU actors on any node by default (and a soft node
        # affinity was measured to be ignored for them), so a worker node's loss could take
        # the limiter along. The head's own resource pins it there, and it is always present.
        options: dict[str, Any] = {
            "name": self.name,
            "namespace": NAMESPACE,
            "get_if_exists": True,
            "resources": {HEAD_RESOURCE: 0.001},
        }
        if self.detached:
            options["lifetime"] = "detached"
        idle = LIMITER_IDLE_EXIT_S if self.detached else None
        # mypy drops a class decorator's type (python/mypy#3135): ray.remote's ActorClass.
        return LimiterActor.options(**options).remote(self.limits, idle)  # type: ignore[attr-defined]


def limiter_name(settings: EndpointSettings) -> str:
    """One limiter per provider endpoint identity (kind, URL, key variable), cluster-wide."""
    return f"{LIMITER_PREFIX}{endpoint_identity(settings)}"


class ActorLimiterSource:
    """Permits and concurrency slots from an endpoint's `LimiterActor` (a `PermitSource` and a
    `SlotSource`): one actor call per batch of permits, per lease change or renewal. When a
    call fails the actor is looked up again by name (or created again) on the next one."""

    def __init__(self, spec: LimiterSpec):
        self._spec = spec
        self._handle: Any = None

    def _actor(self) -> Any:
        if self._handle is None:
            try:
                self._handle = ray.get_actor(self._spec.name, namespace=NAMESPACE)
            except ValueError:  # gone for good (removed by hand, or exited): create it again
                self._handle = self._spec.get_or_create()
        return self._handle

    async def _call(self, method: str, *args: Any) -> Any:
        try:
            return await getattr(self._actor(), method).remote(*args)
        except Exception:
            self._handle = None  # find it again next time (restarted, or recreated)
            raise

    async def grant(
        self, requests: int, tokens: int, returned_tokens: int = 0, successes: int = 0
    ) -> Grant:
        return await self._call("exchange", requests, tokens, returned_tokens, successes)

    async def lease(self, holder: str, in_use: int, want: int) -> int:
        return int(await self._call("lease", holder, in_use, want))

    async def report_429(self, retry_after_s: float | None) -> None:
        await self._call("report_429", retry_after_s)


@ray.remote(num_cpus=0)
class BudgetActor:
    """The run's ledger (single-threaded: an async actor)."""

    def __init__(self, cap: float | None, start: LedgerState | None = None):
        self._ledger = SpendLedger(cap, start)

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
    def __init__(self, context: RunContext, limiters: dict[str, LimiterSpec], budget: str):
        limit_malloc_arenas()  # before the runner's threads take arenas of their own
        sources = {endpoint: ActorLimiterSource(spec) for endpoint, spec in limiters.items()}
        spend = ActorSpendSource(ray.get_actor(budget, namespace=NAMESPACE))
        self._runner = ShardRunner(context, sources, spend, slot_sources=sources)
        settle_worker_heap()

    async def run(self, shard: Shard) -> ShardSummary:
        return await self._runner.run(shard)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._runner.aclose()

    def pid(self) -> int:
        return os.getpid()

    def where(self) -> str:
        """The node this worker runs on (the driver's readiness probe)."""
        return ray.get_runtime_context().get_node_id()
