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
    identifiers (`itemeval.spec.Modality` values) or None when an adapter cannot tell.
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

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> WorkItem:
        return cls(
            id=row["item_id"],
            input=row["input"],
            target=row["target"] or "",
            grading_scheme=row.get("grading_scheme"),
            metadata=json.loads(row["metadata"]) if row.get("metadata") else {},
            dataset=row.get("dataset") or "",
            modality=row.get("modality"),
            task_prompt=row.get("task_prompt"),
            difficulty=row.get("difficulty"),
        )


def items_to_table(items: Iterable[WorkItem]) -> pa.Table:
    """Rows to an arrow table with `ITEM_SCHEMA`."""
    return pa.Table.from_pylist([item.to_row() for item in items], schema=ITEM_SCHEMA)


def table_to_items(table: pa.Table) -> list[WorkItem]:
    return [WorkItem.from_row(row) for row in table.to_pylist()]
