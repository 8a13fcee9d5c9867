"""The per-call path: what happens to one model call of a shard, in plain Python (no Ray).

    calls = ShardCalls(endpoints=..., pricing=..., provider_for=..., account=..., cache=..., ...)
    outcome = await calls.run(target, requests, item_ids, epochs, fresh=shard.dispatched_before)

- `_requests`: a shard's cells rendered into `ModelRequest`s (prompts, rubrics, pairwise)
- `_shard_calls`: `ShardCalls`, the path itself: response cache, budget reservation, the
  provider, hedging of stragglers, the journal; `worst_case_usd`
- `_spend`: money during a run: the run's `SpendLedger` and each worker's `SpendAccount`
- `_allowance`: what one run may spend (`budget.max_usd`, `budget.study_max_usd`)
- `_hedging`: a second request for a straggling call in a shard's tail
- `_journal`: paid answers on their way to the response cache, durable within a second
- `_rows`: call results to store rows (solutions, grades, cached responses)

`itemeval.runtime` runs shards (in-process or on Ray) and wraps `SpendLedger` in an actor;
nothing here imports Ray. The public names are `__all__`, imported on first use; the
modules are private.
"""

from __future__ import annotations

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _shard_calls: CallOutcome CallTarget Interrupted ShardCalls worst_case_usd
    _spend: LedgerReply LedgerState LocalSpendSource SpendAccount SpendLedger SpendSource
    _allowance: Allowance run_allowance study_spent
    _hedging: Hedges
    _journal: ResponseJournal
    _rows: Call grade_row judge_row pairwise_row response_row scorer_row solution_row
    _requests: VERDICT generate_requests judge_requests pairwise_requests
    """,
)
