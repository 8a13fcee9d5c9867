"""Dispatch: shards to an executor, at most `capacity` in flight, and what came back.

    result = dispatch(executor, shards, cells, progress, stop)

A shard whose worker or store write failed is dispatched again first (keys make a repeat
harmless, and its paid answers come back from the response cache); after `MAX_SHARD_ATTEMPTS`
it is reported as failed. A shard that reports calls that did not fit under the budget cap stops
dispatch: what is in flight finishes, nothing more starts. A stop request (Ctrl-C, SIGTERM) stops
dispatch at once and gives the shards in flight `GRACE_S` to finish before they are cancelled
(a cancelled shard still writes the calls that finished).
"""

from __future__ import annotations

import signal
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from itemeval.runtime.progress import Progress
from itemeval.runtime.shards import Shard, ShardSummary
from itemeval.runtime.spend import LedgerState
from itemeval.secrets import redact
from itemeval.store import SpendRecord, StageCounts

#: A shard is dispatched at most this many times (its worker died, the store failed...).
MAX_SHARD_ATTEMPTS = 4
#: After Ctrl-C, how long shards in flight may finish before they are cancelled.
GRACE_S = 10.0
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

    def close(self) -> None: ...


@dataclass
class StageResult:
    counts: StageCounts = field(default_factory=StageCounts)
    errors: Counter[str] = field(default_factory=Counter)
    spend: SpendRecord = field(default_factory=SpendRecord)  # what the stored rows cost
    failed_shards: list[str] = field(default_factory=list)
    redispatched: int = 0  # shards dispatched again after their worker or the store failed
    not_sent: int = 0  # calls that did not fit under budget.max_usd


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


@dataclass
class Cap:
    """Whether the budget cap was reached (a worker could not fit a call under it)."""

    max_usd: float | None
    reached: bool = False


def dispatch(
    executor: Executor,
    shards: Iterator[Shard],
    cells: int,
    progress: Progress,
    stop: Stop,
    cap: Cap,
) -> StageResult:
    result = StageResult()
    result.counts.planned = cells
    retries: deque[Shard] = deque()  # shards to dispatch again go first
    upcoming: Shard | None = next(shards, None)
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
        while (retries or upcoming is not None) and len(executor.in_flight()) < executor.capacity:
            if retries:
                shard = retries.popleft()
            else:
                assert upcoming is not None
                shard, upcoming = upcoming, next(shards, None)
            executor.submit(shard)
        collect(executor.poll(POLL_S), retries, result, progress, cap)
        progress.tick()
    if stop.requested:
        drain(executor, result, progress, cap)
    progress.end()
    return result


def collect(
    finished: list[tuple[Shard, ShardSummary | BaseException]],
    queue: deque[Shard],
    result: StageResult,
    progress: Progress,
    cap: Cap,
    retry: bool = True,
) -> None:
    for shard, outcome in finished:
        if isinstance(outcome, ShardSummary):
            progress.add(outcome)
            fold(result, outcome)
            if outcome.not_sent:
                cap.reached = True
            continue
        reason = redact(f"{type(outcome).__name__}: {outcome}").splitlines()[0][:300]
        if retry and shard.attempt + 1 < MAX_SHARD_ATTEMPTS:
            progress.message(f"shard {shard.shard_id} failed ({reason}); dispatching it again")
            queue.appendleft(shard.retry())
            result.redispatched += 1
        elif retry:
            result.failed_shards.append(f"shard {shard.shard_id}: {reason}")
            progress.message(f"shard {shard.shard_id} failed {MAX_SHARD_ATTEMPTS} times: {reason}")


def drain(executor: Executor, result: StageResult, progress: Progress, cap: Cap) -> None:
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
        collect(executor.poll(POLL_S), ignored, result, progress, cap, retry=False)
    if executor.in_flight():
        executor.cancel_all()
        deadline = time.monotonic() + 5.0
        while executor.in_flight() and time.monotonic() < deadline:
            collect(executor.poll(POLL_S), ignored, result, progress, cap, retry=False)


def fold(result: StageResult, summary: ShardSummary) -> None:
    counts, spend = result.counts, result.spend
    counts.done += summary.ok + summary.already_stored
    counts.errors += summary.error_count
    counts.cached += summary.cached
    counts.parse_failures += sum(summary.parse_failures.values())
    result.errors.update(summary.errors)
    result.not_sent += summary.not_sent
    spend.usd += summary.usd
    spend.input_tokens += summary.input_tokens
    spend.output_tokens += summary.output_tokens
    spend.calls += summary.calls
    spend.cache_hits += summary.cached
