"""The long table as a stream of arrow batches, one condition pair after another.

For each grade condition (design order) and each generate condition (design order), the rows
of that pair are the logical grade rows of the pair, joined with the logical solution row they
graded and the item; with `include_ungraded`, also the stored solutions of the pair that have no
grade row yet. Rows of a pair come in the order the grades were written (for runtime stores:
item part by item part), cut into batches of at most `batch_rows`. Where each row lives comes
from the store's cells (`pairs.pair_rows`: partition summaries and the fragments they do not
cover); only the rows' full columns are read from fragments.

What the stream covers is the plan's selection, as `itemeval status` counts it: the design's
conditions (after `--condition`), the selected items, epochs `0 .. replications-1`. Stored rows
outside it (an item no longer selected, epochs of a larger replication count, conditions no
longer in the study) are left out; `ScanCounts.outside_selection` counts the grade rows of
items and epochs outside it.

Memory: the cells (small columns) of one pair's grades and solutions, a few row groups per
side, a few items parts and one batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.planning import Plan
from itemeval.results._columns import (
    GRADE_RENAMES,
    ITEM_FIELDS,
    LONG_TABLE_SCHEMA,
    SOLUTION_RENAMES,
)
from itemeval.results._conditions import DesignFacets, GenerateFacets, GradeFacets
from itemeval.results._fetch import ItemFetcher, PartitionRows, RowFetcher
from itemeval.results._pairs import PairRows, Selection, pair_rows, read_state
from itemeval.storage import Location
from itemeval.store import GRADES, SOLUTIONS, Stage

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
    """Iterate `(pair, batch)` over a plan's store (see the module doc). `pairs`, `locate` and
    `batches` are the steps, for a reader that fetches only some rows of a pair (an
    incremental export)."""

    plan: Plan
    include_ungraded: bool = False
    batch_rows: int = DEFAULT_BATCH_ROWS
    counts: ScanCounts = field(default_factory=ScanCounts)

    def __post_init__(self) -> None:
        if self.batch_rows < 1:
            raise ValueError("batch_rows must be at least 1")
        self.facets = DesignFacets.of(self.plan.design)
        self.selection = Selection.of(self.plan)
        snapshots = {d.name: d.snapshot for d in self.plan.datasets if d.snapshot is not None}
        self._items = ItemFetcher(self.plan.items, snapshots, ["dataset", *ITEM_FIELDS])

    def __iter__(self) -> Iterator[tuple[Pair, pa.RecordBatch]]:
        for pair in self.pairs():
            located = self.locate(pair)
            self.count(pair, located)
            for batch in self.batches(pair, located):
                yield pair, batch

    def pairs(self) -> Iterator[Pair]:
        """Every pair, grade conditions first, each in design order."""
        for grade in self.facets.grade:
            for generate in self.facets.generate:
                yield Pair(grade, generate)

    def locate(self, pair: Pair, state: pa.Table | None = None) -> PairRows:
        """The pair's rows: keys, where their cells live, fingerprints (`pairs.pair_rows`),
        from `state` (`pairs.STATE_SCHEMA`), by default the store's cells now."""
        store = self.plan.store
        grade, generate = pair.grade.id, pair.generate.id
        if state is None:
            state = read_state(store, grade, generate)
        return pair_rows(
            state,
            self.selection,
            store.partition(GRADES, grade),
            store.partition(SOLUTIONS, generate),
            include_ungraded=self.include_ungraded,
        )

    def count(self, pair: Pair, located: PairRows) -> None:
        """Add the pair's rows to `counts`."""
        rows = located.rows.num_rows
        graded = located.graded
        self.counts.rows += rows
        self.counts.graded += graded
        self.counts.ungraded += rows - graded
        self.counts.stale += located.stale
        self.counts.outside_selection += located.outside_selection
        self.counts.pairs[(pair.grade.id, pair.generate.id)] = rows

    def batches(
        self, pair: Pair, located: PairRows, rows: pa.Table | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The long-table rows of `rows` (rows of `located.rows`, all by default), in their
        order, in batches of at most `batch_rows`."""
        cells = located.rows if rows is None else rows
        if cells.num_rows == 0:
            return
        cache = 4 * self.batch_rows
        grades = _Fetch(GRADES, pair.grade.id, located.grades, cells.column("g_frag"), cache)
        solutions = _Fetch(
            SOLUTIONS, pair.generate.id, located.solutions, cells.column("s_frag"), cache
        )
        for offset in range(0, cells.num_rows, self.batch_rows):
            chunk = cells.slice(offset, self.batch_rows)
            yield self._assemble(pair, chunk, grades, solutions)

    def _assemble(
        self, pair: Pair, chunk: pa.Table, grades: _Fetch, solutions: _Fetch
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

        solution = solutions.take(chunk, "s_frag", "s_pos")
        for stored, name in SOLUTION_RENAMES.items():
            columns[name] = solution.column(stored)
        graded_mask = pc.is_valid(chunk.column("g_frag"))
        grade_rows = grades.take(chunk, "g_frag", "g_pos")
        for stored, name in GRADE_RENAMES.items():
            columns[name] = grade_rows.column(stored)
        columns["graded"] = graded_mask
        columns["grade_stale"] = pc.if_else(
            graded_mask, chunk.column("stale"), pa.scalar(None, pa.bool_())
        )
        arrays = []
        for target in LONG_TABLE_SCHEMA:
            column = columns[target.name]
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            arrays.append(column.cast(target.type) if column.type != target.type else column)
        return pa.RecordBatch.from_arrays(arrays, schema=LONG_TABLE_SCHEMA)


class _Fetch:
    """Full rows of one partition by (fragment name, position): a `RowFetcher` over the
    fragments the rows to fetch name."""

    def __init__(
        self,
        stage: Stage,
        condition_id: str,
        location: Location,
        names: pa.ChunkedArray | pa.Array,
        cache_rows: int,
    ) -> None:
        columns = GRADE_RENAMES if stage.name == GRADES.name else SOLUTION_RENAMES
        distinct = pc.unique(pc.drop_null(names)).cast(pa.string())
        self.names = pc.sort_indices(distinct)
        self.names = distinct.take(self.names)
        located = PartitionRows(
            stage, condition_id, location, self.names.to_pylist(), stage.schema.empty_table()
        )
        self.fetcher = RowFetcher(located, list(columns), cache_rows=cache_rows)

    def take(self, chunk: pa.Table, frag_column: str, pos_column: str) -> pa.Table:
        """The rows at the chunk's (fragment, position), null rows where it has none."""
        n = chunk.num_rows
        frag = chunk.column(frag_column)
        present = pc.is_valid(frag).to_numpy(zero_copy_only=False)
        if not present.any():
            schema = self.fetcher.empty.schema
            return pa.table({f.name: pa.nulls(n, f.type) for f in schema}, schema=schema)
        ordinals = pc.index_in(pc.drop_null(frag), value_set=self.names)
        frags = ordinals.to_numpy(zero_copy_only=False).astype(np.int64)
        positions = pc.drop_null(chunk.column(pos_column)).to_numpy().astype(np.int64)
        rows = self.fetcher.take(frags, positions)
        if present.all():
            return rows
        index = np.full(n, -1, dtype=np.int64)
        index[present] = np.arange(int(present.sum()), dtype=np.int64)
        return rows.take(pa.array(index, mask=~present))
