"""Dispatch: shards to an executor, at most `capacity` in flight, and what came back.

    result = dispatch(executor, shards, cells, progress, stop)

A shard whose worker died (`WorkerLost`) goes at once to another live worker, and that does not
count against it: a lost worker costs time, not the run. A shard whose attempt failed (the store
write, a bug) is dispatched again after a backoff (1, 2, 4 s); after `MAX_SHARD_ATTEMPTS` it is
reported as failed. Either way keys make a repeat harmless, and its paid answers come back from
the response cache. A shard that reports calls that did not fit under the budget cap stops
dispatch: what is in flight finishes, nothing more starts. A stop request (Ctrl-C, SIGTERM) stops
dispatch at once and gives the shards in flight a grace period to finish before they are
cancelled (a cancelled shard still writes the calls that finished). A `BARRIER` in the stream of
shards holds back the shards after it until every shard before it (re-dispatches included) has
finished: they repeat requests those shards paid for (`shards.IdenticalCells`).
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from itemeval.calls import LedgerState
from itemeval.errors import WorkerLost
from itemeval.runtime._progress import Progress
from itemeval.runtime._shards import Barrier, Shard, ShardSummary
from itemeval.runtime._timeline import TIMELINE
from itemeval.secrets import redact
from itemeval.store import SpendRecord, StageCounts
from itemeval.store.fragments import read_partitions

if TYPE_CHECKING:
    from itemeval.store import Stage, StudyStore

#: A shard fails after this many failed attempts (the store failed, a bug...).
MAX_SHARD_ATTEMPTS = 4
#: ... or after its worker died under it this many times (a shard that kills its worker).
MAX_WORKER_LOSSES = 8
#: With no live worker at all for this long, the stage gives up (the cluster cannot host one).
WORKER_WAIT_S = 600.0
#: After Ctrl-C, how long shards in flight may finish before they are cancelled.
GRACE_S = 10.0
#: After SIGTERM (`ray job stop`, a pod eviction), the same, shorter: Ray's job supervisor
#: kills the driver `RAY_JOB_STOP_WAIT_TIME_S` (3 s by default) after its SIGTERM.
TERM_GRACE_S = 1.0
POLL_S = 0.2


class Executor(Protocol):
    """Where shards run: `RayExecutor` (worker actors) or `InlineExecutor` (`--no-ray`)."""

    workers: int

    @property
    def capacity(self) -> int: ...

    def in_flight(self) -> list[Shard]: ...

    def submit(self, shard: Shard) -> None: ...

    def poll(self, timeout: float) -> list[tuple[Shard, ShardSummary | BaseException]]: ...

    def cancel_all(self) -> None: ...

    def spend(self) -> LedgerState: ...

    def health(self) -> list[str]:
        """What is wrong right now (workers down, a limiter not answering), for the progress
        line; [] when all is well."""
        ...

    def close(self) -> None: ...


@dataclass(slots=True)
class RowCost:
    """What some stored rows hold and cost: cells done (`ok`), errors, cache hits, calls made
    (rows answered by a fresh call) and judge parse failures; USD and tokens."""

    usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    done: int = 0
    errors: int = 0
    cached: int = 0
    calls: int = 0
    parse_failures: int = 0

    def add(self, usd: float, input_tokens: int, output_tokens: int) -> None:
        self.usd += usd
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens

    def absorb(self, other: RowCost) -> None:
        for name in self.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def minus(self, other: RowCost) -> RowCost:
        out = RowCost()
        for name in self.__slots__:
            setattr(out, name, getattr(self, name) - getattr(other, name))
        return out


@dataclass
class StageResult:
    counts: StageCounts = field(default_factory=StageCounts)
    errors: Counter[str] = field(default_factory=Counter)
    spend: SpendRecord = field(default_factory=SpendRecord)  # what the stored rows cost
    failed_shards: list[str] = field(default_factory=list)
    redispatched: int = 0  # shards dispatched again after their worker or the store failed
    not_sent: int = 0  # calls that did not fit under budget.max_usd
    submitted: int = 0  # shards handed to the executor (re-dispatches included)
    graded_inline: int = 0  # verifiable grades written with the solutions (generate shards)
    #: Conditions where a shard ended without its summary (its worker died, it failed, it was
    #: cancelled): it may have written rows no summary counts (`count_unreported_rows`).
    unreported: set[str] = field(default_factory=set)
    #: What the summaries said the stored rows cost, per condition: (usd, input, output tokens).
    reported: dict[str, RowCost] = field(default_factory=dict)


class Stop:
    """Set by the first Ctrl-C/SIGTERM; a second Ctrl-C raises KeyboardInterrupt."""

    def __init__(self) -> None:
        self.requested = False
        self.signal: str | None = None

    def __call__(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self.signal = signal.Signals(signum).name

    @property
    def grace_s(self) -> float:
        """How long shards in flight may finish (`ITEMEVAL_STOP_GRACE_S` overrides both)."""
        override = os.environ.get("ITEMEVAL_STOP_GRACE_S")
        if override:
            return float(override)
        return TERM_GRACE_S if self.signal == "SIGTERM" else GRACE_S


@dataclass
class Cap:
    """Whether the budget cap was reached (a worker could not fit a call under it)."""

    max_usd: float | None
    reached: bool = False


def dispatch(
    executor: Executor,
    shards: Iterator[Shard | Barrier],
    cells: int,
    progress: Progress,
    stop: Stop,
    cap: Cap,
    settle: Callable[[StageResult], RowCost | None] | None = None,
    on_summary: Callable[[ShardSummary], None] | None = None,
) -> StageResult:
    """`settle(result)`: called before the final progress line when a shard ended without its
    summary, to count its stored rows (`count_unreported_rows`); returns the correction.
    `on_summary(summary)`: told of each shard's summary (the run's compaction counts the
    fragments written)."""
    result = StageResult()
    result.counts.planned = cells
    retries: list[tuple[float, Shard]] = []  # (not before, shard): shards to dispatch again first
    upcoming: Shard | Barrier | None = next(shards, None)
    starved_since: float | None = None
    told: dict[str, float] = {}
    while retries or upcoming is not None or executor.in_flight():
        if stop.requested:
            break
        if cap.reached and (retries or upcoming is not None):
            retries.clear()  # the cap: nothing more starts; what is in flight finishes
            upcoming = None
            progress.message(
                "budget: a call did not fit under budget.max_usd; finishing the shards in "
                "flight, starting no more"
            )
        now = time.monotonic()
        while len(executor.in_flight()) < executor.capacity:
            ready = next((i for i, (at, _) in enumerate(retries) if at <= now), None)
            if ready is not None:
                shard = retries.pop(ready)[1]
            elif isinstance(upcoming, Barrier):
                if retries or executor.in_flight():
                    break  # the shards before it first
                upcoming = next(shards, None)
                continue
            elif upcoming is not None:
                shard, upcoming = upcoming, next(shards, None)
            else:
                break
            if not result.submitted:
                TIMELINE.mark("first shard submitted")
            result.submitted += 1
            executor.submit(shard)
        starved_since = _starved(executor, starved_since, now, bool(retries or upcoming))
        hint = getattr(executor, "progress", None)
        if hint is not None:  # a local run decides about Ray from the progress so far
            hint(progress.done, cells, waiting=bool(retries or upcoming is not None))
        collect(executor.poll(POLL_S), retries, result, progress, cap, on_summary=on_summary)
        _report_health(executor, progress, told)
        progress.tick()
    if stop.requested:
        drain(executor, result, progress, cap, stop.grace_s, on_summary)
    if settle is not None and result.unreported:
        correction = settle(result)
        if correction is not None:
            progress.recount(correction)
    progress.end()
    return result


def _starved(executor: Executor, since: float | None, now: float, waiting: bool) -> float | None:
    """Track how long work has waited with no live worker; give up after `WORKER_WAIT_S`."""
    if executor.capacity > 0 or not waiting or executor.in_flight():
        return None
    if since is None:
        return now
    if now - since > WORKER_WAIT_S:
        raise RuntimeError(
            f"no live worker for {WORKER_WAIT_S:.0f} s: the cluster cannot host one (its nodes "
            "are gone or full); run the same command again once it can"
        )
    return since


def _report_health(executor: Executor, progress: Progress, told: dict[str, float]) -> None:
    """Problems the executor sees, in the progress line and (every 10 s each) the log."""
    problems = executor.health()
    progress.status = "; ".join(problems)
    now = time.monotonic()
    for problem in problems:
        key = problem.split(":", 1)[0]
        if now - told.get(key, -math.inf) >= 10.0:
            told[key] = now
            progress.message(problem)


def collect(
    finished: list[tuple[Shard, ShardSummary | BaseException]],
    queue: list[tuple[float, Shard]],
    result: StageResult,
    progress: Progress,
    cap: Cap,
    retry: bool = True,
    on_summary: Callable[[ShardSummary], None] | None = None,
) -> None:
    for shard, outcome in finished:
        if isinstance(outcome, ShardSummary):
            progress.add(outcome)
            fold(result, outcome)
            if on_summary is not None:
                on_summary(outcome)
            if outcome.not_sent:
                cap.reached = True
            continue
        result.unreported.add(shard.condition_id)
        reason = redact(f"{type(outcome).__name__}: {outcome}").splitlines()[0][:300]
        if not retry:
            continue
        now = time.monotonic()
        if isinstance(outcome, WorkerLost) and shard.workers_lost + 1 < MAX_WORKER_LOSSES:
            progress.message(f"shard {shard.shard_id}: its worker was lost; another takes it")
            queue.insert(0, (now, shard.after_worker_loss()))
            result.redispatched += 1
        elif not isinstance(outcome, WorkerLost) and shard.attempt + 1 < MAX_SHARD_ATTEMPTS:
            delay = 2.0**shard.attempt
            progress.message(
                f"shard {shard.shard_id} failed ({reason}); dispatching it again in {delay:.0f} s"
            )
            queue.append((now + delay, shard.retry()))
            result.redispatched += 1
        else:
            times = shard.workers_lost + 1 if isinstance(outcome, WorkerLost) else shard.attempt + 1
            result.failed_shards.append(f"shard {shard.shard_id}: {reason}")
            progress.message(f"shard {shard.shard_id} failed {times} times: {reason}")


def drain(
    executor: Executor,
    result: StageResult,
    progress: Progress,
    cap: Cap,
    grace_s: float,
    on_summary: Callable[[ShardSummary], None] | None = None,
) -> None:
    """After a stop request: let shards in flight finish for a while, then cancel them (a
    cancelled shard still writes the calls that finished)."""
    in_flight = len(executor.in_flight())
    if in_flight:
        progress.message(
            f"stopping: waiting up to {grace_s:g}s for {in_flight} shard(s) in flight "
            "(Ctrl-C again to stop at once)"
        )
    deadline = time.monotonic() + grace_s
    ignored: list[tuple[float, Shard]] = []
    while executor.in_flight() and time.monotonic() < deadline:
        finished = executor.poll(min(POLL_S, grace_s))
        collect(finished, ignored, result, progress, cap, retry=False, on_summary=on_summary)
    if executor.in_flight():
        executor.cancel_all()
        deadline = time.monotonic() + 5.0
        while executor.in_flight() and time.monotonic() < deadline:
            finished = executor.poll(POLL_S)
            collect(finished, ignored, result, progress, cap, retry=False, on_summary=on_summary)
    result.unreported.update(shard.condition_id for shard in executor.in_flight())


def fold(result: StageResult, summary: ShardSummary) -> None:
    counts, spend = result.counts, result.spend
    counts.done += summary.ok + summary.already_stored
    counts.errors += summary.error_count
    counts.cached += summary.cached
    counts.parse_failures += sum(summary.parse_failures.values())
    result.errors.update(summary.errors)
    result.not_sent += summary.not_sent
    result.graded_inline += summary.graded_inline
    spend.usd += summary.usd
    spend.input_tokens += summary.input_tokens
    spend.output_tokens += summary.output_tokens
    spend.calls += summary.calls
    spend.cache_hits += summary.cached
    told = result.reported.setdefault(summary.condition_id, RowCost())
    told.add(summary.usd, summary.input_tokens, summary.output_tokens)
    told.done += summary.ok + summary.already_stored
    told.errors += summary.error_count
    told.cached += summary.cached
    told.calls += summary.calls
    told.parse_failures += sum(summary.parse_failures.values())


def count_unreported_rows(
    store: StudyStore,
    stage: Stage,
    run_id: str,
    result: StageResult,
    *,
    costs_only: frozenset[str] | set[str] = frozenset(),
) -> RowCost:
    """Correct `result` from the store where a shard ended without its summary: a worker
    killed between its write and its reply, or a shard cancelled by a stop (`ray job stop`,
    Ctrl-C) that wrote the calls that had finished, leaves rows on disk that no summary
    counted. For each such condition, what this run's rows there hold (cells done, errors,
    cache hits, calls) and cost replaces what the summaries said, so the manifest and the
    progress line count what was durably stored. `costs_only`: conditions whose rows other
    stages write too (verifiable scorers, written with the solutions): their dollars are
    corrected, their counts are the summaries'. Each fragment is read as a few columns and
    summed as it is read (`read_partitions`' consistent read: a fragment compacted meanwhile
    is counted once); only after a loss. Returns the correction (stored minus told)."""
    sums = {"usd": pa.float64(), "input_tokens": pa.int64(), "output_tokens": pa.int64()}
    counted = {
        "done": pa.int64(),
        "errors": pa.int64(),
        "cached": pa.int64(),
        "calls": pa.int64(),
        "parse_failures": pa.int64(),
    }
    grades = stage.name == "grades"
    columns = ["run_id", "status", "cached", "request_hash", *sums]
    if grades:
        columns.append("parse_ok")

    def this_runs_rows(fragment: pa.Table) -> pa.Table:  # a fragment's rows: one row of sums
        mine = fragment.filter(pc.equal(fragment.column("run_id"), run_id))
        ok = pc.equal(mine.column("status"), "ok")
        cached = pc.fill_null(mine.column("cached"), False)
        called = pc.and_(pc.invert(cached), pc.is_valid(mine.column("request_hash")))
        flags = {
            "done": ok,
            "errors": pc.invert(ok),
            "cached": cached,
            "calls": called,
            "parse_failures": (
                pc.and_(ok, pc.invert(pc.fill_null(mine.column("parse_ok"), True)))
                if grades
                else pa.array([False] * mine.num_rows)
            ),
        }
        out = {
            name: pa.array([pc.sum(mine.column(name)).as_py() or 0], kind)
            for name, kind in sums.items()
        }
        for name, flag in flags.items():
            out[name] = pa.array([pc.sum(pc.cast(flag, pa.int64())).as_py() or 0], pa.int64())
        return pa.table(out)

    correction = RowCost()
    for condition_id in sorted(result.unreported):
        partition = {condition_id: store.partition(stage, condition_id)}
        (rows,) = read_partitions(partition, stage.schema, columns, reduce=this_runs_rows).values()
        found = RowCost()
        if rows.num_rows:
            for name in (*sums, *counted):
                setattr(found, name, pc.sum(rows.column(name)).as_py() or 0)
        told = result.reported.get(condition_id, RowCost())
        if condition_id in costs_only:  # the counts stay the summaries'
            for name in counted:
                setattr(found, name, getattr(told, name))
        delta = found.minus(told)
        correction.absorb(delta)
        result.reported[condition_id] = found
    counts, spend = result.counts, result.spend
    spend.usd += correction.usd
    spend.input_tokens += correction.input_tokens
    spend.output_tokens += correction.output_tokens
    spend.calls += correction.calls
    spend.cache_hits += correction.cached
    counts.done += correction.done
    counts.errors += correction.errors
    counts.cached += correction.cached
    counts.parse_failures += correction.parse_failures
    result.unreported.clear()
    return correction
