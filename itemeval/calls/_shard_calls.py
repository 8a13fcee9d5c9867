"""The call path of one shard: the response cache first, then the budget, then the provider.

    outcome = await calls.run(target, requests, item_ids, epochs, fresh=shard.dispatched_before)

1. One vectorised cache lookup for the whole shard, by request content (`store/_cache.py`);
   a shard dispatched again after a failure lists the cache afresh, so it finds what its first
   attempt paid for wherever that ran. Under `--force` only answers this run paid are reused.
   Identical requests within the shard (items alike) are sent once, and the answer fanned out
   to the others as response-cache hits (across shards, see `shards.IdenticalCells`).
2. For each miss, the call's worst case is reserved with the run's ledger (`spend.py`); a call
   that does not fit is not sent and leaves no row (its cell stays pending).
3. The provider call; its real cost settles the reservation. On an endpoint with `hedge:`, a
   call straggling in the shard's tail gets a second request, reserved too; the first answer
   wins and both are paid (`hedging.py`). Every attempt abandoned without an answer (deadline,
   timeout, a hedge's loser, an interruption) is charged its worst case, and under a cap a
   retry is reserved before it is sent (`providers/money/_attempts.py`).
4. A fresh, successful answer goes to the journal (`journal.py`) the moment it arrives, so it is
   in the cache within about a second, before the shard's store fragment.

Cancelled (an interrupted run), it cancels the calls in flight, settles them (each attempt in
flight at its worst case: the provider may bill it), and re-raises; the
calls that finished are in `CallOutcome.calls` of the exception's `outcome` attribute so the
caller can still write them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from itemeval.calls._hedging import Hedges, RaceResult, ShardTail, race
from itemeval.calls._journal import ResponseJournal
from itemeval.calls._overbilling import OverBilling, WorstUsage
from itemeval.calls._rows import Call, response_row
from itemeval.calls._spend import SpendAccount
from itemeval.errors import Interrupted
from itemeval.providers import EndpointSettings
from itemeval.providers.money import (
    ATTEMPTS,
    AttemptMeter,
    ModelPrice,
    Pricing,
    input_token_bound,
    output_token_bound,
)
from itemeval.providers.types import ErrorCode, ModelRequest, ModelResult, Provider, Usage
from itemeval.secrets import redact
from itemeval.store import (
    LegacyLookup,
    ResponseCache,
    cache_key,
    legacy_cache_key,
    request_hashes,
)


@dataclass(frozen=True, slots=True)
class CallTarget:
    """Who a shard's requests go to, and where their answers are cached."""

    condition_id: str
    group: str  # the response cache group (`store.cache_group`)
    model: str
    endpoint: str


@dataclass
class CallOutcome:
    """The calls of one shard: `calls[i]` for request i when it was answered (fresh or cached);
    absent when it was not sent (budget) or was cancelled."""

    calls: dict[int, Call] = field(default_factory=dict)
    not_sent: int = 0  # calls that did not fit under the budget cap


class ShardCalls:
    """The call path shared by the generate and judge stages of one worker process."""

    def __init__(
        self,
        *,
        endpoints: dict[str, EndpointSettings],
        pricing: Pricing,
        provider_for: Callable[[str], Provider],
        account: SpendAccount,
        cache: ResponseCache | None,
        journal: ResponseJournal | None,
        reuse_since: datetime | None = None,
    ):
        """`reuse_since`: under `--force`, only cache entries written since then (this run's
        own answers) are reused; None reuses every entry."""
        self._endpoints = endpoints
        self._pricing = pricing
        self._provider_for = provider_for
        self.account = account
        self.cache = cache
        self.journal = journal
        self._reuse_since = reuse_since
        self._hedges: dict[tuple[str, str], Hedges] = {}  # per endpoint and model
        self.over_billing = OverBilling()  # replies that billed more than their reservation

    async def run(
        self,
        target: CallTarget,
        requests: Sequence[ModelRequest],
        item_ids: Sequence[str],
        epochs: Sequence[int],
        *,
        fresh: bool = False,
    ) -> CallOutcome:
        outcome = CallOutcome()
        hashes = request_hashes(requests)
        keys = [cache_key(h, e) for h, e in zip(hashes, epochs, strict=True)]
        if self.cache is not None and requests:
            outcome.calls.update(
                await asyncio.to_thread(
                    self.cached_calls, target, requests, hashes, keys, item_ids, epochs, fresh
                )
            )
        todo = [i for i in range(len(requests)) if i not in outcome.calls]
        # Identical requests within the shard (two items alike) are sent once; the others get
        # that answer as a response-cache hit (`_fan_out`).
        first: dict[str, int] = {}
        repeats = {i: first.setdefault(keys[i], i) for i in todo}
        repeats = {i: j for i, j in repeats.items() if i != j}
        todo = [i for i in todo if i not in repeats]
        if not todo:
            return outcome
        provider = self._provider_for(target.endpoint)
        price = self._pricing.price(target.model)
        settings = self._endpoints[target.endpoint]
        tail = self._tail(target, settings, len(todo))
        tasks = {
            asyncio.ensure_future(
                self._call(
                    provider,
                    price,
                    settings,
                    target,
                    requests[i],
                    hashes[i],
                    keys[i],
                    item_ids[i],
                    epochs[i],
                    tail=tail,
                    index=i,
                    outcome=outcome,
                )
            ): i
            for i in todo
        }
        watcher = asyncio.ensure_future(tail.watch()) if tail is not None else None
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            _collect(tasks, outcome)
            _fan_out(outcome, repeats, item_ids, epochs, hashes, keys, cancelled=True)
            raise Interrupted(outcome) from None
        finally:
            if watcher is not None:
                watcher.cancel()
        _collect(tasks, outcome)
        _fan_out(outcome, repeats, item_ids, epochs, hashes, keys)
        for task in tasks:
            if task.exception() is not None:  # the ledger was unreachable: fail the shard
                raise task.exception()  # type: ignore[misc]
        return outcome

    def _tail(self, target: CallTarget, settings: EndpointSettings, calls: int) -> ShardTail | None:
        """The shard's tail for hedging, or None when the endpoint does not hedge."""
        if not settings.hedge.enabled or calls == 0:
            return None
        hedges = self._hedges.get((target.endpoint, target.model))
        if hedges is None:
            hedges = self._hedges[(target.endpoint, target.model)] = Hedges(settings.hedge)
        return ShardTail(hedges, calls)

    def cached_calls(
        self,
        target: CallTarget,
        requests: Sequence[ModelRequest],
        hashes: Sequence[str],
        keys: list[str],
        item_ids: Sequence[str],
        epochs: Sequence[int],
        fresh: bool = False,
        tier: str = "live",
    ) -> dict[int, Call]:
        """The requests the response cache answers, by index, as `cached` calls (blocking:
        call it in a thread). Also used by the batch tier before it submits anything."""
        if self.cache is None or not requests:
            return {}
        hits = self._lookup(target, requests, keys, epochs, fresh)
        return {
            index: Call(
                item_ids[index],
                epochs[index],
                result,
                hashes[index],
                keys[index],
                cached=True,
                tier=tier,
            )
            for index, result in hits.items()
        }

    def _lookup(
        self,
        target: CallTarget,
        requests: Sequence[ModelRequest],
        keys: list[str],
        epochs: Sequence[int],
        fresh: bool,
    ) -> dict[int, ModelResult]:
        assert self.cache is not None
        legacy = None
        if self._reuse_since is None and self.cache.has_legacy(target.condition_id):
            legacy = LegacyLookup(
                target.condition_id,
                [
                    legacy_cache_key(target.condition_id, r, e)
                    for r, e in zip(requests, epochs, strict=True)
                ],
            )
        hits = self.cache.lookup(
            target.group, keys, since=self._reuse_since, fresh=fresh, legacy=legacy
        )
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

    async def _call(
        self,
        provider: Provider,
        price: ModelPrice | None,
        settings: EndpointSettings,
        target: CallTarget,
        request: ModelRequest,
        request_sha256: str,
        key: str,
        item_id: str,
        epoch: int,
        *,
        tail: ShardTail | None = None,
        index: int = 0,
        outcome: CallOutcome | None = None,
    ) -> Call | None:
        """One cell's call. Its attempts are metered (`providers/money/_attempts.py`): each one
        abandoned without an answer (deadline, timeout, a hedge's loser, an interruption) is
        charged its worst case; under a cap every attempt in flight or abandoned is covered by a
        reservation first, so the call never costs more than it reserved."""
        capped = self.account.capped
        model = target.model
        changes = self.over_billing.changes(model)
        bound = (
            worst_case_usd(price, settings, request, self.over_billing.worst(model))
            if capped
            else None
        )
        if capped and (bound is None or not await self.account.reserve(bound)):
            if tail is not None:
                tail.not_sent()
            return None
        reserved = bound if capped and bound is not None else 0.0  # dollars held for this call
        charged = 0.0  # dollars of abandoned attempts already moved from reserved to spent
        charged_attempts = 0

        async def reserve_retry() -> bool:
            # The attempts abandoned so far are spent now: their reservations no longer wait
            # for anything (a call alone under the cap is refused, not left waiting on itself).
            nonlocal reserved, charged, charged_attempts
            assert bound is not None
            due = (meter.abandoned - charged_attempts) * bound
            if due > 0:
                self.account.settle(due, due, calls=0)
                reserved, charged = reserved - due, charged + due
                charged_attempts = meter.abandoned
            if not await self.account.reserve(bound):
                return False
            reserved += bound
            return True

        def outdated() -> bool:
            return self.over_billing.changes(model) != changes

        async def top_up() -> bool:
            # A reply of this model billed more than its reservation while this call waited:
            # cover the worst usage seen before sending (each attempt still held at the old
            # worst case), or do not send.
            nonlocal bound, reserved, changes
            assert bound is not None
            changes = self.over_billing.changes(model)
            larger = worst_case_usd(price, settings, request, self.over_billing.worst(model))
            if larger is None or larger <= bound:
                return True
            extra = (larger - bound) * max(1, meter.covered - charged_attempts)
            # Now or not at all: waiting could wait on the calls this one holds a slot from.
            if not await self.account.try_reserve(extra):
                return False
            reserved += extra
            bound = larger
            return True

        meter = AttemptMeter(reserve_retry if capped else None)
        if capped:
            meter.outdated, meter.top_up = outdated, top_up
        token = ATTEMPTS.set(meter)
        clock = tail.sent(index) if tail is not None else None
        hedge_granted = False

        async def reserve_hedge() -> bool:
            nonlocal reserved, hedge_granted
            assert tail is not None
            ask = bound if capped and bound is not None else 0.0
            if not await self.account.try_reserve(ask):
                tail.hedges.give_back()
                return False
            reserved += ask
            meter.covered += 1
            hedge_granted = True
            return True

        usd = 0.0
        raced: RaceResult | None = None
        try:
            if clock is None:  # no hedging: one request, without the race's coroutine
                raced = RaceResult(await _complete(provider, request))
            else:
                raced = await race(lambda: _complete(provider, request), clock, reserve_hedge)
            result = raced.result
            sent_at = clock.sent_at if clock is not None else None
            if tail is not None and sent_at is not None and result.ok and not raced.hedged:
                tail.hedges.observe(time.monotonic() - sent_at)
        finally:
            ATTEMPTS.reset(token)
            if capped and raced is not None and price is not None:
                self._watch_bills(price, settings, request, model, raced)
            usd = self._charge(price, settings, request, bound, meter, raced)
            self.account.settle(reserved, usd - charged, calls=1)
            if hedge_granted:
                sent = raced is None or raced.loser_sent
                self.account.settle(0.0, 0.0, calls=1 if sent else 0)
                if not sent and tail is not None:
                    tail.hedges.give_back()  # never left the limiter: not one of max_share
            if tail is not None and clock is not None:
                tail.ended(index)
        if meter.refused and meter.sent == 0:
            return None  # never sent (its larger reservation did not fit): the cell stays pending
        if meter.refused and outcome is not None:
            outcome.not_sent += 1  # a retry did not fit: the cap is reached
        result = _with_hedge(result, raced, usd)
        call = Call(item_id, epoch, result, request_sha256, key)
        if result.ok and self.journal is not None:
            self.journal.add(target.group, response_row(call, model=target.model))
        return call

    def _watch_bills(
        self,
        price: ModelPrice,
        settings: EndpointSettings,
        request: ModelRequest,
        model: str,
        raced: RaceResult,
    ) -> None:
        """Record a reply (or a hedge's loser) that billed more than the request's bounds."""
        output = output_token_bound(settings, request.params, price.max_output_tokens)
        if output is None:
            return
        inputs = input_token_bound(request.messages)
        for reply in (raced.result, raced.loser):
            if reply is not None:
                self.over_billing.observe(model, reply.usage, inputs, output)

    @staticmethod
    def _charge(
        price: ModelPrice | None,
        settings: EndpointSettings,
        request: ModelRequest,
        bound: float | None,
        meter: AttemptMeter,
        raced: RaceResult | None,
    ) -> float:
        """What a call cost: the usage its answers reported, and the worst case of each attempt
        abandoned without an answer (`providers/money/_attempts.py`)."""
        if price is None:
            return 0.0
        usd = 0.0
        if raced is not None:
            usd = price.cost(raced.result.usage)
            if raced.loser is not None:
                usd += price.cost(raced.loser.usage)
        abandoned = meter.abandoned
        if meter.sent == 0 and raced is not None and raced.loser_abandoned and raced.loser_sent:
            abandoned += 1  # a provider that does not report its attempts: the loser was sent
        if abandoned:
            worst = bound if bound is not None else worst_case_usd(price, settings, request)
            # Unbounded output (no cap, no max_tokens): the answer's cost is the best guess.
            usd += abandoned * (worst if worst is not None else usd)
        return usd


def _with_hedge(result: ModelResult, raced: RaceResult, usd: float) -> ModelResult:
    """The kept result, carrying what both requests of a hedged cell cost and sent."""
    if not raced.hedged:
        return result.priced(usd)
    other = raced.loser.attempts if raced.loser is not None else int(raced.loser_sent)
    return result.priced(usd, attempts=result.attempts + other)


def worst_case_usd(
    price: ModelPrice | None,
    settings: EndpointSettings,
    request: ModelRequest,
    worst: WorstUsage | None = None,
) -> float | None:
    """The most a call can cost, or None when it cannot be priced: a model without a price, or
    unbounded output (the plan refuses both under a cap, `planning.check_cap_bounds`; a call
    that still met one under a cap would not be sent). `worst`: the most the model's replies
    billed beyond their bounds so far (`overbilling.py`)."""
    if price is None:
        return None
    output = output_token_bound(settings, request.params, price.max_output_tokens)
    if output is None:
        return None
    inputs = input_token_bound(request.messages)
    if worst is not None:
        inputs, output = worst.input_bound(inputs), worst.output_bound(output)
    return price.worst_case(inputs, output)


async def _complete(provider: Provider, request: ModelRequest) -> ModelResult:
    try:
        return await provider.complete(request)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a bug, not a provider failure: keep it as a row, retried later
        return ModelResult(
            ok=False,
            error_code=ErrorCode.INTERNAL,
            error_message=redact(f"{type(exc).__name__}: {exc}"),
        )


def _fan_out(
    outcome: CallOutcome,
    repeats: dict[int, int],
    item_ids: Sequence[str],
    epochs: Sequence[int],
    hashes: Sequence[str],
    keys: Sequence[str],
    *,
    cancelled: bool = False,
) -> None:
    """Give each repeated request (index -> the index of the one sent) that request's answer,
    as a response-cache hit (nothing more was paid). A repeat of a call that did not fit under
    the cap was not sent either; one of a call cancelled with the shard is left out too."""
    for index, sent in repeats.items():
        call = outcome.calls.get(sent)
        if call is None:
            outcome.not_sent += 0 if cancelled else 1
            continue
        outcome.calls[index] = Call(
            item_ids[index],
            epochs[index],
            call.result,
            hashes[index],
            keys[index],
            cached=True,
            tier=call.tier,
        )


def _collect(tasks: dict[asyncio.Task[Call | None], int], outcome: CallOutcome) -> None:
    for task, index in tasks.items():
        if not task.done() or task.cancelled() or task.exception() is not None:
            continue
        call = task.result()
        if call is None:
            outcome.not_sent += 1
        else:
            outcome.calls[index] = call
