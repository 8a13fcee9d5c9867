"""`ShardRunner`: what a worker does with a shard. Plain async Python; Ray only wraps it.

For one shard it reads the items part (cached), renders the prompts or rubrics, and hands the
requests to the call path (`calls/_shard_calls.py`: response cache, budget reservation, provider,
journal of paid answers); then it writes one fragment to the store and returns a small
`ShardSummary`. Verifiable scorers run here too, over the stored solution texts, without any call.

Every paid answer is in the response cache before the shard's fragment is written (the journal
is flushed first), so a fragment write that fails costs a re-dispatch, never a second payment.
Store and cache I/O runs in threads, shielded from cancellation, so the event loop keeps the
other shards' calls flowing. Interrupted (cancelled) mid-shard, it writes the rows of the calls
that finished, then re-raises.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow.compute as pc

from itemeval.calls import (
    Call,
    CallOutcome,
    CallTarget,
    Interrupted,
    ResponseJournal,
    ShardCalls,
    SpendAccount,
    SpendSource,
    generate_requests,
    judge_requests,
    judge_row,
    pairwise_requests,
    pairwise_row,
    scorer_row,
    solution_row,
)
from itemeval.datasets import WorkItem
from itemeval.planning import GenerateCondition, GradeCondition
from itemeval.providers import EndpointSettings, make_provider
from itemeval.providers.limits import PermitSource, SlotSource, machine_source
from itemeval.providers.types import ModelRequest, Provider
from itemeval.runtime._baseline import baseline_texts
from itemeval.runtime._context import RunContext
from itemeval.runtime._shard_reads import ShardReads
from itemeval.runtime._shards import Shard, ShardSummary
from itemeval.scoring import score
from itemeval.store import (
    GRADES,
    SOLUTIONS,
    ResponseCache,
    StudyStore,
    cache_group,
    text_hash,
)

#: How old a worker's view of the response cache may get. The view holds what was cached before
#: the run (`RunContext.cache_indexed_before`); a shard dispatched again, or repeating a request
#: an earlier shard paid, lists afresh and finds this run's answers too.
CACHE_REFRESH_S = 60.0


class RunGone(Exception):
    """The run's driver died while this worker still held a shard."""


class ShardRunner:
    """Runs shards for one worker process (one per Ray actor, or one in-process)."""

    def __init__(
        self,
        context: RunContext,
        permit_sources: Mapping[str, PermitSource] | None = None,
        spend_source: SpendSource | None = None,
        slot_sources: Mapping[str, SlotSource] | None = None,
    ):
        """`permit_sources` / `slot_sources`: per endpoint, where rate permits and concurrency
        slots come from (the endpoint's shared limiter on a cluster); without them this process
        holds its own bucket and `context.concurrency` slots."""
        self.context = context
        self._permit_sources = dict(permit_sources or {})
        self._slot_sources = dict(slot_sources or {})
        self.store = StudyStore.open(context.store_url, context.storage_options)
        cache = (
            ResponseCache.open(
                context.cache_url,
                context.cache_storage_options,
                refresh_interval_s=CACHE_REFRESH_S,
                indexed_before=context.cache_indexed_before,
            )
            if context.cache_url
            else None
        )
        self.journal = ResponseJournal(cache) if cache is not None else None
        self._spend_source = spend_source
        self.account = SpendAccount(spend_source, capped=context.capped)
        self._providers: dict[str, Provider] = {}
        self.calls = ShardCalls(
            endpoints=context.endpoints,
            pricing=context.pricing,
            provider_for=self._provider,
            account=self.account,
            cache=cache,
            journal=self.journal,
            reuse_since=context.reuse_since,
        )
        self.reads = ShardReads(self.store)

    # -- the entry point -------------------------------------------------------------------
    async def run(self, shard: Shard) -> ShardSummary:
        started = time.monotonic()
        skipped = 0
        if shard.dispatched_before:
            # An earlier attempt may have written its fragment and died before it could say so.
            shard, skipped = await asyncio.to_thread(self.without_stored, shard)
        if shard.stage == "generate":
            summary = await self._generate(shard)
        else:
            condition = self.context.grade[shard.condition_id]
            if condition.kind == "scorer":
                summary = await asyncio.to_thread(self._score, shard, condition)
            else:
                summary = await self._judge(shard, condition)
        summary.seconds = time.monotonic() - started
        summary.already_stored = skipped
        summary.cells += skipped
        return summary

    def without_stored(self, shard: Shard) -> tuple[Shard, int]:
        """The shard without the cells that already have an ok row (as the shard asks for them:
        grades of the same solution), and how many were dropped."""
        if shard.stage == "generate":
            stage, columns, keys = SOLUTIONS, ["item_id", "epoch", "status"], ["item_id", "epoch"]
        else:
            stage = GRADES
            columns = ["gen_condition_id", "item_id", "epoch", "solution_hash", "status"]
            keys = ["item_id", "epoch", "solution_hash"]
        (stored,) = self.store.read_by_condition(
            stage, [shard.condition_id], columns, dedup=False
        ).values()
        stored = stored.filter(pc.equal(stored.column("status"), "ok"))
        if shard.stage == "grade":
            stored = stored.filter(
                pc.equal(stored.column("gen_condition_id"), str(shard.gen_condition_id))
            )
        if stored.num_rows == 0:
            return shard, 0
        stored = stored.select(keys)
        cells = shard.cells
        if cells.schema.field("epoch").type != stored.schema.field("epoch").type:
            stored = stored.set_column(
                keys.index("epoch"),
                "epoch",
                stored.column("epoch").cast(cells.schema.field("epoch").type),
            )
        left = cells.join(stored, keys=keys, join_type="left anti")
        if left.num_rows == cells.num_rows:
            return shard, 0
        return replace(shard, cells=left.select(cells.column_names)), cells.num_rows - left.num_rows

    async def aclose(self) -> None:
        if self.journal is not None:
            await self.journal.aclose()
        await self.account.aclose()
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()

    # -- generate --------------------------------------------------------------------------
    async def _generate(self, shard: Shard) -> ShardSummary:
        condition = self.context.generate[shard.condition_id]
        endpoint = self.context.endpoints[condition.endpoint]
        items = await asyncio.to_thread(self.read_items, shard)
        cells = shard.cells.to_pydict()
        requests = generate_requests(condition, endpoint, items, cells["item_id"], cells["epoch"])

        def to_row(call: Call) -> dict[str, Any]:
            return solution_row(call, model=condition.model_id, run_id=self.context.run_id)

        def scores(calls: Sequence[Call]) -> dict[str, list[dict[str, Any]]]:
            return self._inline_scores(shard, items, calls)

        target = generate_target(condition)
        return await self._call_and_write(
            shard, SOLUTIONS, target, requests, cells, to_row, then=scores
        )

    def _inline_scores(
        self, shard: Shard, items: Mapping[str, WorkItem], calls: Sequence[Call]
    ) -> dict[str, list[dict[str, Any]]]:
        """The verifiable scorers' grades of a generate shard's fresh solutions, made at once
        (the text is at hand; scorers are pure functions), when the run grades too: rows per
        scorer grade condition. They are what the grade stage would write for these cells."""
        out: dict[str, list[dict[str, Any]]] = {}
        ok = [c for c in calls if c.result.ok]
        for condition_id in self.context.score_inline:
            scorer = self.context.grade[condition_id].scorer
            assert scorer is not None
            out[condition_id] = [
                scorer_row(
                    call.item_id,
                    call.epoch,
                    score(scorer, call.result.text, item.target, item.modality),
                    gen_condition_id=shard.condition_id,
                    solution_hash=text_hash(call.result.text),
                    scorer=scorer,
                    run_id=self.context.run_id,
                )
                for call in ok
                for item in (items[call.item_id],)
            ]
        return out

    # -- judges ----------------------------------------------------------------------------
    async def _judge(self, shard: Shard, condition: GradeCondition) -> ShardSummary:
        assert condition.rubric is not None and condition.params is not None
        assert condition.model_id is not None and condition.endpoint is not None
        rubric = condition.rubric
        endpoint = self.context.endpoints[condition.endpoint]
        items = await asyncio.to_thread(self.read_items, shard)
        texts = await asyncio.to_thread(self.solution_texts, shard)
        if condition.pairwise is not None:
            return await self._pairwise(shard, condition, endpoint, items, texts)
        requests, kept, judged = judge_requests(
            condition, endpoint, items, texts, shard.cells.to_pydict()
        )

        def to_row(call: Call) -> dict[str, Any]:
            solution_hash, solution = judged[(call.item_id, call.epoch)]
            return judge_row(
                call,
                gen_condition_id=str(shard.gen_condition_id),
                solution_hash=solution_hash,
                solution=solution,
                grader=condition.model_id or "",
                rubric=rubric,
                run_id=self.context.run_id,
                structured=condition.structured,
            )

        target = judge_target(condition)
        summary = await self._call_and_write(shard, GRADES, target, requests, kept, to_row)
        summary.skipped = shard.size - len(requests)
        summary.cells = shard.size
        return summary

    async def _pairwise(
        self,
        shard: Shard,
        condition: GradeCondition,
        endpoint: Any,
        items: Mapping[str, WorkItem],
        texts: Mapping[tuple[str, int, str], str],
    ) -> ShardSummary:
        """A pairwise judge's shard: each answer against the baseline's to the same item and
        epoch (read now: its current `ok` solution)."""
        pairwise = condition.pairwise
        assert pairwise is not None and condition.model_id is not None
        base = pairwise.baselines.get(str(shard.gen_condition_id))
        baseline = {} if base is None else await asyncio.to_thread(self.baseline_texts, shard, base)
        requests, kept, judged = pairwise_requests(
            condition, endpoint, items, texts, baseline, shard.cells.to_pydict()
        )

        def to_row(call: Call) -> dict[str, Any]:
            return pairwise_row(
                call,
                gen_condition_id=str(shard.gen_condition_id),
                solution_hash=judged[(call.item_id, call.epoch)][0],
                grader=condition.model_id or "",
                condition_first=pairwise.condition_first,
                run_id=self.context.run_id,
                structured=condition.structured,
            )

        target = judge_target(condition)
        summary = await self._call_and_write(shard, GRADES, target, requests, kept, to_row)
        summary.skipped = shard.size - len(requests)
        summary.cells = shard.size
        return summary

    def baseline_texts(self, shard: Shard, base: str) -> dict[tuple[str, int], tuple[str, str]]:
        """`(item_id, epoch) -> (text_hash, text)` of the baseline's current `ok` answers to
        the shard's cells (`runtime._baseline.baseline_texts`)."""
        return baseline_texts(self.store, base, shard.cells.select(["item_id", "epoch"]))

    # -- verifiable scorers ----------------------------------------------------------------
    def _score(self, shard: Shard, condition: GradeCondition) -> ShardSummary:
        assert condition.scorer is not None
        items = self.read_items(shard)
        texts = self.solution_texts(shard)
        cells = shard.cells.to_pydict()
        rows = []
        for item_id, epoch, wanted in zip(
            cells["item_id"], cells["epoch"], cells["solution_hash"], strict=True
        ):
            text = texts.get((item_id, epoch, wanted))
            if text is None:
                continue
            item = items[item_id]
            result = score(condition.scorer, text, item.target, item.modality)
            rows.append(
                scorer_row(
                    item_id,
                    epoch,
                    result,
                    gen_condition_id=str(shard.gen_condition_id),
                    solution_hash=wanted,
                    scorer=condition.scorer,
                    run_id=self.context.run_id,
                )
            )
        summary = ShardSummary(shard.shard_id, shard.stage, shard.condition_id, cells=shard.size)
        summary.ok = len(rows)
        summary.skipped = shard.size - len(rows)
        summary.fragment = self.store.write(GRADES, shard.condition_id, rows)
        return summary

    # -- the shared call path --------------------------------------------------------------
    async def _call_and_write(
        self,
        shard: Shard,
        stage: Any,
        target: CallTarget,
        requests: Sequence[ModelRequest],
        cells: Mapping[str, list[Any]],
        to_row: Any,
        then: Any = None,
    ) -> ShardSummary:
        """`then(calls)`: rows of other partitions to write once the fragment is written
        (`{grade condition id: rows}`: verifiable grades made with the solutions)."""
        summary = ShardSummary(shard.shard_id, shard.stage, shard.condition_id, cells=shard.size)
        try:
            # A shard dispatched again, or one of repeats, finds answers paid since this
            # worker last listed the cache (by another worker, or by its first attempt).
            fresh = shard.dispatched_before or shard.repeats
            outcome = await self.calls.run(
                target, requests, cells["item_id"], cells["epoch"], fresh=fresh
            )
        except Interrupted as interrupted:
            summary.interrupted = True
            await self._write(shard, stage, interrupted.outcome, to_row, summary, then)
            raise
        await self._write(shard, stage, outcome, to_row, summary, then)
        return summary

    async def _write(
        self,
        shard: Shard,
        stage: Any,
        outcome: CallOutcome,
        to_row: Any,
        summary: ShardSummary,
        then: Any = None,
    ) -> None:
        """Journal first (every paid answer in the cache), spend reported, then the fragment
        (and the grades made with it): all off the event loop and shielded, so a cancellation
        cannot cut them short."""
        ordered = [outcome.calls[i] for i in sorted(outcome.calls)]
        rows = [to_row(call) for call in ordered]
        summary.not_sent = outcome.not_sent
        fold_rows(summary, ordered, rows)
        if self.journal is not None:
            await self.journal.flush()
        await asyncio.shield(self.account.flush())
        if rows and not await self._run_alive():
            # The driver died: its answers are in the cache; a re-run stores them, and this
            # orphaned worker (Ray reaps it shortly) must not write the same cells too.
            raise RunGone("the driver of this run is gone; the shard's answers are cached")
        if rows:
            summary.fragment = await asyncio.shield(
                asyncio.to_thread(self.store.write, stage, shard.condition_id, rows)
            )
        if rows and then is not None and self.context.score_inline:
            summary.graded_inline = await asyncio.shield(
                asyncio.to_thread(self._write_grades, then, ordered)
            )

    def _write_grades(self, then: Any, calls: Sequence[Call]) -> int:
        written = 0
        for condition_id, grade_rows in then(calls).items():
            if grade_rows:
                self.store.write(GRADES, condition_id, grade_rows)
                written += len(grade_rows)
        return written

    def share_limits(self, permit_sources: Mapping[str, PermitSource]) -> None:
        """Draw rate permits from these sources (the endpoints' shared limiters) from now on,
        for the providers already built and those to come."""
        self._permit_sources.update(permit_sources)
        for endpoint, provider in self._providers.items():
            limiter = getattr(provider, "limiter", None)
            if limiter is not None and endpoint in permit_sources:
                limiter.switch_source(permit_sources[endpoint])

    def slots_in_use(self) -> dict[str, int]:
        """Concurrency slots held right now, per endpoint."""
        return {
            endpoint: provider.limiter.slots_in_use
            for endpoint, provider in self._providers.items()
            if getattr(provider, "limiter", None) is not None
        }

    async def _run_alive(self) -> bool:
        probe = getattr(self._spend_source, "run_alive", None)
        return True if probe is None else bool(await probe())

    # -- reading (`shard_reads.py`) ----------------------------------------------------------
    def read_items(self, shard: Shard) -> dict[str, WorkItem]:
        """The items of the shard's part, by id (the last parts read are kept)."""
        return self.reads.items(shard)

    def solution_texts(self, shard: Shard) -> dict[tuple[str, int, str], str]:
        """`(item_id, epoch, text_hash) -> text` for the shard's cells."""
        return self.reads.solution_texts(shard)

    def _provider(self, endpoint_name: str) -> Provider:
        provider = self._providers.get(endpoint_name)
        if provider is None:
            settings: EndpointSettings = self.context.endpoints[endpoint_name]
            permits = self._permit_sources.get(endpoint_name)
            slots = self._slot_sources.get(endpoint_name)
            if permits is None and slots is None and self.context.limits_dir is not None:
                permits = slots = machine_source(settings, self.context.limits_dir)
            provider = make_provider(
                settings,
                permit_source=permits,
                max_concurrency=self.context.concurrency.get(endpoint_name),
                slot_source=slots,
                field=f"endpoints.{endpoint_name}",
            )
            self._providers[endpoint_name] = provider
        return provider


def generate_target(condition: GenerateCondition) -> CallTarget:
    """Where a generate condition's calls go and are cached (by content, never by name)."""
    return CallTarget(
        condition_id=condition.id,
        group=cache_group(condition.model_id, condition.params.as_dict(), condition.prompt.sha256),
        model=condition.model_id,
        endpoint=condition.endpoint,
    )


def judge_target(condition: GradeCondition) -> CallTarget:
    """Where a judge condition's calls go and are cached (by content, never by name)."""
    assert condition.model_id and condition.params and condition.rubric and condition.endpoint
    return CallTarget(
        condition_id=condition.id,
        group=cache_group(condition.model_id, condition.params.as_dict(), condition.rubric.sha256),
        model=condition.model_id,
        endpoint=condition.endpoint,
    )


def fold_rows(
    summary: ShardSummary, calls: Sequence[Call], rows: Sequence[Mapping[str, Any]]
) -> None:
    for call, row in zip(calls, rows, strict=True):
        if call.cached:
            summary.cached += 1
        else:
            summary.calls += 1
            summary.usd += row["usd"]
            summary.latency_ms += call.result.latency_ms
        summary.input_tokens += call.result.usage.input_tokens
        summary.output_tokens += call.result.usage.output_tokens
        if row["status"] == "ok":
            summary.ok += 1
            if row.get("parse_ok") is False:
                summary.parse_failures[str(row["parse_code"])] += 1
        else:
            summary.errors[str(row["error_code"])] += 1
