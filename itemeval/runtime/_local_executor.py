"""`LocalExecutor`: a run on this machine serves its first shards at once, in its own process,
and brings up Ray workers only when they would help.

Measured on a 2-core machine (issue 14): Ray's start-up took 3 to 8 s before the first request,
its daemons cost more CPU than the calls, and a 20,000-item run was faster in one process. So a
local run starts with the driver's own runner (`InlineExecutor`, the same `ShardRunner` the Ray
workers run). Ray is started, and its workers join, when

* `runtime.local_ray: always`: as soon as a shard waits for a place (the first shards still run
  here while Ray comes up). A study whose shards all fit here at once never waits, and Ray,
  which would get none of them, is not started: on a 2-core machine its start and stop cost a
  2,000-item run 6-7 s after its last row (issue 14); or
* `auto` (the default): after `WATCH_S` of work, if this process is CPU-bound (its CPU time
  over `BUSY_SHARE` of the wall time), the machine has more than two CPUs (more processes can
  run), and the work left at the rate so far would take longer than `RAY_AFTER_S`.

When Ray starts, the money moves to the shared actor: the run's ledger moves from this process
to the run's `BudgetActor` (reservations in flight included). The limits need not move: the
in-process runner and Ray's workers all hold them through the machine's limiter
(`providers/limits/_machine.py`, `RunContext.limits_dir`), together with every other run on the
machine. (A context without `limits_dir` keeps the older way: the in-process runner draws its
rate permits from the endpoints' limiter actors from then on, and holds the concurrency slots
its calls use as a lease in their pools until it has finished its shards.) New shards go to the
Ray workers only.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from itemeval.calls import LedgerState
from itemeval.runtime._context import RunContext
from itemeval.runtime._inline_executor import InlineExecutor
from itemeval.runtime._shards import Shard, ShardSummary
from itemeval.runtime._timeline import TIMELINE

#: How long a local run works in its own process before it decides about Ray.
WATCH_S = 3.0
#: The share of wall time this process must spend on a CPU to count as CPU-bound.
BUSY_SHARE = 0.85
#: Ray is worth starting when the work left would take at least this long at the rate so far.
RAY_AFTER_S = 30.0
#: The holder name of the in-process runner's concurrency in the endpoints' pools.
INLINE_HOLDER = "driver-runner"


class LocalExecutor:
    """The in-process runner now, Ray workers later if they would help (see the module doc)."""

    def __init__(
        self,
        context: RunContext,
        *,
        per_worker: int,
        budget_cap: float | None,
        mode: str = "auto",
        workers: int | None = None,
        shards_in_flight: int | None = None,
        quiet: bool = False,
    ):
        self.inline = InlineExecutor(context, per_worker=per_worker, budget_cap=budget_cap)
        self.ray: Any = None
        self.mode = mode
        self.workers = 1
        self._context = context
        self._budget_cap = budget_cap
        self._ray_workers = workers
        self._shards_in_flight = shards_in_flight
        self._quiet = quiet
        self._cluster: contextlib.ExitStack | None = None
        self._started_at: float | None = None
        self._cpu_at = 0.0
        self._decided = mode == "never"
        self._done = 0
        self._total = 0
        self._waiting = False  # a shard waits for a place in the executor
        self.notes: list[str] = []
        self._leased_at: float | None = None
        self.in_process = 0  # shards run by this process's runner
        self.on_ray = 0  # shards run by Ray workers

    # -- the executor interface -----------------------------------------------------------
    @property
    def capacity(self) -> int:
        return self.ray.capacity if self.ray is not None else self.inline.capacity

    def in_flight(self) -> list[Shard]:
        ray_shards = self.ray.in_flight() if self.ray is not None else []
        return self.inline.in_flight() + ray_shards

    def submit(self, shard: Shard) -> None:
        if self._started_at is None:
            self._started_at, self._cpu_at = time.monotonic(), time.process_time()
        if self.ray is not None:
            self.ray.submit(shard)
            self.on_ray += 1
        else:
            self.inline.submit(shard)
            self.in_process += 1

    def poll(self, timeout: float) -> list[tuple[Shard, ShardSummary | BaseException]]:
        self._maybe_start_ray()
        if self.ray is None:
            return self.inline.poll(timeout)
        done = self.inline.poll(0.0) if self.inline.in_flight() else []
        self._lease_inline_slots()
        return done + self.ray.poll(timeout if not done else 0.0)

    def progress(self, done: int, total: int, *, waiting: bool = False) -> None:
        """What dispatch knows: cells done and cells of the stage, and whether a shard waits for
        a place (for the decision)."""
        self._done, self._total, self._waiting = done, total, waiting

    def cancel_all(self) -> None:
        self.inline.cancel_all()
        if self.ray is not None:
            self.ray.cancel_all()

    def spend(self) -> LedgerState:
        return self.ray.spend() if self.ray is not None else self.inline.spend()

    def spend_source(self) -> Any:
        """The run's ledger for the driver's own calls (the batch tier). Ray's if its workers
        have joined; else this process's, and then Ray stays out for the rest of the run: a
        ledger handed over while the batch tier holds the old one would count twice."""
        if self.ray is not None:
            return self.ray.spend_source()
        if not self._decided:
            self._decided = True
            self.notes.append("Ray stayed out: the batch tier shares this process's ledger")
        return self.inline.spend_source()

    def health(self) -> list[str]:
        return self.ray.health() if self.ray is not None else []

    def summary(self) -> str:
        """Where the shards ran, for the run's summary."""
        if self.ray is None:
            why = "; ".join(self.notes) or (
                "runtime.local_ray: always, but no shard waited for a place, so Ray was not started"
                if self.mode == "always"
                else "Ray was not needed"
            )
            return f"{self.in_process:,} shard(s) ran in this process ({why})"
        return (
            f"{self.in_process:,} shard(s) ran in this process, {self.on_ray:,} on Ray workers: "
            + "; ".join(self.notes)
        )

    def close(self) -> None:
        try:
            self.inline.close()
            if self.ray is not None:
                self.ray.close()
        finally:
            if self._cluster is not None:
                self._cluster.close()

    # -- Ray, when it helps ---------------------------------------------------------------
    def _lease_inline_slots(self) -> None:
        """Hold what the in-process runner's calls use in the endpoints' pools (every second,
        until it has finished its shards, then nothing)."""
        now = time.monotonic()
        if self._leased_at is None or now - self._leased_at < 1.0:
            return
        in_use = self.inline.slots_in_use() if self.inline.in_flight() else {}
        self.ray.lease_for(INLINE_HOLDER, in_use)
        self._leased_at = None if not in_use else now

    def _maybe_start_ray(self) -> None:
        if self._decided or self.ray is not None:
            return
        if self.mode == "always":
            if self._waiting:  # Ray's workers would get the shards that wait, and new ones
                self._decided = True
                self._start_ray("runtime.local_ray: always")
            return
        if self._started_at is None:
            return
        elapsed = time.monotonic() - self._started_at
        if elapsed < WATCH_S:
            return
        self._decided = True  # one look: a run either needs more processes or it does not
        busy = (time.process_time() - self._cpu_at) / elapsed
        cpus = os.cpu_count() or 1
        rate = self._done / elapsed if self._done else 0.0
        left_s = (self._total - self._done) / rate if rate else float("inf")
        if busy >= BUSY_SHARE and cpus > 2 and left_s >= RAY_AFTER_S:
            self._start_ray(
                f"this process is CPU-bound ({busy:.0%}) with about {left_s:.0f} s of work left"
            )

    def _start_ray(self, why: str) -> None:
        from itemeval.runtime._cluster import ray_cluster

        stack = contextlib.ExitStack()
        cluster = stack.enter_context(ray_cluster(None, quiet=self._quiet))
        self._cluster = stack
        from itemeval.runtime._ray_executor import RayExecutor  # imports ray: after its setup

        workers = self._ray_workers or max(1, cluster.cpus - 1)
        in_flight = self._shards_in_flight or 2 * workers
        context = self._context

        def make_source(state: LedgerState) -> Any:
            from itemeval.runtime._actors import ActorSpendSource

            self.ray = RayExecutor(
                context,
                workers=workers,
                per_worker=max(1, -(-in_flight // workers)),
                shared_limiters=False,
                budget_cap=self._budget_cap,
                ledger_start=state,
            )
            return ActorSpendSource(self.ray.budget)

        self.inline.hand_ledger_over(make_source, lambda: self.ray.spend())
        if self.ray.limiter_specs:  # limits in the Ray's actors, not the machine's limiter
            # Before any worker leases slots: the runner's calls keep theirs, in the pools.
            self.ray.lease_for(INLINE_HOLDER, self.inline.slots_in_use())
            self._leased_at = time.monotonic()
            from itemeval.runtime._actors import ActorLimiterSource

            self.inline.share_limits(
                {name: ActorLimiterSource(spec) for name, spec in self.ray.limiter_specs.items()}
            )
        self.notes.append(f"Ray workers joined ({workers}): {why}")
        TIMELINE.mark("Ray workers joined")
