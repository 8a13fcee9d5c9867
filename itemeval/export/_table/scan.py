"""The long table as a stream of arrow batches, one condition pair after another.

For each grade condition (design order) and each generate condition (design order), the rows
of that pair are the logical grade rows of the pair, joined with the logical solution row they
graded and the item; with `include_ungraded`, also the stored solutions of the pair that have no
grade row yet. Rows of a pair come in the order the grades were written (for runtime stores:
item part by item part), cut into batches of at most `batch_rows`.

What the stream covers is the plan's selection, as `itemeval status` counts it: the design's
conditions (after `--condition`), the selected items, epochs `0 .. replications-1`. Stored rows
outside it (an item no longer selected, epochs of a larger replication count, conditions no
longer in the study) are left out; `ScanCounts.outside_selection` counts the grade rows of
items and epochs outside it.

Memory: the located keys (small columns) of one pair's grades and solutions, a few row groups
per side, a few items parts and one batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.export._table.columns import (
    GRADE_RENAMES,
    ITEM_FIELDS,
    LONG_TABLE_SCHEMA,
    SOLUTION_RENAMES,
)
from itemeval.export._table.conditions import DesignFacets, GenerateFacets, GradeFacets
from itemeval.export._table.fetch import (
    FRAG,
    POS,
    GradePartition,
    ItemFetcher,
    PartitionRows,
    RowFetcher,
    locate_logical_rows,
)
from itemeval.planning import Plan
from itemeval.store import SOLUTIONS

DEFAULT_BATCH_ROWS = 20_000


@dataclass(frozen=True, slots=True)
class Pair:
    """One (grade condition, generate condition) pair of the design."""

    grade: GradeFacets
    generate: GenerateFacets


@dataclass
class ScanCounts:
    """What a scan produced and what it left out."""

    rows: int = 0
    graded: int = 0
    ungraded: int = 0  # include_ungraded rows (a solution without a grade)
    stale: int = 0  # grades of an earlier solution text
    outside_selection: int = 0  # grade rows of items or epochs outside the plan's selection
    pairs: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass
class LongTableScan:
    """Iterate `(pair, batch)` over a plan's store (see the module doc)."""

    plan: Plan
    include_ungraded: bool = False
    batch_rows: int = DEFAULT_BATCH_ROWS
    counts: ScanCounts = field(default_factory=ScanCounts)

    def __post_init__(self) -> None:
        if self.batch_rows < 1:
            raise ValueError("batch_rows must be at least 1")
        self.facets = DesignFacets.of(self.plan.design)
        self._item_ids = self.plan.items.column("item_id").combine_chunks()
        snapshots = {d.name: d.snapshot for d in self.plan.datasets if d.snapshot is not None}
        self._items = ItemFetcher(self.plan.items, snapshots, ["dataset", *ITEM_FIELDS])

    def __iter__(self) -> Iterator[tuple[Pair, pa.RecordBatch]]:
        for grade in self.facets.grade:
            partition = GradePartition(self.plan.store, grade.id)
            for generate in self.facets.generate:
                pair = Pair(grade, generate)
                grades = self._in_selection(
                    partition.locate(generate.id, extra=["solution_hash"]), count=True
                )
                solutions = self._in_selection(
                    locate_logical_rows(
                        self.plan.store, SOLUTIONS, generate.id, extra=["text_hash"]
                    )
                )
                rows = 0
                for batch in self._pair_batches(pair, grades, solutions):
                    rows += batch.num_rows
                    yield pair, batch
                self.counts.pairs[(grade.id, generate.id)] = rows

    # -- pass 1 ----------------------------------------------------------------------------
    def _in_selection(self, rows: PartitionRows, *, count: bool = False) -> PartitionRows:
        keys = rows.keys
        if keys.num_rows == 0:
            return rows
        mask = pc.and_(
            pc.is_in(keys.column("item_id"), value_set=self._item_ids),
            pc.less(keys.column("epoch"), self.facets.epochs),
        )
        kept = keys.filter(mask)
        if count:
            self.counts.outside_selection += keys.num_rows - kept.num_rows
        return PartitionRows(rows.stage, rows.condition_id, rows.location, rows.fragments, kept)

    # -- pass 2 ----------------------------------------------------------------------------
    def _pair_batches(
        self, pair: Pair, grades: PartitionRows, solutions: PartitionRows
    ) -> Iterator[pa.RecordBatch]:
        cells = _pair_cells(grades.keys, solutions.keys, self.include_ungraded)
        if cells.num_rows == 0:
            return
        cache = 4 * self.batch_rows
        grade_fetch = RowFetcher(grades, list(GRADE_RENAMES), cache_rows=cache)
        solution_fetch = RowFetcher(solutions, list(SOLUTION_RENAMES), cache_rows=cache)
        for offset in range(0, cells.num_rows, self.batch_rows):
            chunk = cells.slice(offset, self.batch_rows)
            batch = self._assemble(pair, chunk, grade_fetch, solution_fetch)
            graded = int(pc.sum(batch.column("graded")).as_py() or 0)
            self.counts.rows += batch.num_rows
            self.counts.graded += graded
            self.counts.ungraded += batch.num_rows - graded
            self.counts.stale += int(pc.sum(batch.column("grade_stale")).as_py() or 0)
            yield batch

    def _assemble(
        self, pair: Pair, chunk: pa.Table, grades: RowFetcher, solutions: RowFetcher
    ) -> pa.RecordBatch:
        n = chunk.num_rows
        columns: dict[str, pa.Array | pa.ChunkedArray] = {}
        grade, generate = pair.grade, pair.generate
        constants = {
            "grade_condition_id": grade.id,
            "grader_kind": grade.kind,
            "grader": grade.grader,
            "grader_model": grade.grader_model,
            "rubric": grade.rubric,
            "gen_condition_id": generate.id,
            "model": generate.model,
            "model_name": generate.model_name,
            "prompt": generate.prompt,
            "model_config": generate.model_config,
            "params": generate.params,
        }
        for name, value in constants.items():
            columns[name] = pa.repeat(pa.scalar(value, pa.string()), n)
        columns["item_id"] = chunk.column("item_id")
        columns["epoch"] = chunk.column("epoch")
        items = self._items.take(chunk.column("item_id"))
        for name in ("dataset", *ITEM_FIELDS):
            columns[name] = items.column(name)

        solution = _fetch(solutions, chunk, "s_frag", "s_pos")
        for stored, name in SOLUTION_RENAMES.items():
            columns[name] = solution.column(stored)
        graded_mask = pc.is_valid(chunk.column("g_frag"))
        grade_rows = _fetch(grades, chunk, "g_frag", "g_pos")
        for stored, name in GRADE_RENAMES.items():
            columns[name] = grade_rows.column(stored)
        columns["graded"] = graded_mask
        stale = pc.and_(
            graded_mask,
            pc.fill_null(
                pc.not_equal(chunk.column("solution_hash"), chunk.column("text_hash")), False
            ),
        )
        columns["grade_stale"] = pc.if_else(graded_mask, stale, pa.scalar(None, pa.bool_()))
        arrays = []
        for target in LONG_TABLE_SCHEMA:
            column = columns[target.name]
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            arrays.append(column.cast(target.type) if column.type != target.type else column)
        return pa.RecordBatch.from_arrays(arrays, schema=LONG_TABLE_SCHEMA)


def _pair_cells(
    grade_keys: pa.Table | None, solution_keys: pa.Table, include_ungraded: bool
) -> pa.Table:
    """Where each row of a pair lives: `item_id, epoch, g_frag, g_pos, solution_hash, s_frag,
    s_pos, text_hash`, graded rows in grade write order, then (optionally) ungraded ones."""
    solutions = pa.table(
        {
            "item_id": solution_keys.column("item_id"),
            "epoch": solution_keys.column("epoch"),
            "s_frag": solution_keys.column(FRAG),
            "s_pos": solution_keys.column(POS),
            "text_hash": solution_keys.column("text_hash"),
        }
    )
    if grade_keys is None or grade_keys.num_rows == 0:
        graded = _empty_graded()
    else:
        grades = pa.table(
            {
                "item_id": grade_keys.column("item_id"),
                "epoch": grade_keys.column("epoch"),
                "g_frag": grade_keys.column(FRAG),
                "g_pos": grade_keys.column(POS),
                "solution_hash": grade_keys.column("solution_hash"),
            }
        )
        graded = grades.join(solutions, ["item_id", "epoch"], join_type="left outer")
        graded = graded.sort_by([("g_frag", "ascending"), ("g_pos", "ascending")])
    graded = graded.select(_CELL_COLUMNS)
    if not include_ungraded:
        return graded
    ungraded = solutions.join(
        graded.select(["item_id", "epoch"]), ["item_id", "epoch"], join_type="left anti"
    )
    ungraded = ungraded.sort_by([("s_frag", "ascending"), ("s_pos", "ascending")])
    n = ungraded.num_rows
    ungraded = ungraded.append_column("g_frag", pa.nulls(n, pa.int32()))
    ungraded = ungraded.append_column("g_pos", pa.nulls(n, pa.int64()))
    ungraded = ungraded.append_column("solution_hash", pa.nulls(n, pa.string()))
    return pa.concat_tables([graded, ungraded.select(_CELL_COLUMNS)])


_CELL_COLUMNS = [
    "item_id",
    "epoch",
    "g_frag",
    "g_pos",
    "solution_hash",
    "s_frag",
    "s_pos",
    "text_hash",
]


def _empty_graded() -> pa.Table:
    return pa.schema(
        [
            pa.field("item_id", pa.string()),
            pa.field("epoch", pa.int32()),
            pa.field("g_frag", pa.int32()),
            pa.field("g_pos", pa.int64()),
            pa.field("solution_hash", pa.string()),
            pa.field("s_frag", pa.int32()),
            pa.field("s_pos", pa.int64()),
            pa.field("text_hash", pa.string()),
        ]
    ).empty_table()


def _fetch(fetcher: RowFetcher, chunk: pa.Table, frag_column: str, pos_column: str) -> pa.Table:
    """The fetcher's rows for the chunk's (frag, pos), null rows where the chunk has none."""
    n = chunk.num_rows
    frag = chunk.column(frag_column)
    present = pc.is_valid(frag).to_numpy(zero_copy_only=False)
    if not present.any():
        schema = fetcher.empty.schema
        return pa.table({f.name: pa.nulls(n, f.type) for f in schema}, schema=schema)
    frags = pc.drop_null(frag).to_numpy().astype(np.int64)
    positions = pc.drop_null(chunk.column(pos_column)).to_numpy().astype(np.int64)
    rows = fetcher.take(frags, positions)
    if present.all():
        return rows
    index = np.full(n, -1, dtype=np.int64)
    index[present] = np.arange(int(present.sum()), dtype=np.int64)
    return rows.take(pa.array(index, mask=~present))
