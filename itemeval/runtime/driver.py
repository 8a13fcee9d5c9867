"""The driver: plan, gate, dispatch, account, and record how the run ended.

    plan (reads only) -> keys -> gate -> pins + items snapshot -> manifest (running)
      -> per stage: shards -> workers, at most `capacity` in flight, within the budget
      -> manifest (completed | interrupted | budget_cap | failed)

It never holds item texts or model outputs: shards carry ids, workers read and write the store.
A shard whose worker died is dispatched again (keys make a repeat harmless). Ctrl-C (or SIGTERM)
stops dispatching, waits briefly for shards in flight (their finished calls are written), records
`interrupted` and exits 130; a second Ctrl-C stops at once. Running the same command again
continues where it stopped.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from itemeval.config import Study, check_keys
from itemeval.errors import ExitCode
from itemeval.estimate import gate
from itemeval.planning import Plan, commit_plan, make_plan
from itemeval.runtime.budget import BudgetTracker
from itemeval.runtime.context import RunContext
from itemeval.runtime.progress import Progress
from itemeval.runtime.shards import (
    Shard,
    ShardSummary,
    generate_shards,
    grade_shards,
    part_runs,
)
from itemeval.secrets import redact
from itemeval.store import (
    ConditionRecord,
    DatasetRecord,
    EstimateRecord,
    RunManifest,
    SpendRecord,
    StageCounts,
    default_cache_url,
    grade_pending,
    write_manifest_end,
    write_manifest_start,
)
from itemeval.store.manifest import host_record

StageName = Literal["generate", "grade"]

#: A shard is dispatched at most this many times (its worker died, the store failed...).
MAX_SHARD_ATTEMPTS = 4
#: After Ctrl-C, how long shards in flight may finish before they are cancelled.
GRACE_S = 10.0
POLL_S = 0.2


@dataclass
class RunOptions:
    stages: tuple[StageName, ...] = ("generate", "grade")
    command: str = "run"
    store_url: str | None = None
    condition: str | None = None
    limit: int | None = None
    force: bool = False
    yes: bool = False
    address: str | None = None
    no_ray: bool = False
    accept_changed: tuple[str, ...] = ()
    quiet: bool = False
    interactive: bool | None = None
    argv: list[str] = field(default_factory=list)


@dataclass
class StageResult:
    counts: StageCounts = field(default_factory=StageCounts)
    errors: Counter[str] = field(default_factory=Counter)
    spend: SpendRecord = field(default_factory=SpendRecord)
    failed_shards: list[str] = field(default_factory=list)
    redispatched: int = 0  # shards dispatched again after their worker or the store failed


@dataclass
class RunOutcome:
    status: str  # completed | interrupted | budget_cap | failed | nothing_to_do
    exit_code: ExitCode
    store_url: str
    run_id: str | None = None
    stages: dict[str, StageResult] = field(default_factory=dict)
    message: str = ""

    @property
    def spent_usd(self) -> float:
        return sum(r.spend.usd for r in self.stages.values())


class Executor(Protocol):
    workers: int

    @property
    def capacity(self) -> int: ...

    def in_flight(self) -> list[Shard]: ...

    def submit(self, shard: Shard) -> None: ...

    def poll(self, timeout: float) -> list[tuple[Shard, ShardSummary | BaseException]]: ...

    def cancel_all(self) -> None: ...

    def close(self) -> None: ...


class _Stop:
    """Set by the first Ctrl-C/SIGTERM; a second Ctrl-C raises KeyboardInterrupt."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True


@contextlib.contextmanager
def _signals(stop: _Stop) -> Iterator[None]:
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread: no handlers
            previous[sig] = signal.signal(sig, stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_study(study: Study, options: RunOptions, *, executor_factory: Any = None) -> RunOutcome:
    """Run the requested stages of `study`; returns how it ended (never raises for cell errors)."""
    progress = Progress(quiet=options.quiet)
    plan = make_plan(
        study,
        store_url=options.store_url,
        limit=options.limit,
        condition=options.condition,
        force=options.force,
        accept_changed=options.accept_changed,
    )
    stages = options.stages
    store_url = plan.store.root.url
    if not _has_work(plan, stages):
        return RunOutcome(
            "nothing_to_do",
            ExitCode.OK,
            store_url,
            message=f"Nothing left to do: every selected cell is stored in {store_url}",
        )
    check_keys(study, _endpoints_for(plan, stages))
    remaining = sum(line.remaining_usd for line in plan.estimate.lines if line.stage in stages)
    approved_by = gate(remaining, study.budget, yes=options.yes, interactive=options.interactive)
    commit_plan(plan)
    manifest = _manifest(plan, options, remaining, approved_by)
    write_manifest_start(plan.store, manifest)
    outcome = RunOutcome("completed", ExitCode.OK, store_url, run_id=manifest.run_id)
    context = _context(plan, manifest.run_id, options)
    stop = _Stop()
    budget = BudgetTracker(study.budget.max_usd)
    error: str | None = None
    try:
        with _signals(stop), _executor(plan, context, options, executor_factory) as executor:
            for stage in stages:
                shards, cells, usd = _shards(plan, stage, first_id=_next_id(outcome))
                progress.begin(stage, cells, usd)
                result = _dispatch(executor, shards, cells, budget, progress, stop)
                outcome.stages[stage] = result
                if stop.requested or budget.capped:
                    break
    except KeyboardInterrupt:
        stop.requested = True
    except BaseException as exc:
        error = redact(f"{type(exc).__name__}: {exc}")
        raise
    finally:
        _finish(outcome, manifest, plan, stop, budget, error)
    return outcome


def _has_work(plan: Plan, stages: tuple[StageName, ...]) -> bool:
    generate = plan.pending_generate.num_rows if plan.pending_generate is not None else 1
    grade = plan.pending_grade.num_rows if plan.pending_grade is not None else 1
    if "generate" in stages and generate:
        return True
    return "grade" in stages and bool(grade or ("generate" in stages and generate))


def _endpoints_for(plan: Plan, stages: tuple[StageName, ...]) -> set[str]:
    names: set[str] = set()
    if "generate" in stages:
        names |= {c.endpoint for c in plan.design.generate}
    if "grade" in stages:
        names |= {c.endpoint for c in plan.design.judges if c.endpoint}
    return names


def _context(plan: Plan, run_id: str, options: RunOptions) -> RunContext:
    study = plan.study
    cache_url = None
    if study.cache.enabled:
        cache_url = study.cache_url or default_cache_url()
    used = {c.endpoint for c in plan.design.generate} | {
        c.endpoint for c in plan.design.judges if c.endpoint
    }
    return RunContext(
        run_id=run_id,
        store_url=plan.store.root.url,
        storage_options=study.storage_options or None,
        endpoints={name: study.endpoints[name] for name in sorted(used)},
        generate=plan.design.generate_by_id(),
        grade=plan.design.grade_by_id(),
        pricing=plan.pricing,
        cache_url=cache_url,
        cache_lookup=not options.force,
    )


@contextlib.contextmanager
def _executor(
    plan: Plan, context: RunContext, options: RunOptions, factory: Any
) -> Iterator[Executor]:
    runtime = plan.study.runtime
    with contextlib.ExitStack() as stack:
        executor: Executor
        if factory is not None:
            executor = factory(context)
        elif options.no_ray:
            from itemeval.runtime.inline_executor import InlineExecutor

            per_worker = runtime.shards_in_flight or 4
            executor = InlineExecutor(_with_shares(context, 1), per_worker=per_worker)
        else:
            from itemeval.runtime.cluster import ray_cluster
            from itemeval.runtime.ray_executor import RayExecutor

            cluster = stack.enter_context(ray_cluster(options.address, quiet=options.quiet))
            workers = runtime.workers or cluster.cpus
            in_flight = runtime.shards_in_flight or 2 * workers
            executor = RayExecutor(
                _with_shares(context, workers),
                workers=workers,
                per_worker=max(1, -(-in_flight // workers)),
                shared_limiters=cluster.shared,
            )
        stack.callback(executor.close)
        yield executor


def _with_shares(context: RunContext, workers: int) -> RunContext:
    """Each worker's share of each endpoint's concurrency (the sum never exceeds the limit
    unless the limit is below the number of workers)."""
    shares = {
        name: max(1, settings.max_concurrency // workers)
        for name, settings in context.endpoints.items()
    }
    return RunContext(**{**context.__dict__, "concurrency": shares})


def _usd_per_cell(plan: Plan) -> dict[str, float]:
    per: dict[str, float] = {}
    for line in plan.estimate.lines:
        per[line.condition_id] = line.usd / line.cells if line.cells else 0.0
    return per


def _shards(plan: Plan, stage: StageName, first_id: int) -> tuple[Iterator[Shard], int, float]:
    """The stage's shards (made lazily, as they are dispatched), its cell count and its
    estimated USD."""
    size = plan.study.runtime.shard_size
    per_cell = _usd_per_cell(plan)
    runs = part_runs(plan.items)
    if stage == "generate":
        pending = plan.pending_generate
        assert pending is not None
        shards = generate_shards(
            pending, runs, shard_size=size, usd_per_cell=per_cell, first_id=first_id
        )
    else:
        # Grade what is stored now (this run's solutions included), for the selected items.
        assert plan.pending_generate is not None
        pending = grade_pending(
            plan.store,
            [c.id for c in plan.design.grade],
            [c.id for c in plan.design.generate],
            plan.pending_generate.item_ids,
            plan.design.epochs,
            force=plan.force,
        )
        shards = grade_shards(
            plan.store,
            pending,
            [c.id for c in plan.design.generate],
            [c.id for c in plan.design.grade],
            runs,
            shard_size=size,
            usd_per_cell=per_cell,
            scorers={c.id for c in plan.design.scorers},
            first_id=first_id,
        )
    cells = pending.num_rows
    usd = sum(
        per_cell.get(key if isinstance(key, str) else key[0], 0.0) * int(mask.sum())
        for key, mask in pending.masks.items()
    )
    return shards, cells, usd


def _next_id(outcome: RunOutcome) -> int:
    return 1_000_000 * len(outcome.stages)


def _dispatch(
    executor: Executor,
    shards: Iterator[Shard],
    cells: int,
    budget: BudgetTracker,
    progress: Progress,
    stop: _Stop,
) -> StageResult:
    result = StageResult()
    result.counts.planned = cells
    retries: deque[Shard] = deque()  # shards to dispatch again go first
    upcoming: Shard | None = next(shards, None)
    while retries or upcoming is not None or executor.in_flight():
        if stop.requested:
            break
        while (retries or upcoming is not None) and len(executor.in_flight()) < executor.capacity:
            shard = retries[0] if retries else upcoming
            assert shard is not None
            if not budget.can_start(shard.est_usd):
                retries.clear()  # the cap: nothing more starts; what is in flight finishes
                upcoming = None
                progress.message(
                    f"budget: stopping dispatch before max_usd ${budget.max_usd:,.2f} would be "
                    f"crossed (spent ${budget.spent:,.2f}, reserved ${budget.reserved:,.2f})"
                )
                break
            if retries:
                retries.popleft()
            else:
                upcoming = next(shards, None)
            budget.start(shard.shard_id, shard.est_usd)
            executor.submit(shard)
        _collect(executor.poll(POLL_S), retries, result, budget, progress)
        progress.tick()
    if stop.requested:
        _drain(executor, result, budget, progress)
    progress.end()
    return result


def _collect(
    finished: list[tuple[Shard, ShardSummary | BaseException]],
    queue: deque[Shard],
    result: StageResult,
    budget: BudgetTracker,
    progress: Progress,
    retry: bool = True,
) -> None:
    for shard, outcome in finished:
        if isinstance(outcome, ShardSummary):
            budget.finish(shard.shard_id, outcome.usd)
            progress.add(outcome)
            _fold(result, outcome)
            continue
        budget.release(shard.shard_id)
        reason = redact(f"{type(outcome).__name__}: {outcome}").splitlines()[0][:300]
        if retry and shard.attempt + 1 < MAX_SHARD_ATTEMPTS:
            progress.message(f"shard {shard.shard_id} failed ({reason}); dispatching it again")
            queue.appendleft(shard.retry())
            result.redispatched += 1
        elif retry:
            result.failed_shards.append(f"shard {shard.shard_id}: {reason}")
            progress.message(f"shard {shard.shard_id} failed {MAX_SHARD_ATTEMPTS} times: {reason}")


def _drain(
    executor: Executor, result: StageResult, budget: BudgetTracker, progress: Progress
) -> None:
    """After a stop request: let shards in flight finish for a while, then cancel them (a
    cancelled shard still writes the calls that finished)."""
    in_flight = len(executor.in_flight())
    if in_flight:
        progress.message(
            f"stopping: waiting up to {GRACE_S:.0f}s for {in_flight} shard(s) in flight "
            "(Ctrl-C again to stop at once)"
        )
    deadline = time.monotonic() + GRACE_S
    ignored: deque[Shard] = deque()
    while executor.in_flight() and time.monotonic() < deadline:
        _collect(executor.poll(POLL_S), ignored, result, budget, progress, retry=False)
    if executor.in_flight():
        executor.cancel_all()
        deadline = time.monotonic() + 5.0
        while executor.in_flight() and time.monotonic() < deadline:
            _collect(executor.poll(POLL_S), ignored, result, budget, progress, retry=False)


def _fold(result: StageResult, summary: ShardSummary) -> None:
    counts, spend = result.counts, result.spend
    counts.done += summary.ok
    counts.errors += summary.error_count
    counts.cached += summary.cached
    counts.parse_failures += sum(summary.parse_failures.values())
    result.errors.update(summary.errors)
    spend.usd += summary.usd
    spend.input_tokens += summary.input_tokens
    spend.output_tokens += summary.output_tokens
    spend.calls += summary.calls
    spend.cache_hits += summary.cached


def _manifest(plan: Plan, options: RunOptions, remaining: float, approved_by: str) -> RunManifest:
    study, design = plan.study, plan.design
    conditions = [
        ConditionRecord(
            id=c.id,
            stage="generate",
            slug=c.slug,
            payload=c.payload,
            requested_params=c.params.as_dict(),
            effective_params=c.params.as_dict(),
        )
        for c in design.generate
    ] + [
        ConditionRecord(
            id=c.id,
            stage="grade",
            slug=c.slug,
            payload=c.payload,
            requested_params=c.params.as_dict() if c.params else {},
            effective_params=c.params.as_dict() if c.params else None,
        )
        for c in design.grade
    ]
    estimate = plan.estimate
    seeds = {c.id: c.params.seed for c in design.generate if c.params.seed is not None}
    return RunManifest(
        study=study.study,
        command=options.command,
        argv=options.argv,
        config_hash=study.content_hash,
        datasets=[
            DatasetRecord(
                name=d.name,
                fingerprint=d.fingerprint,
                revision=d.handle.fingerprint_details().revision,
                source=d.handle.url,
                items=d.items,
            )
            for d in plan.datasets
        ],
        prompt_hashes={c.prompt.name: c.prompt.sha256 for c in design.generate},
        rubric_hashes={c.rubric.name: c.rubric.sha256 for c in design.judges if c.rubric},
        models=sorted({c.model_id for c in design.generate} | {c.label for c in design.judges}),
        conditions=conditions,
        seeds=seeds,
        estimate=EstimateRecord(
            usd=round(remaining, 6),
            input_tokens=sum(line.remaining_input_tokens for line in estimate.lines),
            output_tokens=sum(line.remaining_output_tokens for line in estimate.lines),
            cells=sum(line.remaining_cells for line in estimate.lines),
            approved_by=approved_by,
            by_stage=estimate.by("stage"),
        ),
        host=host_record(options.address),
    )


def _finish(
    outcome: RunOutcome,
    manifest: RunManifest,
    plan: Plan,
    stop: _Stop,
    budget: BudgetTracker,
    error: str | None,
) -> None:
    failed = [f for r in outcome.stages.values() for f in r.failed_shards]
    cell_errors = sum(r.counts.errors for r in outcome.stages.values())
    if error is not None:
        outcome.status, outcome.exit_code = "failed", ExitCode.CELL_ERRORS
    elif stop.requested:
        outcome.status, outcome.exit_code = "interrupted", ExitCode.INTERRUPTED
    elif budget.capped:
        outcome.status, outcome.exit_code = "budget_cap", ExitCode.BUDGET_CAP
    elif failed:
        outcome.status, outcome.exit_code = "failed", ExitCode.CELL_ERRORS
        error = "; ".join(failed[:5])
    elif cell_errors:
        outcome.exit_code = ExitCode.CELL_ERRORS
    spend = SpendRecord()
    for result in outcome.stages.values():
        for name in ("usd", "input_tokens", "output_tokens", "calls", "cache_hits"):
            setattr(spend, name, getattr(spend, name) + getattr(result.spend, name))
    ended = manifest.model_copy(
        update={
            "spend": spend,
            "counts": {stage: r.counts for stage, r in outcome.stages.items()},
        }
    ).finished(outcome.status if outcome.status != "nothing_to_do" else "completed", error=error)
    write_manifest_end(plan.store, ended)
    outcome.message = _summary_line(outcome, plan)


def _summary_line(outcome: RunOutcome, plan: Plan) -> str:
    parts = []
    for stage, result in outcome.stages.items():
        c = result.counts
        text = f"{stage}: {c.done:,} ok"
        if c.errors:
            text += (
                f", {c.errors:,} errors ("
                + ", ".join(f"{k} {v}" for k, v in result.errors.most_common())
                + ")"
            )
        if c.cached:
            text += f", {c.cached:,} from cache"
        if c.parse_failures:
            text += f", {c.parse_failures:,} judge parse failures"
        parts.append(text)
    how = {
        "completed": "Done",
        "interrupted": "Interrupted (run the same command again to continue)",
        "budget_cap": "Stopped at the budget cap (budget.max_usd)",
        "failed": "Failed",
    }[outcome.status]
    return (
        f"{how}. "
        + "; ".join(parts)
        + f"; spent ${outcome.spent_usd:,.4f}. Store: {outcome.store_url}"
    )
