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

from typing import TYPE_CHECKING

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


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from itemeval.calls._allowance import Allowance as Allowance
    from itemeval.calls._allowance import run_allowance as run_allowance
    from itemeval.calls._allowance import study_spent as study_spent
    from itemeval.calls._hedging import Hedges as Hedges
    from itemeval.calls._journal import ResponseJournal as ResponseJournal
    from itemeval.calls._requests import VERDICT as VERDICT
    from itemeval.calls._requests import generate_requests as generate_requests
    from itemeval.calls._requests import judge_requests as judge_requests
    from itemeval.calls._requests import pairwise_requests as pairwise_requests
    from itemeval.calls._rows import Call as Call
    from itemeval.calls._rows import grade_row as grade_row
    from itemeval.calls._rows import judge_row as judge_row
    from itemeval.calls._rows import pairwise_row as pairwise_row
    from itemeval.calls._rows import response_row as response_row
    from itemeval.calls._rows import scorer_row as scorer_row
    from itemeval.calls._rows import solution_row as solution_row
    from itemeval.calls._shard_calls import CallOutcome as CallOutcome
    from itemeval.calls._shard_calls import CallTarget as CallTarget
    from itemeval.calls._shard_calls import Interrupted as Interrupted
    from itemeval.calls._shard_calls import ShardCalls as ShardCalls
    from itemeval.calls._shard_calls import worst_case_usd as worst_case_usd
    from itemeval.calls._spend import LedgerReply as LedgerReply
    from itemeval.calls._spend import LedgerState as LedgerState
    from itemeval.calls._spend import LocalSpendSource as LocalSpendSource
    from itemeval.calls._spend import SpendAccount as SpendAccount
    from itemeval.calls._spend import SpendLedger as SpendLedger
    from itemeval.calls._spend import SpendSource as SpendSource
