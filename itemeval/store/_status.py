"""Status counts per condition (what `itemeval status` prints), from the partitions' summaries.

Each partition's cells counted by status, codes, cache and tier (`_summary.read_groups`): from
the summary's footer alone when it covers every fragment, else from its cells merged with the
fragments it does not cover. The Python loop runs over the handful of groups, never over rows.
`usd_spent` also counts superseded rows (an error that was retried, a duplicate from a re-run;
compaction keeps their cost in the fragment it writes): it is what the study paid, while `usd`
is what its current logical rows cost.

Prompt caching: `cached_input_tokens` sums the input tokens providers served from their prompt
caches (logical rows, like the other token counts); `prompt_cache_saved_usd` is what those reads
saved on every paid row (response-cache hits paid nothing and are left out): the cached tokens
times the difference between the model's input and cached-input prices, at the prices of the
table given (none given: 0). Anthropic's premium for cache writes is part of `usd`, what was paid;
it is not netted out here, since the rows keep no count of written tokens.

Batch tier: `batch` counts the logical rows answered through a provider's batch API
(`tier = batch`); `batch_saved_usd` is what those paid rows would have cost more at live prices
(their `usd` is at the batch price: `usd / share - usd`, the share from the price table).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from itemeval.providers.money import Pricing
from itemeval.store._layout import Stage, StudyStore
from itemeval.store._summary import read_groups


@dataclass(slots=True)
class ConditionStatus:
    """Counts of one condition's logical rows."""

    stage: str
    condition_id: str
    expected: int | None = None  # cells the design asks for (None when not given)
    rows: int = 0  # logical rows stored (ok + error)
    done: int = 0  # logical rows with status ok (parse failures included)
    errors: dict[str, int] = field(default_factory=dict)  # error rows by error_code
    parse_failures: int = 0  # grades: ok rows with parse_ok = false
    cached: int = 0  # rows answered from the response cache
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0  # part of input_tokens read from providers' prompt caches
    usd: float = 0.0  # cost of the logical rows
    usd_spent: float = 0.0  # cost of every physical row, superseded ones included
    prompt_cache_saved_usd: float = 0.0  # what prompt-cache reads saved on the paid rows
    batch: int = 0  # rows answered through a provider's batch API (tier batch)
    batch_saved_usd: float = 0.0  # what the batch price saved on the paid batch rows

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def pending(self) -> int | None:
        """Cells without an ok row (grades: without any ok grade; see `pending_grade` for
        grades made stale by a changed solution)."""
        return None if self.expected is None else max(self.expected - self.done, 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "condition_id": self.condition_id,
            "expected": self.expected,
            "rows": self.rows,
            "done": self.done,
            "pending": self.pending,
            "errors": dict(self.errors),
            "parse_failures": self.parse_failures,
            "cached": self.cached,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "usd": self.usd,
            "usd_spent": self.usd_spent,
            "prompt_cache_saved_usd": self.prompt_cache_saved_usd,
            "batch": self.batch,
            "batch_saved_usd": self.batch_saved_usd,
        }


def status_counts(
    store: StudyStore,
    stage: Stage | str,
    condition_ids: Sequence[str] | None = None,
    expected: int | Mapping[str, int] | None = None,
    pricing: Pricing | None = None,
) -> list[ConditionStatus]:
    """One `ConditionStatus` per condition id (all stored ones when None), in the given order;
    with `pricing`, what prompt caching and the batch tier saved. Read from each partition's
    summary and the fragments it does not cover (`read_groups`)."""
    stage = store.stage(stage)
    if condition_ids is None:
        condition_ids = store.condition_ids(stage)
    conditions = list(dict.fromkeys(condition_ids))
    out = []
    for cid in conditions:
        read = read_groups(stage, store.partition(stage, cid))
        wanted = expected.get(cid) if isinstance(expected, Mapping) else expected
        status = ConditionStatus(stage.name, cid, expected=wanted)
        spent = read.spent
        status.usd_spent = float(pc.sum(spent.column("usd")).as_py() or 0.0)
        if pricing is not None:
            status.prompt_cache_saved_usd = _saved(spent, pricing)
            status.batch_saved_usd = _batch_saved(spent, pricing)
        for row in read.groups.to_pylist():
            _fold(status, row)
        _round_money(status)
        out.append(status)
    return out


#: Dollars are sums of floats, added row by row or from a summary's per-model sums: the two
#: orders differ in the last bits (0.0054435 vs 0.0054434999999999996). Rounded to a millionth of
#: a cent, every reader prints the same digits, with or without summaries.
MONEY_DIGITS = 12


def _round_money(status: ConditionStatus) -> None:
    status.usd = round(status.usd, MONEY_DIGITS)
    status.usd_spent = round(status.usd_spent, MONEY_DIGITS)
    status.prompt_cache_saved_usd = round(status.prompt_cache_saved_usd, MONEY_DIGITS)
    status.batch_saved_usd = round(status.batch_saved_usd, MONEY_DIGITS)


def _fold(status: ConditionStatus, group: Mapping[str, Any]) -> None:
    count = int(group["cells"])
    status.rows += count
    if group["ok"]:
        status.done += count
        if group.get("parse_ok") is False:
            status.parse_failures += count
    else:
        code = group["error_code"] or "unknown"
        status.errors[code] = status.errors.get(code, 0) + count
    if group["cached"]:
        status.cached += count
    if group["batch"]:
        status.batch += count
    status.input_tokens += int(group["input_tokens"] or 0)
    status.output_tokens += int(group["output_tokens"] or 0)
    status.cached_input_tokens += int(group["cached_input_tokens"] or 0)
    status.usd += float(group["usd"] or 0.0)


def _saved(spent: pa.Table, pricing: Pricing) -> float:
    """What prompt-cache reads saved on the paid physical rows, per model's prices."""
    saved = 0.0
    for name, tokens in zip(
        spent.column("model").to_pylist(),
        spent.column("paid_cached_input_tokens").to_pylist(),
        strict=True,
    ):
        price = pricing.price(name) if name else None
        if price is not None and tokens:
            saved += price.read_savings(int(tokens))
    return saved


def _batch_saved(spent: pa.Table, pricing: Pricing) -> float:
    """What the batch price saved on the paid batch rows, per model's batch share."""
    saved = 0.0
    for name, usd in zip(
        spent.column("model").to_pylist(), spent.column("paid_batch_usd").to_pylist(), strict=True
    ):
        price = pricing.price(name) if name else None
        share = price.batch_share if price is not None else None
        if share and usd:
            saved += float(usd) / share - float(usd)
    return saved


def status_table(statuses: Sequence[ConditionStatus]) -> pa.Table:
    """The statuses as an arrow table (errors as a `code=count` string), for printing/export."""
    rows = []
    for s in statuses:
        row = s.as_dict()
        row["errors"] = ", ".join(f"{k}={v}" for k, v in sorted(s.errors.items()))
        rows.append(row)
    return pa.Table.from_pylist(rows)
