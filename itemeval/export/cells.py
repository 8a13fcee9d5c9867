"""The small columns of every logical grade and solution of a plan, in memory, for the report.

The report aggregates; it never needs a text. So it reads only numbers, codes and keys
(deduplicated by the store), restricted to the plan's selection like the long table, and adds
what the statistics need:

* grades: `grade_condition_id, gen_condition_id, item_id, dataset, epoch, status, error_code,
  score, correct, parse_ok, parse_code, usd, stale, valid` where `valid` marks a final grade of
  the current answer (status ok, parsed, a verdict, not stale): the only grades accuracy counts;
* solutions: `gen_condition_id, item_id, dataset, epoch, status, error_code, usd, tokens,
  latency_ms, cached`.

About 60 bytes a grade: a million grades fit in well under a gigabyte.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from itemeval.export.conditions import DesignFacets
from itemeval.export.fetch import plain_columns
from itemeval.planning import Plan
from itemeval.store import GRADES, SOLUTIONS

_GRADE_COLUMNS = [
    "gen_condition_id",
    "item_id",
    "epoch",
    "status",
    "error_code",
    "score",
    "correct",
    "parse_ok",
    "parse_code",
    "usd",
    "input_tokens",
    "output_tokens",
    "solution_hash",
]
_SOLUTION_COLUMNS = [
    "item_id",
    "epoch",
    "status",
    "error_code",
    "usd",
    "input_tokens",
    "output_tokens",
    "latency_ms",
    "cached",
    "text_hash",
]


@dataclass(frozen=True)
class StudyCells:
    """Everything the report computes from (see the module doc)."""

    facets: DesignFacets
    grades: pa.Table
    solutions: pa.Table
    items: pa.Table  # item_id, dataset of every selected item

    @property
    def expected_per_condition(self) -> int:
        """Generate cells each generate condition should have: items x epochs."""
        return self.items.num_rows * self.facets.epochs

    def valid_grades(self, grade_condition_id: str | None = None) -> pa.Table:
        table = self.grades.filter(pc.field("valid"))
        if grade_condition_id is not None:
            table = table.filter(pc.field("grade_condition_id") == grade_condition_id)
        return table


def read_cells(plan: Plan) -> StudyCells:
    """Read the small columns of the plan's grades and solutions (see the module doc)."""
    facets = DesignFacets.of(plan.design)
    items = plain_columns(plan.items.select(["item_id", "dataset"]))
    item_ids = items.column("item_id")
    epochs = facets.epochs

    def selected(table: pa.Table) -> pa.Table:
        mask = pc.and_(
            pc.is_in(table.column("item_id"), value_set=item_ids),
            pc.less(table.column("epoch"), epochs),
        )
        return table.filter(mask)

    gen_ids = [f.id for f in facets.generate]
    solutions_by = plan.store.read_by_condition(SOLUTIONS, gen_ids, _SOLUTION_COLUMNS)
    solution_parts = []
    for cid, table in solutions_by.items():
        table = selected(table)
        solution_parts.append(
            table.add_column(0, "gen_condition_id", pa.repeat(cid, table.num_rows))
        )
    solutions = (
        pa.concat_tables(solution_parts)
        if solution_parts
        else _empty(_SOLUTION_COLUMNS, SOLUTIONS.schema, "gen_condition_id")
    )
    solutions = solutions.join(items, "item_id", join_type="inner")

    grade_ids = [f.id for f in facets.grade]
    grades_by = plan.store.read_by_condition(GRADES, grade_ids, _GRADE_COLUMNS)
    known = pa.array(gen_ids, type=pa.string())
    grade_parts = []
    for cid, table in grades_by.items():
        table = selected(table)
        table = table.filter(pc.is_in(table.column("gen_condition_id"), value_set=known))
        grade_parts.append(
            table.add_column(0, "grade_condition_id", pa.repeat(cid, table.num_rows))
        )
    grades = (
        pa.concat_tables(grade_parts)
        if grade_parts
        else _empty(_GRADE_COLUMNS, GRADES.schema, "grade_condition_id")
    )
    hashes = solutions.select(["gen_condition_id", "item_id", "epoch", "text_hash"])
    grades = grades.join(hashes, ["gen_condition_id", "item_id", "epoch"], join_type="left outer")
    grades = grades.join(items, "item_id", join_type="inner")
    stale = pc.fill_null(
        pc.not_equal(grades.column("solution_hash"), grades.column("text_hash")), False
    )
    valid = pc.and_(
        pc.and_(pc.equal(grades.column("status"), "ok"), grades.column("parse_ok")),
        pc.and_(pc.is_valid(grades.column("correct")), pc.invert(stale)),
    )
    grades = grades.drop_columns(["solution_hash", "text_hash"])
    grades = grades.append_column("stale", stale).append_column("valid", pc.fill_null(valid, False))
    return StudyCells(
        facets=facets,
        grades=grades.combine_chunks(),
        solutions=solutions.drop_columns(["text_hash"]).combine_chunks(),
        items=items,
    )


def _empty(columns: list[str], schema: pa.Schema, partition: str) -> pa.Table:
    fields = [pa.field(partition, pa.string())] + [schema.field(c) for c in columns]
    return pa.schema(fields).empty_table()
