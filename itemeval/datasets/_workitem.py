"""The canonical work item: what every adapter produces and every stage consumes.

The contract (`../shared/spec/pipeline-concepts.md`) names five fields: `id`, `input`, `target`,
`grading_scheme`, `metadata`. itemeval keeps four more as typed fields because the pipeline
uses them on every item (templates, scorers, the simulated provider, reports): the dataset it came
from, its modality, its effective task prompt (the system message) and its difficulty. Everything
else an adapter knows about a row lives in `metadata`.

Inside the pipeline items travel as arrow tables with `ITEM_SCHEMA` (the items snapshot in the
store is written with it); `WorkItem` is the row form for code that handles one item at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

ITEM_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("input", pa.string(), nullable=False),
        pa.field("target", pa.string(), nullable=False),
        pa.field("grading_scheme", pa.string()),
        pa.field("modality", pa.string()),
        pa.field("task_prompt", pa.string()),
        pa.field("difficulty", pa.float64()),
        # JSON object text: arbitrary, per-dataset keys (subject, choices, support, ...)
        pa.field("metadata", pa.string(), nullable=False),
    ]
)


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One benchmark item in the form the pipeline runs it.

    `id` is unique across all datasets of a study (compared case-insensitively). `target` is the
    reference answer and may be empty (judge-only items). `modality` is one of the spec's
    identifiers (`itemeval.datasets.format.Modality` values) or None when an adapter cannot tell.
    """

    id: str
    input: str
    target: str = ""
    grading_scheme: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    dataset: str = ""
    modality: str | None = None
    task_prompt: str | None = None
    difficulty: float | None = None

    def to_row(self) -> dict[str, Any]:
        return {
            "item_id": self.id,
            "dataset": self.dataset,
            "input": self.input,
            "target": self.target,
            "grading_scheme": self.grading_scheme,
            "modality": self.modality,
            "task_prompt": self.task_prompt,
            "difficulty": self.difficulty,
            "metadata": json.dumps(self.metadata, sort_keys=True, ensure_ascii=False),
        }


def items_to_table(items: Iterable[WorkItem]) -> pa.Table:
    """Rows to an arrow table with `ITEM_SCHEMA` (built column by column: a planned run
    converts every item once, and row dicts cost three times as much)."""
    items = list(items)
    columns = [
        [item.id for item in items],
        [item.dataset for item in items],
        [item.input for item in items],
        [item.target for item in items],
        [item.grading_scheme for item in items],
        [item.modality for item in items],
        [item.task_prompt for item in items],
        [item.difficulty for item in items],
        [json.dumps(item.metadata, sort_keys=True, ensure_ascii=False) for item in items],
    ]
    arrays = [pa.array(values, f.type) for values, f in zip(columns, ITEM_SCHEMA, strict=True)]
    return pa.Table.from_arrays(arrays, schema=ITEM_SCHEMA)


def table_to_items(table: pa.Table) -> list[WorkItem]:
    """`ITEM_SCHEMA` rows (or a subset of its columns) back to items, column by column."""
    n = table.num_rows
    names = set(table.column_names)

    def column(name: str) -> list[Any]:
        return table.column(name).to_pylist() if name in names else [None] * n

    metadata = [json.loads(text) if text else {} for text in column("metadata")]
    return [
        WorkItem(
            id=item_id,
            input=text,
            target=target or "",
            grading_scheme=scheme,
            metadata=meta,
            dataset=dataset or "",
            modality=modality,
            task_prompt=task_prompt,
            difficulty=difficulty,
        )
        for item_id, text, target, scheme, meta, dataset, modality, task_prompt, difficulty in zip(
            column("item_id"),
            column("input"),
            column("target"),
            column("grading_scheme"),
            metadata,
            column("dataset"),
            column("modality"),
            column("task_prompt"),
            column("difficulty"),
            strict=True,
        )
    ]
