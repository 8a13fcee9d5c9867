"""The per-call path: what happens to one model call of a shard, in plain Python (no Ray).

    calls = ShardCalls(endpoints=..., pricing=..., provider_for=..., account=..., cache=..., ...)
    outcome = await calls.run(target, requests, item_ids, epochs, fresh=shard.dispatched_before)

- `requests.py`: a shard's cells rendered into `ModelRequest`s (prompts, rubrics, pairwise)
- `shard_calls.py`: `ShardCalls`, the path itself: response cache, budget reservation, the
  provider, hedging of stragglers, the journal; `worst_case_usd`
- `spend.py`: money during a run: the run's `SpendLedger` and each worker's `SpendAccount`
- `allowance.py`: what one run may spend (`budget.max_usd`, `budget.study_max_usd`)
- `hedging.py`: a second request for a straggling call in a shard's tail
- `journal.py`: paid answers on their way to the response cache, durable within a second
- `rows.py`: call results to store rows (solutions, grades, cached responses)

`itemeval.runtime` runs shards (in-process or on Ray) and wraps `SpendLedger` in an actor;
nothing here imports Ray. Names are imported on first use.
"""

from __future__ import annotations

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    shard_calls: CallOutcome CallTarget Interrupted ShardCalls worst_case_usd
    spend: LedgerState LocalSpendSource SpendAccount SpendLedger SpendSource
    allowance: Allowance run_allowance
    hedging: Hedges
    journal: ResponseJournal
    rows: Call
    requests: generate_requests judge_requests pairwise_requests
    """,
)
