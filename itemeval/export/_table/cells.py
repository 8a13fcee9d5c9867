"""The small columns of every logical grade and solution of a plan, in memory, for the report.

The report aggregates; it never needs a text. So it reads only numbers, codes and keys
(deduplicated by the store's rule), one condition pair at a time (`fetch.GradePartition`),
restricted to the plan's selection like the long table, and replaces every name by a small
integer code:

* `grade`, `gen`: positions in `facets.grade` / `facets.generate`;
* `item`: position in `items` (the plan's selected items), `dataset`: position in `datasets`.

grades: `grade, gen, item, dataset, epoch, ok, error_code, score, correct, parse_ok,
parse_code, usd, cached, cached_input_tokens, batch, stale, valid`, where `valid` marks a final
grade of the current answer (status ok, parsed, a verdict, not stale): the only grades accuracy
counts.
solutions: `gen, item, dataset, epoch, ok, error_code, usd, input_tokens, output_tokens,
cached_input_tokens, latency_ms, cached, batch`. `cached` marks a response-cache answer (nothing
paid); `cached_input_tokens` what the provider served from its prompt cache; `batch` an answer
through a provider's batch API (`tier = batch`, at the batch price).

About 40 bytes a grade: ten million grades fit in half a gigabyte.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from itemeval.export._table.conditions import DesignFacets
from itemeval.export._table.fetch import GradePartition, plain_columns
from itemeval.planning import Plan
from itemeval.store import SOLUTIONS, TIER_BATCH

#: What the report's cells and the viewer's index read of a grade row besides its keys.
GRADE_CELL_COLUMNS = [
    "status",
    "error_code",
    "correct",
    "parse_ok",
    "parse_code",
    "usd",
    "cached",
    "cached_input_tokens",
    "solution_hash",
    "tier",
]
#: ... and of a solution row.
SOLUTION_CELL_COLUMNS = [
    "status",
    "error_code",
    "usd",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cached",
    "text_hash",
    "tier",
]
_GRADE_EXTRA = [*GRADE_CELL_COLUMNS, "score"]
_SOLUTION_COLUMNS = ["item_id", "epoch", *SOLUTION_CELL_COLUMNS, "latency_ms"]
_CODE = pa.int32()


@dataclass(frozen=True)
class StudyCells:
    """Everything the report computes from (see the module doc)."""

    facets: DesignFacets
    grades: pa.Table
    solutions: pa.Table
    items: pa.Table  # item_id, dataset (names) of every selected item, in plan order
    datasets: list[str]

    @property
    def expected_per_condition(self) -> int:
        """Generate cells each generate condition should have: items x epochs."""
        return self.items.num_rows * self.facets.epochs

    def valid_grades(self, grade: int | None = None) -> pa.Table:
        """Final grades of the current answer, of one grade condition (by code) or all."""
        mask = self.grades.column("valid")
        if grade is not None:
            mask = pc.and_(mask, pc.equal(self.grades.column("grade"), grade))
        return self.grades.filter(mask)

    def item_ids(self, codes: list[int]) -> list[str]:
        return self.items.column("item_id").take(pa.array(codes, type=_CODE)).to_pylist()


def read_cells(plan: Plan) -> StudyCells:
    """Read the small columns of the plan's grades and solutions (see the module doc)."""
    facets = DesignFacets.of(plan.design)
    items = plain_columns(plan.items.select(["item_id", "dataset"])).combine_chunks()
    datasets = [d.name for d in plan.datasets]
    item_ids = items.column("item_id")
    dataset_of = pc.index_in(items.column("dataset"), value_set=pa.array(datasets)).cast(_CODE)
    if isinstance(dataset_of, pa.ChunkedArray):
        dataset_of = dataset_of.combine_chunks()
    epochs = facets.epochs

    def answer(gen: int, table: pa.Table, item: pa.Array) -> dict[str, object]:
        """The `_ANSWER_FIELDS` columns of located rows of generate condition `gen`."""
        return {
            "gen": pa.repeat(pa.scalar(gen, _CODE), table.num_rows),
            "item": item,
            "dataset": dataset_of.take(item),
            "epoch": table.column("epoch"),
            "ok": pc.equal(table.column("status"), "ok"),
            "error_code": table.column("error_code"),
        }

    solution_parts = []
    for code, condition in enumerate(facets.generate):
        stored = plan.store.read_by_condition(SOLUTIONS, [condition.id], _SOLUTION_COLUMNS)
        table, item = located_rows(stored[condition.id], item_ids, epochs)
        solution_parts.append(
            pa.table(
                {
                    **answer(code, table, item),
                    **solution_cells(table),
                    "latency_ms": table.column("latency_ms"),
                }
            )
        )
    solutions = _concat(solution_parts, _SOLUTIONS_SCHEMA)
    hashes = solutions.select(["gen", "item", "epoch", "text_hash"])

    grade_parts = []
    for code, condition in enumerate(facets.grade):
        # One condition pair at a time: only the fragments that hold it are read.
        partition = GradePartition(plan.store, condition.id)
        for gen, generate in enumerate(facets.generate):
            stored = partition.locate(generate.id, extra=_GRADE_EXTRA).keys
            table, item = located_rows(stored, item_ids, epochs)
            n = table.num_rows
            if n == 0:
                continue
            part = pa.table(
                {
                    "grade": pa.repeat(pa.scalar(code, _CODE), n),
                    **answer(gen, table, item),
                    **grade_cells(table),
                    "score": table.column("score"),
                }
            )
            part = with_validity(part, hashes, gen)
            grade_parts.append(part.select(_GRADES_SCHEMA.names).combine_chunks())
    return StudyCells(
        facets=facets,
        grades=_concat(grade_parts, _GRADES_SCHEMA),
        solutions=solutions.drop_columns(["text_hash"]),
        items=items,
        datasets=datasets,
    )


#: Which answer a row is about and whether its call succeeded: the columns both tables open with.
_ANSWER_FIELDS = [
    ("gen", _CODE),
    ("item", _CODE),
    ("dataset", _CODE),
    ("epoch", pa.int32()),
    ("ok", pa.bool_()),
    ("error_code", pa.string()),
]
_SOLUTIONS_SCHEMA = pa.schema(
    [
        *_ANSWER_FIELDS,
        ("usd", pa.float64()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("cached_input_tokens", pa.int64()),
        ("latency_ms", pa.float64()),
        ("cached", pa.bool_()),
        ("batch", pa.bool_()),
        ("text_hash", pa.string()),
    ]
)
_GRADES_SCHEMA = pa.schema(
    [
        ("grade", _CODE),
        *_ANSWER_FIELDS,
        ("score", pa.float64()),
        ("correct", pa.bool_()),
        ("parse_ok", pa.bool_()),
        ("parse_code", pa.string()),
        ("usd", pa.float64()),
        ("cached", pa.bool_()),
        ("cached_input_tokens", pa.int64()),
        ("batch", pa.bool_()),
        ("stale", pa.bool_()),
        ("valid", pa.bool_()),
    ]
)


def solution_cells(table: pa.Table) -> dict[str, object]:
    """The columns taken from read `SOLUTION_CELL_COLUMNS` besides the answer's own."""
    return _cells(table, SOLUTION_CELL_COLUMNS)


def grade_cells(table: pa.Table) -> dict[str, object]:
    """The columns taken from read `GRADE_CELL_COLUMNS` besides the answer's own."""
    return _cells(table, GRADE_CELL_COLUMNS)


def _cells(table: pa.Table, read: list[str]) -> dict[str, object]:
    """`read` as read, except `status` and `error_code` (the answer's `ok`, `error_code`) and
    `tier`, which gives `batch` (a call at the batch tier)."""
    kept = {name: table.column(name) for name in read if name not in _NOT_KEPT}
    return {**kept, "batch": pc.equal(table.column("tier"), TIER_BATCH)}


_NOT_KEPT = ("status", "error_code", "tier")


def located_rows(table: pa.Table, item_ids: pa.Array, epochs: int) -> tuple[pa.Table, pa.Array]:
    """The rows of `table` in the selection (an item of `item_ids`, an epoch below `epochs`),
    and their item codes (positions in `item_ids`)."""
    codes = pc.index_in(table.column("item_id"), value_set=item_ids)
    keep = pc.and_(pc.is_valid(codes), pc.less(table.column("epoch"), epochs))
    return table.filter(keep), codes.filter(keep).cast(_CODE)


def with_validity(part: pa.Table, hashes: pa.Table, gen: int) -> pa.Table:
    """Grades of generate condition `gen` (`item, epoch, ok, parse_ok, correct,
    solution_hash`) joined with the stored answers' `text_hash` (`hashes`: `gen, item, epoch,
    text_hash`), plus `stale` (the grade judged another text than the answer stored now) and
    `valid` (a final grade of the current answer: status ok, parsed, a verdict, not stale)."""
    mine = hashes.filter(pc.equal(hashes.column("gen"), gen)).drop_columns(["gen"])
    part = part.join(mine, ["item", "epoch"], join_type="left outer")
    stale = pc.fill_null(
        pc.not_equal(part.column("solution_hash"), part.column("text_hash")), False
    )
    valid = pc.and_(
        pc.and_(part.column("ok"), part.column("parse_ok")),
        pc.and_(pc.is_valid(part.column("correct")), pc.invert(stale)),
    )
    part = part.append_column("stale", stale)
    return part.append_column("valid", pc.fill_null(valid, False))


def _concat(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    tables = [p.select(schema.names).cast(schema) for p in parts if p.num_rows]
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables).combine_chunks()
