"""The cost estimate and the confirmation gate: cost is visible before anything is spent.

Tokens are estimated from the real prompts: every item is rendered through every prompt template
and counted at about four characters a token (no tokenizer download, ever). Output tokens follow
the answer the prompt asks for (a letter is a few tokens, a chain of thought about two hundred),
plus a reasoning allowance when a reasoning effort or thinking budget is set, capped by
`max_tokens`. Judge calls are estimated from the rubric rendered with a response of the expected
length. USD comes from the pricing table; unpriced models count as $0 and are listed as warnings.

"Remaining" is what is not yet stored: generate cells without an `ok` solution, and judge cells
for every solution not yet graded (including solutions still to be generated).

The gate: remaining above `budget.max_usd` stops with exit 4 whatever the flags; above
`budget.confirm_above_usd` it needs `--yes` or an interactive yes, else exit 3.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.config import Budget
from itemeval.design import Design, GenerateCondition, GradeCondition
from itemeval.errors import BudgetExceeded, GateDeclined
from itemeval.providers.pricing import Pricing
from itemeval.providers.types import SamplingParams, Usage
from itemeval.store import CellMasks
from itemeval.templates import Template
from itemeval.templates.answer_formats import answer_kind
from itemeval.workitem import WorkItem

CHARS_PER_TOKEN = 4.0
MESSAGE_OVERHEAD_TOKENS = 4

#: Expected visible output tokens by answer shape, for direct answers.
_DIRECT_OUTPUT = {
    "choice": 3,
    "boolean": 3,
    "ternary": 5,
    "number": 6,
    "cloze": 6,
    "word": 6,
    "short": 16,
    "long": 160,
    "free": 120,
}
_CHAIN_OF_THOUGHT_OUTPUT = 220
_JUDGE_OUTPUT = 70
_REASONING_ALLOWANCE = {"minimal": 64, "low": 512, "medium": 2048, "high": 8192}


def count_tokens(text: str) -> int:
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def message_tokens(messages: Iterable[dict[str, str]]) -> int:
    return sum(count_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def expected_output_tokens(prompt: Template, item: WorkItem, params: SamplingParams) -> int:
    if "ANSWER:" in prompt.text:
        visible = _CHAIN_OF_THOUGHT_OUTPUT
    else:
        visible = _DIRECT_OUTPUT[answer_kind(item.modality, item.target)]
    hidden = 0
    if params.reasoning_effort:
        hidden = _REASONING_ALLOWANCE[params.reasoning_effort]
    elif params.thinking_budget:
        hidden = params.thinking_budget // 2
    total = visible + hidden
    return min(total, params.max_tokens) if params.max_tokens else total


@dataclass
class EstimateLine:
    """One condition's cells, tokens and USD: all of it, and what remains to be done."""

    stage: str  # "generate" | "grade"
    condition_id: str
    condition: str  # slug
    model: str
    cells: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    remaining_cells: int = 0
    remaining_input_tokens: int = 0
    remaining_output_tokens: int = 0
    remaining_usd: float = 0.0
    priced: bool = True


@dataclass
class Estimate:
    lines: list[EstimateLine] = field(default_factory=list)
    items: int = 0
    epochs: int = 1
    warnings: list[str] = field(default_factory=list)

    @property
    def total_usd(self) -> float:
        return sum(line.usd for line in self.lines)

    @property
    def remaining_usd(self) -> float:
        return sum(line.remaining_usd for line in self.lines)

    def by(self, key: str) -> dict[str, dict[str, float]]:
        """Totals grouped by `stage` or `model`."""
        groups: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for line in self.lines:
            group = groups[getattr(line, key)]
            for name in ("cells", "input_tokens", "output_tokens", "usd"):
                group[name] += getattr(line, name)
            group["remaining_cells"] += line.remaining_cells
            group["remaining_usd"] += line.remaining_usd
        return {k: dict(v) for k, v in groups.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "epochs": self.epochs,
            "total_usd": round(self.total_usd, 6),
            "remaining_usd": round(self.remaining_usd, 6),
            "by_stage": self.by("stage"),
            "by_model": self.by("model"),
            "conditions": [asdict(line) for line in self.lines],
            "warnings": self.warnings,
        }


class _PerItem:
    """Per-item token estimates of one prompt (or rubric), kept as arrow batches (compact: a
    million items take tens of megabytes) and read as one table for joins."""

    def __init__(self) -> None:
        self._batches: list[pa.RecordBatch] = []
        self._table: pa.Table | None = None

    def add(self, item_ids: list[str], input_tokens: list[int], output_tokens: list[int]) -> None:
        self._batches.append(
            pa.record_batch(
                [
                    pa.array(item_ids, pa.string()),
                    pa.array(input_tokens, pa.int64()),
                    pa.array(output_tokens, pa.int64()),
                ],
                schema=_PER_ITEM_SCHEMA,
            )
        )
        self._table = None

    def table(self) -> pa.Table:
        if self._table is None:
            self._table = pa.Table.from_batches(self._batches, schema=_PER_ITEM_SCHEMA)
        return self._table


_PER_ITEM_SCHEMA = pa.schema(
    [("item_id", pa.string()), ("input_tokens", pa.int64()), ("output_tokens", pa.int64())]
)


@dataclass
class TokenTables:
    """Per-item token estimates: one table per distinct solver shape (prompt and output-length
    parameters) and one per (judge, solver shape). Built in one pass over the items."""

    items: int = 0
    generate: dict[tuple, _PerItem] = field(default_factory=dict)
    judge: dict[tuple, _PerItem] = field(default_factory=dict)


def token_tables(design: Design, batches: Iterable[list[WorkItem]]) -> TokenTables:
    """Render every item through every prompt (and rubric) once and count tokens."""
    # Token counts depend on the prompt and the output-length parameters, not on the model, so
    # each distinct shape is rendered once per item, whatever the number of models.
    shapes = {_shape(c): c for c in reversed(design.generate)}
    tables = TokenTables(
        generate={shape: _PerItem() for shape in shapes},
        judge={(j.id, shape): _PerItem() for j in design.judges for shape in shapes},
    )
    for batch in batches:
        tables.items += len(batch)
        ids = [item.id for item in batch]
        for shape, cond in shapes.items():
            outputs = [expected_output_tokens(cond.prompt, item, cond.params) for item in batch]
            inputs = [message_tokens(cond.prompt.render_prompt(item)) for item in batch]
            tables.generate[shape].add(ids, inputs, outputs)
            for judge in design.judges:
                assert judge.rubric is not None
                judged = [
                    message_tokens(
                        judge.rubric.render_rubric(item, "x" * int(out * CHARS_PER_TOKEN))
                    )
                    for item, out in zip(batch, outputs, strict=True)
                ]
                tables.judge[(judge.id, shape)].add(ids, judged, [_JUDGE_OUTPUT] * len(batch))
    return tables


def build_estimate(
    design: Design,
    tables: TokenTables,
    pricing: Pricing,
    *,
    pending_generate: CellMasks | None = None,
    pending_grade: CellMasks | None = None,
) -> Estimate:
    """Price every condition. `pending_generate` and `pending_grade` are the store's pending
    cells over the same items, in the same order, as `tables`; when None (no store yet)
    everything remains."""
    n_items = tables.items
    estimate = Estimate(items=n_items, epochs=design.epochs)
    unpriced: set[str] = set()
    for cond in design.generate:
        per_item = tables.generate[_shape(cond)].table()
        line = _line("generate", cond, cond.model_id, per_item, design.epochs, pricing, unpriced)
        counts = pending_generate.per_item(cond.id) if pending_generate is not None else None
        _remaining(line, per_item, pricing, counts)
        estimate.lines.append(line)
    for grader in design.grade:
        line = EstimateLine("grade", grader.id, grader.slug, grader.label)
        for cond in design.generate:
            counts = _pending_grade_counts(grader, cond, pending_generate, pending_grade)
            if grader.kind == "judge":
                per_item = tables.judge[(grader.id, _shape(cond))].table()
                part = _line(
                    "grade", grader, grader.label, per_item, design.epochs, pricing, unpriced
                )
                _remaining(part, per_item, pricing, counts)
            else:  # verifiable scorers: cells, but no tokens and no cost
                part = EstimateLine("grade", grader.id, grader.slug, grader.label)
                part.cells = n_items * design.epochs
                part.remaining_cells = part.cells if counts is None else int(counts.sum())
            _add(line, part)
        line.priced = grader.kind != "judge" or grader.label not in unpriced
        estimate.lines.append(line)
    estimate.warnings.extend(
        f"no price for model {model!r}: counted as $0 (add it to a pricing file)"
        for model in sorted(unpriced)
    )
    return estimate


def _shape(cond: GenerateCondition) -> tuple[str, int | None, str | None, int | None]:
    params = cond.params
    return (cond.prompt.name, params.max_tokens, params.reasoning_effort, params.thinking_budget)


def _cost(pricing: Pricing, model: str, input_tokens: int, output_tokens: int) -> float:
    price = pricing.price(model)
    if price is None:
        return 0.0
    return price.cost(Usage(input_tokens=input_tokens, output_tokens=output_tokens))


def _line(
    stage: str,
    cond: GenerateCondition | GradeCondition,
    model: str,
    per_item: pa.Table,
    epochs: int,
    pricing: Pricing,
    unpriced: set[str],
) -> EstimateLine:
    input_tokens = int(pc.sum(per_item["input_tokens"]).as_py() or 0) * epochs
    output_tokens = int(pc.sum(per_item["output_tokens"]).as_py() or 0) * epochs
    priced = pricing.price(model) is not None
    if not priced:
        unpriced.add(model)
    return EstimateLine(
        stage=stage,
        condition_id=cond.id,
        condition=cond.slug,
        model=model,
        cells=per_item.num_rows * epochs,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        usd=_cost(pricing, model, input_tokens, output_tokens),
        priced=priced,
    )


def _remaining(
    line: EstimateLine, per_item: pa.Table, pricing: Pricing, counts: np.ndarray | None
) -> None:
    """Fill the remaining figures from `counts`, the pending cells of each item (aligned with
    `per_item`'s rows); None means everything remains."""
    if counts is None:
        line.remaining_cells = line.cells
        line.remaining_input_tokens = line.input_tokens
        line.remaining_output_tokens = line.output_tokens
        line.remaining_usd = line.usd
        return
    line.remaining_cells = int(counts.sum())
    line.remaining_input_tokens = int(counts @ per_item.column("input_tokens").to_numpy())
    line.remaining_output_tokens = int(counts @ per_item.column("output_tokens").to_numpy())
    line.remaining_usd = _cost(
        pricing, line.model, line.remaining_input_tokens, line.remaining_output_tokens
    )


def _add(total: EstimateLine, part: EstimateLine) -> None:
    for name in (
        "cells",
        "input_tokens",
        "output_tokens",
        "usd",
        "remaining_cells",
        "remaining_input_tokens",
        "remaining_output_tokens",
        "remaining_usd",
    ):
        setattr(total, name, getattr(total, name) + getattr(part, name))


def _pending_grade_counts(
    grader: GradeCondition,
    cond: GenerateCondition,
    pending_generate: CellMasks | None,
    pending_grade: CellMasks | None,
) -> np.ndarray | None:
    """Grade cells still to do per item: ungraded stored solutions plus solutions still to
    generate."""
    if pending_generate is None or pending_grade is None:
        return None
    return pending_generate.per_item(cond.id) + pending_grade.per_item((grader.id, cond.id))


# -- the gate --------------------------------------------------------------------------------


def gate(
    remaining_usd: float,
    budget: Budget,
    *,
    yes: bool,
    interactive: bool | None = None,
    ask: Callable[[str], str] = input,
) -> str:
    """Allow the run (saying how: `below-threshold`, `--yes` or `prompt`), or raise
    `BudgetExceeded` (exit 4) / `GateDeclined` (exit 3)."""
    if budget.max_usd is not None and remaining_usd > budget.max_usd:
        raise BudgetExceeded(
            f"the estimated remaining cost ${remaining_usd:,.2f} is above budget.max_usd "
            f"${budget.max_usd:,.2f}; nothing was started. Narrow the run (--limit N, "
            "budget.policy: dev, --condition) or raise budget.max_usd in the study file."
        )
    threshold = budget.confirm_above_usd
    if threshold is None or remaining_usd <= threshold:
        return "below-threshold"
    if yes:
        return "--yes"
    if interactive is None:
        interactive = sys.stdin.isatty()
    question = (
        f"The estimated remaining cost is ${remaining_usd:,.2f} "
        f"(confirmation needed above ${threshold:,.2f}). Proceed? [y/N] "
    )
    if interactive and ask(question).strip().lower() in ("y", "yes"):
        return "prompt"
    raise GateDeclined(
        f"the estimated remaining cost ${remaining_usd:,.2f} is above budget.confirm_above_usd "
        f"${threshold:,.2f} and was not confirmed; run again with --yes to proceed"
    )
