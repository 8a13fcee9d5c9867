"""`ShardRunner`: what a worker does with a shard. Plain async Python; Ray only wraps it.

For one shard it reads the items part (cached), renders the prompts or rubrics, answers what it
can from the response cache (one vectorised lookup for the whole shard), calls the provider for
the rest through the endpoint's rate-limited client, and writes one fragment to the store plus
one to the cache. It returns a small `ShardSummary`.

Verifiable scorers run here too, over the stored solution texts, without any call.

Interrupted (cancelled) mid-shard, it writes the rows of the calls that already finished, so
nothing paid for is thrown away, and re-raises. Store and cache I/O runs in a thread so the
event loop keeps the other shard's calls flowing.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from itemeval.design import GradeCondition
from itemeval.errors import StoreError
from itemeval.providers.factory import make_provider
from itemeval.providers.ratelimiter import PermitSource
from itemeval.providers.settings import EndpointSettings
from itemeval.providers.types import ErrorCode, ModelRequest, ModelResult, Provider, Usage
from itemeval.runtime.context import RunContext
from itemeval.runtime.rows import Call, judge_row, response_row, scorer_row, solution_row
from itemeval.runtime.shards import Shard, ShardSummary
from itemeval.scoring import score
from itemeval.secrets import redact
from itemeval.store import (
    GRADES,
    RESPONSE_SCHEMA,
    SOLUTION_SCHEMA,
    SOLUTIONS,
    ResponseCache,
    SnapshotInfo,
    StudyStore,
    build_table,
    cache_key,
    read_items_part,
    read_snapshot_info,
    request_hash,
)
from itemeval.store.fragments import list_fragments, read_fragments
from itemeval.workitem import WorkItem, table_to_items

ITEM_PARTS_CACHED = 8
#: How old a worker's view of the response cache may get (fragments this run writes are added
#: to it as they are written; other studies' new fragments are seen within this time).
CACHE_REFRESH_S = 60.0
FRAGMENTS_CACHED = 4
_TEXT_COLUMNS = ["item_id", "epoch", "text", "text_hash", "status"]


class ShardRunner:
    """Runs shards for one worker process (one per Ray actor, or one in-process)."""

    def __init__(
        self,
        context: RunContext,
        permit_sources: Mapping[str, PermitSource] | None = None,
    ):
        self.context = context
        self._permit_sources = dict(permit_sources or {})
        self.store = StudyStore.open(context.store_url, context.storage_options)
        self.cache = (
            ResponseCache.open(context.cache_url, refresh_interval_s=CACHE_REFRESH_S)
            if context.cache_url
            else None
        )
        self._providers: dict[str, Provider] = {}
        self._snapshots: dict[tuple[str, str], SnapshotInfo] = {}
        self._parts: OrderedDict[tuple[str, str, int], dict[str, WorkItem]] = OrderedDict()
        self._fragments: OrderedDict[tuple[str, str], pa.Table] = OrderedDict()

    # -- the entry point -------------------------------------------------------------------
    async def run(self, shard: Shard) -> ShardSummary:
        started = time.monotonic()
        if shard.stage == "generate":
            summary = await self._generate(shard)
        else:
            condition = self.context.grade[shard.condition_id]
            if condition.kind == "scorer":
                summary = await asyncio.to_thread(self._score, shard, condition)
            else:
                summary = await self._judge(shard, condition)
        summary.seconds = time.monotonic() - started
        return summary

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()

    # -- generate --------------------------------------------------------------------------
    async def _generate(self, shard: Shard) -> ShardSummary:
        condition = self.context.generate[shard.condition_id]
        endpoint = self.context.endpoints[condition.endpoint]
        items = await asyncio.to_thread(self._items, shard)
        cells = shard.cells.to_pydict()
        requests = [
            ModelRequest(
                model=condition.model_id,
                messages=condition.prompt.render_prompt(items[item_id]),
                params=condition.params,
                sim_hints=_solver_hints(items[item_id], epoch) if endpoint.kind == "sim" else None,
            )
            for item_id, epoch in zip(cells["item_id"], cells["epoch"], strict=True)
        ]

        def to_row(call: Call) -> dict[str, Any]:
            return solution_row(call, model=condition.model_id, run_id=self.context.run_id)

        return await self._call_and_write(
            shard, SOLUTIONS, condition.model_id, condition.endpoint, requests, cells, to_row
        )

    # -- judges ----------------------------------------------------------------------------
    async def _judge(self, shard: Shard, condition: GradeCondition) -> ShardSummary:
        assert condition.rubric is not None and condition.params is not None
        assert condition.model_id is not None and condition.endpoint is not None
        rubric = condition.rubric
        endpoint = self.context.endpoints[condition.endpoint]
        items = await asyncio.to_thread(self._items, shard)
        texts = await asyncio.to_thread(self._solution_texts, shard)
        cells = shard.cells.to_pydict()
        kept: dict[str, list[Any]] = {"item_id": [], "epoch": [], "solution_hash": []}
        requests = []
        for item_id, epoch, wanted in zip(
            cells["item_id"], cells["epoch"], cells["solution_hash"], strict=True
        ):
            text = texts.get((item_id, epoch, wanted))
            if text is None:  # the solution changed or vanished since planning: next run
                continue
            item = items[item_id]
            hints = _judge_hints(item, epoch, text) if endpoint.kind == "sim" else None
            requests.append(
                ModelRequest(
                    model=condition.model_id,
                    messages=rubric.render_rubric(item, text),
                    params=condition.params,
                    sim_hints=hints,
                )
            )
            kept["item_id"].append(item_id)
            kept["epoch"].append(epoch)
            kept["solution_hash"].append(wanted)
        hashes = dict(
            zip(
                zip(kept["item_id"], kept["epoch"], strict=True), kept["solution_hash"], strict=True
            )
        )

        def to_row(call: Call) -> dict[str, Any]:
            return judge_row(
                call,
                gen_condition_id=str(shard.gen_condition_id),
                solution_hash=hashes[(call.item_id, call.epoch)],
                grader=condition.model_id or "",
                pass_score=rubric.pass_score,
                run_id=self.context.run_id,
            )

        summary = await self._call_and_write(
            shard, GRADES, condition.model_id, condition.endpoint, requests, kept, to_row
        )
        summary.skipped = shard.size - len(requests)
        summary.cells = shard.size
        return summary

    # -- verifiable scorers ----------------------------------------------------------------
    def _score(self, shard: Shard, condition: GradeCondition) -> ShardSummary:
        assert condition.scorer is not None
        items = self._items(shard)
        texts = self._solution_texts(shard)
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
        model: str,
        endpoint_name: str,
        requests: Sequence[ModelRequest],
        cells: Mapping[str, list[Any]],
        to_row: Any,
    ) -> ShardSummary:
        summary = ShardSummary(shard.shard_id, shard.stage, shard.condition_id, cells=shard.size)
        cid = shard.condition_id
        item_ids, epochs = cells["item_id"], cells["epoch"]
        hashes = [request_hash(r) for r in requests]
        keys = [cache_key(cid, r, e) for r, e in zip(requests, epochs, strict=True)]
        calls: dict[int, Call] = {}
        if self.cache is not None and self.context.cache_lookup and requests:
            hits = await asyncio.to_thread(self.cache.lookup, cid, keys)
            for index, result in _hits_by_index(hits, keys).items():
                calls[index] = Call(
                    item_ids[index], epochs[index], result, hashes[index], keys[index], cached=True
                )
        todo = [i for i in range(len(requests)) if i not in calls]
        provider = self._provider(endpoint_name) if todo else None
        tasks = {
            asyncio.ensure_future(self._complete(provider, requests[i], model)): i  # type: ignore[arg-type]
            for i in todo
        }
        try:
            if tasks:
                await asyncio.wait(tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            summary.interrupted = True
            raise
        finally:
            for task, index in tasks.items():
                if task.done() and not task.cancelled():
                    calls[index] = Call(
                        item_ids[index], epochs[index], task.result(), hashes[index], keys[index]
                    )
            # Write what finished (also when cancelled): paid-for answers are never dropped.
            self._write(shard, stage, model, calls, to_row, summary)
        return summary

    async def _complete(self, provider: Provider, request: ModelRequest, model: str) -> ModelResult:
        try:
            result = await provider.complete(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug, not a provider failure: keep it as a row, retried later
            return ModelResult(
                ok=False,
                error_code=ErrorCode.INTERNAL,
                error_message=redact(f"{type(exc).__name__}: {exc}"),
            )
        price = self.context.pricing.price(model)  # unpriced models cost $0 (estimate warns)
        return replace(result, usd=price.cost(result.usage)) if price is not None else result

    def _write(
        self,
        shard: Shard,
        stage: Any,
        model: str,
        calls: Mapping[int, Call],
        to_row: Any,
        summary: ShardSummary,
    ) -> None:
        ordered = [calls[i] for i in sorted(calls)]
        rows = [to_row(call) for call in ordered]
        summary.fragment = self.store.write(stage, shard.condition_id, rows) if rows else None
        for call, row in zip(ordered, rows, strict=True):
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
        fresh = [c for c in ordered if not c.cached and c.result.ok]
        if self.cache is not None and fresh:
            responses = build_table(RESPONSE_SCHEMA, [response_row(c, model=model) for c in fresh])
            self.cache.put(shard.condition_id, responses)

    # -- reading ---------------------------------------------------------------------------
    def _items(self, shard: Shard) -> dict[str, WorkItem]:
        key = (shard.dataset, shard.fingerprint, shard.part)
        if key in self._parts:
            self._parts.move_to_end(key)
            return self._parts[key]
        snap_key = (shard.dataset, shard.fingerprint)
        info = self._snapshots.get(snap_key)
        if info is None:
            info = read_snapshot_info(self.store, shard.dataset, shard.fingerprint)
            if info is None:
                raise StoreError(
                    f"the items snapshot of {shard.dataset} ({shard.fingerprint[:16]}) is "
                    "missing from the store; run the command again to rewrite it"
                )
            self._snapshots[snap_key] = info
        items = {item.id: item for item in table_to_items(read_items_part(info, shard.part))}
        self._parts[key] = items
        if len(self._parts) > ITEM_PARTS_CACHED:
            self._parts.popitem(last=False)
        return items

    def _solution_texts(self, shard: Shard) -> dict[tuple[str, int, str], str]:
        """`(item_id, epoch, text_hash) -> text` for the shard's cells, read from the fragments
        the shard names (or the whole partition when one was compacted away since planning)."""
        gen = str(shard.gen_condition_id)
        wanted = shard.cells.select(["item_id", "epoch"])
        tables = []
        for name in sorted(set(shard.cells.column("fragment").to_pylist())):
            table = self._fragment(gen, name)
            if table is None:  # compacted since planning: read the partition once
                partition = self.store.read_by_condition(SOLUTIONS, [gen], _TEXT_COLUMNS)
                tables = [partition[gen]]
                break
            tables.append(table)
        if not tables:
            return {}
        rows = pa.concat_tables(tables).join(wanted, ["item_id", "epoch"], join_type="inner")
        rows = rows.filter(pc.equal(rows.column("status"), "ok"))
        return {
            (i, e, h): t
            for i, e, h, t in zip(
                rows.column("item_id").to_pylist(),
                rows.column("epoch").to_pylist(),
                rows.column("text_hash").to_pylist(),
                rows.column("text").to_pylist(),
                strict=True,
            )
        }

    def _fragment(self, gen: str, name: str) -> pa.Table | None:
        key = (gen, name)
        if key in self._fragments:
            self._fragments.move_to_end(key)
            return self._fragments[key]
        partition = self.store.partition(SOLUTIONS, gen)
        info = next((f for f in list_fragments(partition) if f.name == name), None)
        if info is None:
            return None
        (table,) = read_fragments(partition, [info], SOLUTION_SCHEMA, _TEXT_COLUMNS)
        if table is None:
            return None
        self._fragments[key] = table
        if len(self._fragments) > FRAGMENTS_CACHED:
            self._fragments.popitem(last=False)
        return table

    def _provider(self, endpoint_name: str) -> Provider:
        provider = self._providers.get(endpoint_name)
        if provider is None:
            settings: EndpointSettings = self.context.endpoints[endpoint_name]
            provider = make_provider(
                settings,
                permit_source=self._permit_sources.get(endpoint_name),
                max_concurrency=self.context.concurrency.get(endpoint_name),
                field=f"endpoints.{endpoint_name}",
            )
            self._providers[endpoint_name] = provider
        return provider


def _hits_by_index(hits: pa.Table, keys: list[str]) -> dict[int, ModelResult]:
    if hits.num_rows == 0:
        return {}
    position = {key: i for i, key in enumerate(keys)}
    out: dict[int, ModelResult] = {}
    for row in hits.to_pylist():
        out[position[row["key"]]] = ModelResult(
            ok=True,
            text=row["text"],
            finish_reason=row["finish_reason"],
            usage=Usage(
                input_tokens=row["input_tokens"],
                output_tokens=row["output_tokens"],
                cached_input_tokens=row["cached_input_tokens"],
                reasoning_tokens=row["reasoning_tokens"],
            ),
            latency_ms=row["latency_ms"],
            request_id=row["request_id"],
            attempts=0,
        )
    return out


def _solver_hints(item: WorkItem, epoch: int) -> dict[str, Any]:
    return {
        "item_id": item.id,
        "epoch": epoch,
        "target": item.target,
        "modality": item.modality,
        "difficulty": item.difficulty,
    }


def _judge_hints(item: WorkItem, epoch: int, solution: str) -> dict[str, Any]:
    return _solver_hints(item, epoch) | {"role": "judge", "solution": solution}
