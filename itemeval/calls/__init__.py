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

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "CallOutcome": "shard_calls",
    "CallTarget": "shard_calls",
    "Interrupted": "shard_calls",
    "ShardCalls": "shard_calls",
    "worst_case_usd": "shard_calls",
    "LedgerState": "spend",
    "LocalSpendSource": "spend",
    "SpendAccount": "spend",
    "SpendLedger": "spend",
    "SpendSource": "spend",
    "Allowance": "allowance",
    "run_allowance": "allowance",
    "Hedges": "hedging",
    "ResponseJournal": "journal",
    "Call": "rows",
    "generate_requests": "requests",
    "judge_requests": "requests",
    "pairwise_requests": "requests",
}

__all__ = [
    "Allowance",
    "Call",
    "CallOutcome",
    "CallTarget",
    "Hedges",
    "Interrupted",
    "LedgerState",
    "LocalSpendSource",
    "ResponseJournal",
    "ShardCalls",
    "SpendAccount",
    "SpendLedger",
    "SpendSource",
    "generate_requests",
    "judge_requests",
    "pairwise_requests",
    "run_allowance",
    "worst_case_usd",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'itemeval.calls' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"itemeval.calls.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # pragma: no cover
    from itemeval.calls.allowance import Allowance, run_allowance
    from itemeval.calls.hedging import Hedges
    from itemeval.calls.journal import ResponseJournal
    from itemeval.calls.requests import generate_requests, judge_requests, pairwise_requests
    from itemeval.calls.rows import Call
    from itemeval.calls.shard_calls import (
        CallOutcome,
        CallTarget,
        Interrupted,
        ShardCalls,
        worst_case_usd,
    )
    from itemeval.calls.spend import (
        LedgerState,
        LocalSpendSource,
        SpendAccount,
        SpendLedger,
        SpendSource,
    )
