"""`RayExecutor`: shards to worker actors, and what it takes to survive losing some of them.

The actors themselves are in `actors.py`. This module keeps the driver's view:

* which workers are alive. A shard whose worker died comes back as `WorkerLost` (dispatch sends
  it to another worker at once, without counting it against the shard); the dead worker leaves
  dispatch until a probe (`pid()`) answers, which happens once Ray has restarted it, on its node
  or on another with room. So a lost node costs time, not the run, and a restarted worker gets
  work again;
* the endpoints' limiters: created (or found: another driver on the cluster may use them) and
  attached to at the start, with a clear error when this study declares other limits than the
  running limiter; touched while the run lasts; detached at the end. A limiter that does not
  answer is reported in the progress line;
* the run's `BudgetActor`, pinned to the driver's node;
* how many workers there are. With `max_workers` set (`runtime.workers`), that many actors are
  created at once: those the cluster has no room for wait in Ray's queue, which is what makes an
  autoscaler add nodes (it is also asked directly, with `request_resources`), and each starts
  work when it is placed. Without it the workers follow the cluster: one per CPU, more as nodes
  join; when nodes leave, workers that lost their place are retired rather than left waiting.
  A worker gets shards only once it has answered (`where()`), so none wait in an actor's queue.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError, TaskCancelledError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from itemeval.calls import LedgerState
from itemeval.errors import ConfigError, Problem
from itemeval.providers.limits import endpoint_limits
from itemeval.runtime._actors import (
    ActorSpendSource,
    BudgetActor,
    LimiterSpec,
    WorkerActor,
    limiter_name,
)
from itemeval.runtime._cluster import NAMESPACE
from itemeval.runtime._context import RunContext
from itemeval.runtime._dispatch import WorkerLost
from itemeval.runtime._shards import Shard, ShardSummary

#: A limiter that has not answered a touch for this long is reported as not answering.
LIMITER_SILENT_S = 5.0
#: How often the driver touches the limiters it uses (they forget a job after 60 s).
TOUCH_EVERY_S = 10.0
#: How often a worker that is down is probed again after a failed probe.
PROBE_EVERY_S = 1.0
#: How often the cluster's size is read to follow it with workers.
SCALE_EVERY_S = 2.0
#: A worker not placed this long after it was created was waiting for room (starting takes 1-2 s).
WAITED_S = 5.0


@dataclass
class _Task:
    shard: Shard
    worker: int


@dataclass
class _Worker:
    actor: Any
    number: int
    load: int = 0
    ready: bool = False  # it answered once: placed on a node and started
    node: str | None = None
    down_since: float | None = None
    probe: Any = None  # an outstanding where() call (starting, or down)
    probe_at: float = 0.0
    retired: bool = False
    created_at: float = field(default_factory=time.monotonic)
    joined: bool = False  # created when the cluster grew (said when it starts)


@dataclass
class _Limiter:
    endpoint: str
    handle: Any
    touch: Any = None  # an outstanding touch() call
    touched_at: float = field(default_factory=time.monotonic)


class RayExecutor:
    """Runs shards on worker actors, at most `per_worker` at a time on each: `workers` of them,
    or one per CPU of the cluster as it grows and shrinks when `workers` is None."""

    def __init__(
        self,
        context: RunContext,
        *,
        workers: int | None,
        per_worker: int,
        shared_limiters: bool,
        budget_cap: float | None = None,
        ledger_start: LedgerState | None = None,
        autoscale: bool = False,
    ):
        """`ledger_start`: the run's ledger so far, when it moves from the driver's process to
        this executor's `BudgetActor` (a local run whose Ray workers join it). `autoscale`: ask
        the cluster's autoscaler for a CPU per worker (a cluster that outlives this driver)."""
        self.max_workers = workers
        self.per_worker = per_worker
        self.notes: list[str] = []  # what changed among the workers, not yet said
        self.told: list[str] = []  # ... and said
        here = ray.get_runtime_context().get_node_id()
        self._job = ray.get_runtime_context().get_job_id()
        # A Ray of this machine's own (not a cluster named by address): its workers hold the
        # limits with every other run on the machine, through the machine's limiter files
        # (`context.limits_dir`), not actors that only this Ray's callers would see.
        specs = {
            name: LimiterSpec(
                name=limiter_name(settings),
                limits=endpoint_limits(settings),
                detached=shared_limiters,
            )
            for name, settings in context.endpoints.items()
            if context.limits_dir is None
        }
        self.limiter_specs = specs
        self._limiters = self._attach(specs)
        budget_name = f"itemeval-budget-{context.run_id}"
        # mypy drops a class decorator's type (python/mypy#3135): ray.remote's ActorClass.
        self._budget = BudgetActor.options(  # type: ignore[attr-defined]
            name=budget_name,
            namespace=NAMESPACE,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False),
        ).remote(budget_cap, ledger_start)
        self._worker_args = (context, specs, budget_name)
        self._workers: list[_Worker] = []
        self._tasks: dict[Any, _Task] = {}
        self._scaled_at = time.monotonic()
        self._requested = 0  # CPUs asked of the autoscaler
        self._autoscale = autoscale
        self._scale_to(workers if workers is not None else _cluster_cpus())

    def _attach(self, specs: dict[str, LimiterSpec]) -> list[_Limiter]:
        """Find or create each endpoint's limiter and attach this job to it; refuse limits that
        differ from the ones a running limiter holds (another job declared them)."""
        limiters, problems = [], []
        for endpoint, spec in specs.items():
            handle = spec.get_or_create()
            conflict = ray.get(handle.configure.remote(spec.limits, self._job), timeout=60)
            if conflict:
                problems.append(
                    Problem(
                        conflict,
                        field=f"endpoints.{endpoint}",
                        hint="declare the same limits as the running job, or wait for it to "
                        f"end, or remove the limiter: itemeval limiters --remove {spec.name}",
                    )
                )
            limiters.append(_Limiter(endpoint, handle))
        if problems:
            raise ConfigError(problems)
        return limiters

    # -- the fleet -----------------------------------------------------------------------
    @property
    def workers(self) -> int:
        """Workers that can take shards now."""
        return len(self.live)

    def _scale_to(self, target: int) -> None:
        """Create workers up to `target`; retire those beyond it that hold no place."""
        target = max(1, target)
        active = [w for w in self._workers if not w.retired]
        grown = bool(self._workers)  # the first workers are the run's; later ones joined
        for _ in range(target - len(active)):
            context, specs, budget = self._worker_args
            actor = WorkerActor.options(  # type: ignore[attr-defined]  # python/mypy#3135
                max_concurrency=self.per_worker + 1
            ).remote(context, specs, budget)
            worker = _Worker(actor, number=len(self._workers), joined=grown)
            worker.probe = actor.where.remote()
            self._workers.append(worker)
        surplus = len(active) - target
        for worker in reversed(active):
            if surplus <= 0:
                break
            if worker.ready and worker.down_since is None:
                continue  # it holds a CPU the cluster has
            worker.retired = True
            surplus -= 1
            with contextlib.suppress(RayError):
                ray.kill(worker.actor, no_restart=True)
            self.notes.append(f"worker {worker.number} retired: the cluster has no room for it")
        if self._autoscale and target != self._requested:
            from ray.autoscaler.sdk import request_resources

            with contextlib.suppress(Exception):  # a hint; a cluster without autoscaler ignores it
                request_resources(bundles=[{"CPU": 1}] * target)
                self._requested = target

    def _follow_cluster(self) -> None:
        """Every `SCALE_EVERY_S`: one worker per CPU of the cluster (when not fixed)."""
        now = time.monotonic()
        if self.max_workers is not None or now - self._scaled_at < SCALE_EVERY_S:
            return
        self._scaled_at = now
        with contextlib.suppress(RayError):
            self._scale_to(_cluster_cpus())

    @property
    def live(self) -> list[int]:
        return [
            i
            for i, w in enumerate(self._workers)
            if w.ready and w.down_since is None and not w.retired
        ]

    @property
    def capacity(self) -> int:
        return len(self.live) * self.per_worker

    def in_flight(self) -> list[Shard]:
        return [task.shard for task in self._tasks.values()]

    def submit(self, shard: Shard) -> None:
        live = self.live
        if not live:
            raise RuntimeError("no live worker to submit to (check capacity first)")
        index = min(live, key=lambda i: self._workers[i].load)
        ref = self._workers[index].actor.run.remote(shard)
        self._tasks[ref] = _Task(shard, index)
        self._workers[index].load += 1

    # -- results -------------------------------------------------------------------------
    def poll(self, timeout: float) -> list[tuple[Shard, ShardSummary | BaseException]]:
        """Shards that finished within `timeout` seconds (a summary, or why they failed)."""
        self._follow_cluster()
        self._probe_workers()
        if not self._tasks:
            time.sleep(min(timeout, 0.05))
            return []
        ready, _ = ray.wait(list(self._tasks), num_returns=len(self._tasks), timeout=timeout)
        done: list[tuple[Shard, ShardSummary | BaseException]] = []
        for ref in ready:
            task = self._tasks.pop(ref)
            worker = self._workers[task.worker]
            worker.load -= 1
            try:
                done.append((task.shard, ray.get(ref)))
            except RayActorError as exc:  # the worker process (or its node) died
                self._mark_down(task.worker)
                done.append((task.shard, WorkerLost(f"worker {task.worker}: {exc}")))
            except (RayError, TaskCancelledError) as exc:
                done.append((task.shard, exc))
        return done

    def _mark_down(self, index: int) -> None:
        worker = self._workers[index]
        if worker.down_since is None:
            worker.down_since = time.monotonic()
            worker.probe, worker.probe_at = None, 0.0

    def _probe_workers(self) -> None:
        """A starting worker is ready when its probe answers (it was placed and started); a
        worker that is down comes back when its probe answers (Ray restarted it)."""
        now = time.monotonic()
        for worker in self._workers:
            if worker.retired or (worker.ready and worker.down_since is None):
                continue
            if worker.probe is None:
                if now >= worker.probe_at:
                    worker.probe = worker.actor.where.remote()
                continue
            ready, _ = ray.wait([worker.probe], timeout=0)
            if not ready:
                continue
            try:
                node = ray.get(worker.probe)
            except RayError:
                worker.probe, worker.probe_at = None, now + PROBE_EVERY_S
                continue
            # Said of a worker that joined, waited for room, or was restarted on another node.
            waited = not worker.ready and now - worker.created_at > WAITED_S
            moved = worker.ready and node != worker.node
            if (worker.joined and not worker.ready) or waited or moved:
                self.notes.append(f"worker {worker.number} started on node {node[:12]}")
            worker.ready, worker.node = True, node
            worker.down_since, worker.probe = None, None

    def cancel_all(self) -> None:
        for ref in list(self._tasks):
            ray.cancel(ref)

    # -- health and money ----------------------------------------------------------------
    def health(self) -> list[str]:
        now = time.monotonic()
        problems = []
        active = [w for w in self._workers if not w.retired]
        down = [w for w in active if w.down_since is not None]
        if down:
            longest = max(now - (w.down_since or now) for w in down)
            problems.append(
                f"workers: {len(down)} of {len(active)} down for up to {longest:.0f} s "
                "(Ray restarts them where there is room; their shards went to the others)"
            )
        # Starting takes a second or two; a worker not ready after that is still starting (a
        # busy machine) when the cluster has a CPU for it, else it waits for room.
        waiting = [w for w in active if not w.ready and now - w.created_at > WAITED_S]
        if waiting:
            problems.append(self._not_ready(len(waiting)))
        problems.extend(self.notes)  # said once each (then only in the run's summary)
        self.told.extend(self.notes)
        self.notes.clear()
        for limiter in self._limiters:
            if limiter.touch is not None:
                ready, _ = ray.wait([limiter.touch], timeout=0)
                if ready:
                    with contextlib.suppress(RayError):
                        ray.get(limiter.touch)
                        limiter.touched_at = now
                    limiter.touch = None
            if limiter.touch is None and now - limiter.touched_at >= TOUCH_EVERY_S:
                limiter.touch = limiter.handle.touch.remote(self._job)
            silent = now - limiter.touched_at
            if limiter.touch is not None and silent >= TOUCH_EVERY_S + LIMITER_SILENT_S:
                problems.append(
                    f"limiter of endpoint {limiter.endpoint}: not answering for "
                    f"{silent - TOUCH_EVERY_S:.0f} s (restarting?); its calls wait for it"
                )
        return problems

    def _not_ready(self, waiting: int) -> str:
        """What the workers not ready yet are doing: starting (the cluster has a CPU for each
        of this run's workers) or waiting for room (it has not)."""
        ready = len(self.live)
        cpus = ready + waiting  # unknown: assume there is room
        with contextlib.suppress(RayError):
            cpus = _cluster_cpus()
        starting = min(waiting, max(0, cpus - ready))
        said = [f"{starting} starting"] if starting else []
        if waiting > starting:
            said.append(f"{waiting - starting} waiting for room")
        asked = f"; asked the autoscaler for {self._requested} CPUs" if self._requested else ""
        return f"cluster: {ready} worker(s) ready, {', '.join(said)}{asked}"

    def lease_for(self, holder: str, in_use: dict[str, int]) -> None:
        """Hold `in_use` slots of each endpoint's pool for `holder` (the driver's own runner
        while it finishes its shards beside the workers): never more than the limit in sum."""
        refs = [
            limiter.handle.lease.remote(
                holder, in_use.get(limiter.endpoint, 0), in_use.get(limiter.endpoint, 0)
            )
            for limiter in self._limiters
        ]
        with contextlib.suppress(RayError, GetTimeoutError):
            ray.get(refs, timeout=10)

    @property
    def budget(self) -> Any:
        """The run's `BudgetActor`."""
        return self._budget

    def spend(self) -> LedgerState:
        """The run's ledger: what every worker reported spending, and reservations in flight."""
        return ray.get(self._budget.state.remote(), timeout=30)

    def spend_source(self) -> ActorSpendSource:
        """The run's ledger for the driver's own calls (the batch tier's reservations)."""
        return ActorSpendSource(self._budget)

    def worker_pids(self) -> list[int]:
        """The process ids of the workers (waiting until each has started)."""
        active = [w.actor for w in self._workers if not w.retired]
        return ray.get([actor.pid.remote() for actor in active], timeout=60)

    def close(self) -> None:
        if self._requested:
            from ray.autoscaler.sdk import request_resources

            with contextlib.suppress(Exception):
                request_resources(num_cpus=0)  # the request outlives the job otherwise
        live = [self._workers[i].actor for i in self.live]
        with contextlib.suppress(RayError, GetTimeoutError):
            ray.get([actor.close.remote() for actor in live], timeout=10)
        with contextlib.suppress(RayError, GetTimeoutError):
            ray.get([lim.handle.detach.remote(self._job) for lim in self._limiters], timeout=5)
        for worker in self._workers:
            with contextlib.suppress(RayError):
                ray.kill(worker.actor)
        with contextlib.suppress(RayError):
            ray.kill(self._budget)


def _cluster_cpus() -> int:
    """CPUs of the cluster's live nodes now."""
    return int(ray.cluster_resources().get("CPU", 0))
