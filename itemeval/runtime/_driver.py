# One piece: a run's life, plan to manifest, reads top to bottom in `_run`; the helpers below
# share its plan and outcome (dispatch, compaction and the batch tier have their own modules).
"""The driver: plan, gate, dispatch, account, and record how the run ended.

    plan (reads only) -> keys -> gate -> pins + items snapshot -> manifest (running)
      -> per stage: shards -> workers, at most `capacity` in flight, within the budget
      -> manifest (completed | interrupted | budget_cap | failed)

It never holds item texts or model outputs: shards carry ids, workers read and write the store.
Dispatch (`dispatch.py`) sends a shard whose worker died again (keys make a repeat harmless, and
its paid answers come back from the response cache). Ctrl-C (or SIGTERM) stops dispatching, waits
briefly for shards in flight (their finished calls are written), records `interrupted` and exits
130; a second Ctrl-C stops at once. Running the same command again continues where it stopped.

Money: the ledger (`calls/_spend.py`) holds `budget.max_usd` as a hard cap (every call reserves
its worst case first) and counts every dollar paid, so the manifest's spend includes shards that
failed after paying.

The batch tier (`runtime/batch/`): per stage, `BatchTier.open` takes the cells of conditions
whose endpoint has `batch.enabled`, and those that open batch records hold, and runs their
batches in a thread beside the live dispatch of the rest; `finish` waits for them and dispatches
what they left (deadline, failures) live. A run also starts when only open batches are left, to
collect them.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from itemeval._util.heap import release_unused_memory, run_collector_pace
from itemeval.calls import Allowance, LedgerState, run_allowance, study_spent
from itemeval.config import StudyConfig, check_keys
from itemeval.errors import ExitCode, StoreFailedMidRun
from itemeval.planning import (
    Plan,
    check_cap_bounds,
    commit_plan,
    gate,
    keep_item_tables,
    make_plan,
    restrict_plan,
)
from itemeval.providers import EndpointProbe
from itemeval.runtime._compaction import RunCompaction
from itemeval.runtime._context import RunContext
from itemeval.runtime._dispatch import (
    Cap,
    Executor,
    RowCost,
    StageResult,
    Stop,
    count_unreported_rows,
    dispatch,
)
from itemeval.runtime._executors import open_executor, run_context
from itemeval.runtime._failures import failed_mid_run
from itemeval.runtime._progress import Progress
from itemeval.runtime._shards import Barrier, Shard, ShardSummary, generate_shards, grade_shards
from itemeval.runtime._timeline import TIMELINE
from itemeval.runtime.batch import BatchTier, open_batches_of
from itemeval.secrets import redact
from itemeval.store import (
    GRADES,
    SOLUTIONS,
    CellMasks,
    CompactionRecord,
    ConditionRecord,
    DatasetRecord,
    EstimateRecord,
    RunManifest,
    SpendRecord,
    host_record,
    pending_grade,
    write_manifest_end,
    write_manifest_start,
)

StageName = Literal["generate", "grade"]


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
    #: Run a pilot first: the first N items of each dataset (N >= 1), or that share of them
    #: (0 < N < 1); then estimate the rest from what it stored and ask the gate again.
    pilot: float | None = None
    #: Set for the run after a pilot: the gate asks whatever its threshold, with this text.
    ask_again: str | None = None
    #: What this command spent before this run (the pilot): max_usd is the command's allowance.
    spent_before: float = 0.0
    #: Generate conditions narrowed to these item ids (`planning.restrict_plan`): an adaptive
    #: run's rounds. Other conditions run whole.
    only_items: Mapping[str, Collection[str]] | None = None
    #: False: models with `adaptive:` run every item like the others (`run --no-adaptive`).
    adaptive: bool = True


@dataclass
class RunOutcome:
    status: Literal["completed", "interrupted", "budget_cap", "failed", "nothing_to_do"]
    exit_code: ExitCode
    store_url: str
    run_id: str | None = None
    stages: dict[str, StageResult] = field(default_factory=dict)
    message: str = ""
    ledger: LedgerState | None = None  # the run's ledger at the end (None: nothing ran)
    cache_url: str | None = None  # the response cache the run used
    executor_note: str = ""  # where the shards ran (a local run: this process, Ray workers)
    allowance: Allowance | None = None  # what the run could spend (`calls/_allowance.py`)

    @property
    def spent_usd(self) -> float:
        """Every dollar paid during the run, also by shards that failed afterwards."""
        if self.ledger is not None:
            return self.ledger.spent
        return sum(r.spend.usd for r in self.stages.values())

    @property
    def stored_usd(self) -> float:
        """What the rows this run wrote cost (cache hits cost nothing)."""
        return sum(r.spend.usd for r in self.stages.values())


@contextlib.contextmanager
def _signals(stop: Stop) -> Iterator[Callable[[], None]]:
    """SIGINT and SIGTERM both request a stop (an interruption, exit 130). Yields a function
    that installs the handlers again: `ray.init` installs its own SIGTERM handler (which exits
    at once), so the driver reinstalls ours once Ray is up."""
    previous: dict[int, Any] = {}

    def install() -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread: no handlers
                handler = signal.signal(sig, stop)
                previous.setdefault(sig, handler)

    install()
    try:
        yield install
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_study(
    study: StudyConfig, options: RunOptions, *, executor_factory: Any = None
) -> RunOutcome:
    """Run the requested stages of `study`; returns how it ended (never raises for cell errors).
    With `options.pilot`, a pilot first, then the rest after the gate agreed again."""
    if options.pilot is not None:
        from itemeval.runtime._pilot import run_with_pilot

        return run_with_pilot(study, options, run_study, executor_factory=executor_factory)
    if options.adaptive and options.only_items is None and any(m.adaptive for m in study.models):
        from itemeval.irt import run_adaptive

        return run_adaptive(study, options, run_study, executor_factory=executor_factory)
    with run_collector_pace():
        return _run(study, options, executor_factory)


def _run(study: StudyConfig, options: RunOptions, executor_factory: Any) -> RunOutcome:
    progress = Progress(quiet=options.quiet)
    TIMELINE.mark("run_study")
    on_cluster = bool(options.address or os.environ.get("RAY_ADDRESS"))
    probe = EndpointProbe(study.used_endpoints(), on_cluster=on_cluster)  # while it plans
    plan = make_plan(
        study,
        store_url=options.store_url,
        limit=options.limit,
        condition=options.condition,
        force=options.force,
        accept_changed=options.accept_changed,
        keep_items=True,
    )
    if options.only_items is not None:
        plan = restrict_plan(plan, options.only_items)
    stages = options.stages
    store_url = plan.store.root.url
    if not _has_work(plan, stages) and not open_batches_of(plan, stages):
        keep_item_tables(plan)  # the next plan reads them instead of every item
        return RunOutcome(
            "nothing_to_do",
            ExitCode.OK,
            store_url,
            message=f"Nothing left to do: every selected cell is stored in {store_url}",
        )
    TIMELINE.mark("planned")
    check_keys(study, _endpoints_for(plan, stages))
    probe.check(_endpoints_for(plan, stages), str(study.path) if study.path else None)
    TIMELINE.mark("endpoints reachable")
    check_cap_bounds(plan, stages)
    remaining = sum(line.remaining_usd for line in plan.estimate.lines if line.stage in stages)
    allowance = run_allowance(plan, spent_before=options.spent_before)
    allowance.check(remaining)
    approved_by = gate(
        remaining,
        study.budget,
        yes=options.yes,
        interactive=options.interactive,
        always_ask=options.ask_again and options.ask_again.format(remaining=remaining),
    )
    _release_planning_memory(plan)
    commit_plan(plan)
    if plan.large_scan:  # what reading the items again left free (a million items: ~35 MB)
        release_unused_memory()
    TIMELINE.mark("committed (pins, items snapshot)")
    manifest = _manifest(plan, options, remaining, approved_by)
    write_manifest_start(plan.store, manifest)
    outcome = RunOutcome("completed", ExitCode.OK, store_url, run_id=manifest.run_id)
    outcome.allowance = allowance
    cap = Cap(allowance.cap)
    context = run_context(plan, manifest.run_id, options, capped=cap.max_usd is not None)
    outcome.cache_url = context.cache_url
    runtime = study.runtime
    compaction = RunCompaction(
        plan.store,
        storage_options=context.storage_options,
        enabled=runtime.compact,
        every=runtime.compact_fragments,
        inline=context.score_inline,
        progress=progress,
    )
    stop = Stop()
    error: str | None = None
    mid_run: StoreFailedMidRun | None = None  # a storage failure after the writing began
    try:
        with (
            _signals(stop) as reinstall,
            open_executor(plan, context, options, executor_factory, cap.max_usd) as executor,
        ):
            reinstall()  # Ray's own SIGTERM handler would exit without recording anything
            TIMELINE.mark("executor ready")
            try:
                for index, stage in enumerate(stages):
                    compaction.stage(stage)
                    outcome.stages[stage] = _stage(
                        plan,
                        stage,
                        context,
                        executor,
                        progress,
                        stop,
                        cap,
                        _next_id(outcome),
                        compaction,
                    )
                    if stage == "grade" and "generate" in outcome.stages:
                        _count_inline_grades(outcome)
                    TIMELINE.mark(f"{stage} dispatched")
                    if stop.requested or cap.reached:
                        break
                    compaction.between_stages(
                        lambda: stop.requested, next_stage=index + 1 < len(stages)
                    )
            finally:
                with contextlib.suppress(Exception):
                    outcome.ledger = executor.spend()
                where = getattr(executor, "summary", None)
                outcome.executor_note = where() if where is not None else ""
        TIMELINE.mark("executor closed")
    except KeyboardInterrupt:
        stop.requested = True
    except BaseException as exc:
        error = redact(f"{type(exc).__name__}: {exc}")
        where = f"manifests/{manifest.run_id}.json"
        mid_run = failed_mid_run(exc, outcome.stages, progress, where)
        if mid_run is None:
            raise
        error = str(mid_run)
    finally:
        try:
            _count_unreported_rows(outcome, plan, progress)
        finally:  # a second Ctrl-C during the count still ends the manifest
            skip = "interrupted" if stop.requested else None
            if error is not None:
                skip = "the run failed: " + error[:200]
            if skip is not None or not compaction.enabled:
                compaction.finish(lambda: stop.requested, skip=skip)
            ended = None
            try:
                ended = _finish(outcome, manifest, plan, stop, cap, error, compaction.record)
            except Exception as exc:
                compaction.abandon()  # nothing more is written after a manifest that failed
                if mid_run is None:
                    raise
                mid_run.args = (
                    f"{mid_run} (the manifest could not be updated: {redact(repr(exc))})",
                )
            TIMELINE.mark("manifest written")
            if ended is not None and skip is None and compaction.enabled:
                outcome.message += compaction.at_end(ended, lambda: stop.requested)
                TIMELINE.mark("compacted")
            TIMELINE.report()
    if mid_run is not None:
        raise mid_run
    return outcome


def _count_unreported_rows(outcome: RunOutcome, plan: Plan, progress: Progress) -> None:
    """Count the rows of shards that ended without a summary (`count_unreported_rows`), where
    the stage's dispatch did not already (it ended by an exception)."""
    for stage, result in outcome.stages.items():
        if result.unreported and outcome.run_id is not None:
            _settle(plan, stage, outcome.run_id, progress, result)


def _settle(
    plan: Plan, stage: str, run_id: str, progress: Progress, result: StageResult
) -> RowCost | None:
    """Count the stored rows of the stage's shards that ended without a summary; None (the
    summaries' figures kept) when the store cannot be read."""
    table = SOLUTIONS if stage == "generate" else GRADES
    # Verifiable grades are also written with the solutions: their counts are not all here.
    scorers = {c.id for c in plan.design.scorers} if stage == "grade" else set()
    try:
        return count_unreported_rows(plan.store, table, run_id, result, costs_only=scorers)
    except Exception as exc:  # the manifest keeps the summaries' figures
        progress.message(
            f"could not count the rows of lost shards in {table.name}: "
            + redact(f"{type(exc).__name__}: {exc}")[:300]
        )
        return None


def _count_inline_grades(outcome: RunOutcome) -> None:
    """The verifiable grades generate shards wrote with their solutions belong to the grade
    stage's counts (they are the cells it did not have to do)."""
    inline = outcome.stages["generate"].graded_inline
    counts = outcome.stages["grade"].counts
    counts.planned += inline
    counts.done += inline


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


def _usd_per_cell(plan: Plan) -> dict[str, float]:
    per: dict[str, float] = {}
    for line in plan.estimate.lines:
        per[line.condition_id] = line.usd / line.cells if line.cells else 0.0
    return per


def _stage(
    plan: Plan,
    stage: StageName,
    context: RunContext,
    executor: Executor,
    progress: Progress,
    stop: Stop,
    cap: Cap,
    first_id: int,
    compaction: RunCompaction,
) -> StageResult:
    """One stage: the batch tier (`runtime/batch/`, if any condition uses it, or open batch
    records hold some cells) runs in a thread beside the live dispatch of the other cells; then
    what the batches left (deadline, failures) is dispatched live."""
    pending = _pending(plan, stage)
    run_id = context.run_id
    source = getattr(executor, "spend_source", None) or (lambda: None)
    tier = BatchTier.open(plan, stage, pending, context, spend=source, progress=progress)
    told = compaction.shard_done
    if tier is None:
        return _dispatch(
            plan, stage, pending, executor, progress, stop, cap, first_id, run_id, told
        )
    try:
        result = StageResult()
        if tier.live.num_rows:
            result = _dispatch(
                plan, stage, tier.live, executor, progress, stop, cap, first_id, run_id, told
            )
        else:
            progress.begin(stage, tier.cells, _usd_of(tier.taken, _usd_per_cell(plan)))

        def dispatch_live(leftovers: CellMasks) -> StageResult:
            later = first_id + 500_000  # shard ids apart from the first dispatch's
            return _dispatch(
                plan, stage, leftovers, executor, progress, stop, cap, later, run_id, told
            )

        return tier.finish(result, stop, cap, dispatch_live)
    finally:
        tier.close()
        # The batches write fragments of their own: their partitions are compacted at the end.
        table = SOLUTIONS.name if stage == "generate" else GRADES.name
        conditions = plan.design.generate if stage == "generate" else plan.design.grade
        for condition in conditions:
            compaction.wrote(table, condition.id)


def _dispatch(
    plan: Plan,
    stage: StageName,
    pending: CellMasks,
    executor: Executor,
    progress: Progress,
    stop: Stop,
    cap: Cap,
    first_id: int,
    run_id: str,
    on_summary: Callable[[ShardSummary], None] | None = None,
) -> StageResult:
    shards, cells, usd = _shards(plan, stage, pending, first_id=first_id)
    progress.begin(stage, cells, usd)

    def settle(result: StageResult) -> RowCost | None:
        return _settle(plan, stage, run_id, progress, result)

    return dispatch(
        executor, shards, cells, progress, stop, cap, settle=settle, on_summary=on_summary
    )


def _release_planning_memory(plan: Plan) -> None:
    """Give back what planning used and the run no longer needs: the estimate's per-item token
    tables, and the heap pages the scan of every item left free (glibc keeps them otherwise:
    at a million items the driver held ~100 MB it no longer used through the whole run)."""
    plan.tokens = None  # per-item priors: the estimate is made, the gate passed
    plan.calibration = None
    plan.pending_grade = None  # the grade stage reads its own, from what is stored then
    plan.keep_only_item_ids()
    if plan.large_scan:  # a small plan's pages are few: not worth ~70 ms before its first call
        release_unused_memory()


def _pending(plan: Plan, stage: StageName) -> CellMasks:
    """The stage's pending cells: the plan's for generate; for grade, what is stored now (this
    run's solutions included), for the selected items."""
    assert plan.pending_generate is not None
    if stage == "generate":
        return plan.pending_generate
    if plan.large_scan:
        # The generate stage's freed pages first: the grade set's per-cell keys and id lookup
        # (tens of MB at a million items) then reuse them instead of raising the peak.
        release_unused_memory()
    masks = pending_grade(
        plan.store,
        [c.id for c in plan.design.grade],
        [c.id for c in plan.design.generate],
        plan.pending_generate.item_ids,
        plan.design.epochs,
        force=plan.force,
        unique_ids=True,  # the plan's own ids, checked when it read them
    )
    return plan.design.drop_self_pairs(masks)


def _shards(
    plan: Plan, stage: StageName, pending: CellMasks, first_id: int
) -> tuple[Iterator[Shard | Barrier], int, float]:
    """The shards of `pending` (made lazily, as they are dispatched), its cell count and its
    estimated USD."""
    size = plan.study.runtime.shard_size
    per_cell = _usd_per_cell(plan)
    runs = plan.item_runs()
    shards: Iterator[Shard | Barrier]
    if stage == "generate":
        shards = generate_shards(
            pending, runs, shard_size=size, usd_per_cell=per_cell, first_id=first_id
        )
    else:
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
    return shards, pending.num_rows, _usd_of(pending, per_cell)


def _usd_of(pending: CellMasks, per_cell: dict[str, float]) -> float:
    return sum(
        (
            per_cell.get(key[0] if isinstance(key, tuple) else str(key), 0.0) * int(mask.sum())
            for key, mask in pending.masks.items()
        ),
        0.0,
    )


def _next_id(outcome: RunOutcome) -> int:
    return 1_000_000 * len(outcome.stages)


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
        # The cluster it runs on: `--address`, or the one `ray job submit` names (None: a
        # local Ray, or none).
        host=host_record(options.address or os.environ.get("RAY_ADDRESS") or None),
    )


def _finish(
    outcome: RunOutcome,
    manifest: RunManifest,
    plan: Plan,
    stop: Stop,
    cap: Cap,
    error: str | None,
    compaction: CompactionRecord | None = None,
) -> RunManifest:
    """Record how the run ended (the manifest); returns what was written. `compaction`: what
    the run's compaction did, or "running" when the end's compaction comes next."""
    failed = [f for r in outcome.stages.values() for f in r.failed_shards]
    cell_errors = sum(r.counts.errors for r in outcome.stages.values())
    if error is not None:
        outcome.status, outcome.exit_code = "failed", ExitCode.CELL_ERRORS
    elif stop.requested:
        outcome.status, outcome.exit_code = "interrupted", ExitCode.INTERRUPTED
    elif cap.reached:
        outcome.status, outcome.exit_code = "budget_cap", ExitCode.BUDGET_CAP
    elif failed:
        outcome.status, outcome.exit_code = "failed", ExitCode.CELL_ERRORS
        error = "; ".join(failed[:5])
    elif cell_errors:
        outcome.exit_code = ExitCode.CELL_ERRORS
    allowance = outcome.allowance
    spend = SpendRecord(
        max_usd=cap.max_usd,
        study_usd_before=allowance.study_usd_before if allowance else None,
        study_max_usd=allowance.study_max_usd if allowance else None,
    )
    for result in outcome.stages.values():
        for name in ("input_tokens", "output_tokens", "calls", "cache_hits"):
            setattr(spend, name, getattr(spend, name) + getattr(result.spend, name))
        spend.not_sent += result.not_sent
    spend.usd = outcome.spent_usd
    spend.unstored_usd = max(0.0, outcome.spent_usd - outcome.stored_usd)
    if compaction is not None and compaction.enabled and compaction.status == "compacted":
        compaction = compaction.model_copy(update={"status": "running"})
    ended = manifest.model_copy(
        update={
            "spend": spend,
            "counts": {stage: r.counts for stage, r in outcome.stages.items()},
            "compaction": compaction,
        }
    ).finished(outcome.status if outcome.status != "nothing_to_do" else "completed", error=error)
    write_manifest_end(plan.store, ended)
    outcome.message = _summary_line(outcome, plan)
    return ended


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
        "budget_cap": "Stopped at the budget cap",
        "failed": "Failed",
    }[outcome.status]
    spent = f"spent ${outcome.spent_usd:,.4f}"
    unstored = outcome.spent_usd - outcome.stored_usd
    if unstored > 1e-9:
        spent += f" (${unstored:,.4f} of it on answers stored from the response cache later)"
    ledger = outcome.ledger
    allowance = outcome.allowance
    if outcome.status == "budget_cap" and ledger is not None and allowance is not None:
        not_sent = sum(r.not_sent for r in outcome.stages.values())
        spent += (
            f" ({allowance.after(outcome.spent_usd, study_spent(plan.store))}), "
            f"${ledger.left or 0.0:,.4f} left; "
            f"{not_sent:,} call{'s' if not_sent != 1 else ''} did not fit and were not sent "
            f"(their cells stay pending: {allowance.how_to_go_on()})"
        )
    line = f"{how}. " + "; ".join(parts) + f"; {spent}. Store: {outcome.store_url}"
    if outcome.executor_note:
        line += f"\n{outcome.executor_note[0].upper()}{outcome.executor_note[1:]}."
    cached = sum(r.counts.cached for r in outcome.stages.values())
    if cached:
        line += (
            f"\n{cached:,} cell{'s' if cached != 1 else ''} came from the response cache "
            f"({outcome.cache_url}): identical calls, in this run or before (by this study or "
            "another), are paid once and answered free. `--force` calls the providers again; "
            "`cache.enabled: false` answers only this study's own calls."
        )
    return line
