"""Where a run's shards run: the run's context for its workers, and the executor that serves them
(in this process, on this machine's local Ray, or on a Ray cluster), with each worker's share of
the endpoints' concurrency and, on this machine, the machine's limiters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from itemeval.planning import Plan
from itemeval.runtime._context import RunContext
from itemeval.runtime._dispatch import Executor
from itemeval.store import STUDY_CACHE_DIR, default_cache_url

if TYPE_CHECKING:
    from itemeval.runtime._driver import RunOptions


def run_context(plan: Plan, run_id: str, options: RunOptions, *, capped: bool) -> RunContext:
    """What every worker of the run needs: endpoints, conditions, pricing, store and cache."""
    study = plan.study
    if study.cache.enabled:
        cache_url = study.cache_url or default_cache_url()
    else:
        # No answers from other studies, but paid answers must still be durable: the study's
        # own journal in its store answers only its own calls.
        cache_url = plan.store.root.join(STUDY_CACHE_DIR).url
    storage = study.options_by_url(plan.store.root.url)  # workers open store and cache alike
    used = {c.endpoint for c in plan.design.generate} | {
        c.endpoint for c in plan.design.judges if c.endpoint
    }
    return RunContext(
        run_id=run_id,
        store_url=plan.store.root.url,
        storage_options=storage.for_url(plan.store.root.url),
        endpoints={name: study.endpoints[name] for name in sorted(used)},
        generate=plan.design.generate_by_id(),
        grade=plan.design.grade_by_id(),
        pricing=plan.pricing,
        cache_url=cache_url,
        cache_storage_options=storage.for_url(cache_url),
        reuse_since=datetime.now(UTC) if options.force else None,
        cache_indexed_before=run_id,
        capped=capped,
        score_inline=(
            tuple(c.id for c in plan.design.scorers)
            if "grade" in options.stages and not options.force
            else ()
        ),
    )


@contextlib.contextmanager
def open_executor(
    plan: Plan, context: RunContext, options: RunOptions, factory: Any, budget_cap: float | None
) -> Iterator[Executor]:
    """The executor of the run: `factory` when given, in this process (`--no-ray`), on a Ray
    cluster (`--address`, `RAY_ADDRESS`, or a Ray this process started), else this machine's
    `LocalExecutor`; closed on leaving."""
    runtime = plan.study.runtime
    with contextlib.ExitStack() as stack:
        executor: Executor
        if factory is not None:
            executor = factory(context)
        elif options.no_ray:
            from itemeval.runtime._inline_executor import InlineExecutor

            per_worker = runtime.shards_in_flight or 4
            executor = InlineExecutor(
                _on_this_machine(with_shares(context, 1), stack),
                per_worker=per_worker,
                budget_cap=budget_cap,
            )
        elif options.address or os.environ.get("RAY_ADDRESS") or _ray_already_up(runtime):
            from itemeval.runtime._cluster import ray_cluster

            cluster = stack.enter_context(ray_cluster(options.address, quiet=options.quiet))
            from itemeval.runtime._ray_executor import RayExecutor  # imports ray: after its setup

            # Without runtime.workers the workers follow the cluster: one per CPU as it grows.
            workers = runtime.workers or cluster.cpus
            in_flight = runtime.shards_in_flight or 2 * workers
            shares = with_shares(context, 1)  # concurrency is leased from the endpoint's pool
            executor = RayExecutor(
                shares if cluster.shared else _on_this_machine(shares, stack),
                workers=runtime.workers,
                per_worker=max(1, -(-in_flight // workers)),
                shared_limiters=cluster.shared,
                budget_cap=budget_cap,
                autoscale=cluster.shared and runtime.workers is not None,
            )
        else:
            from itemeval.runtime._local_executor import LocalExecutor

            executor = LocalExecutor(
                _on_this_machine(with_shares(context, 1), stack),
                per_worker=runtime.shards_in_flight or 4,
                budget_cap=budget_cap,
                mode=runtime.local_ray,
                workers=runtime.workers,
                shards_in_flight=runtime.shards_in_flight,
                quiet=options.quiet,
            )
        stack.callback(executor.close)
        yield executor


def _on_this_machine(context: RunContext, stack: contextlib.ExitStack) -> RunContext:
    """A run on this machine (in this process or a local Ray of its own) holds its endpoints'
    limits together with every other run on the machine (`providers/limits/_machine.py`)."""
    from itemeval.providers.limits import attached, limits_dir

    directory = str(limits_dir())
    stack.enter_context(attached(context.endpoints, directory))
    return dataclasses.replace(context, limits_dir=directory)


def _ray_already_up(runtime: Any) -> bool:
    """This process called `ray.init` itself (a notebook, a script on a cluster): under
    `local_ray: auto` the run uses that Ray rather than starting in-process."""
    ray = sys.modules.get("ray")
    return runtime.local_ray == "auto" and ray is not None and ray.is_initialized()


def with_shares(context: RunContext, workers: int) -> RunContext:
    """Each worker's share of each endpoint's concurrency (the sum never exceeds the limit
    unless the limit is below the number of workers)."""
    shares = {
        name: max(1, settings.max_concurrency // workers)
        for name, settings in context.endpoints.items()
    }
    return RunContext(**{**context.__dict__, "concurrency": shares})
