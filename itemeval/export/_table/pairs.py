"""A condition pair's long-table rows located from the store's cells, each with a fingerprint.

The long table's rows of one pair (grade condition G, generate condition C) are the logical
grade rows of C in G's partition, joined with C's logical solution rows (and, with
`include_ungraded`, C's solutions without a grade). Their keys, and where each chosen row lives
(fragment and position), come from the store's **cells** (`store._summary.read_cells`): a
partition's summary plus the fragments it does not cover, the same as a read of every row.
No text is read here; `scan.LongTableScan` fetches the full rows of the cells it is given.

Each row also gets a 64-bit **fingerprint** of what it is made of: every small column of its
grade cell and of its solution cell (status, scores, tokens, dollars, the text hashes,
`written_at`; not where the row is stored) and its dataset's fingerprint. A row whose
fingerprint did not change is the same row, even after a compaction moved it; a superseded row
(a re-generation, a re-grade, an `ok` after an error) has a new `written_at`, so a new
fingerprint. An incremental export compares fingerprints to know which rows changed.

Memory: the cells of one pair (about 150 bytes a row while they are read, 60 after).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.planning import Plan
from itemeval.storage import Location
from itemeval.store import GRADES, SOLUTIONS, Stage, StudyStore
from itemeval.store._cells import cells_schema  # not yet public: the store's cells
from itemeval.store._summary import read_cells

#: Cells columns that say where a row lives, not what it is.
_PLACE = ("fragment", "position")

#: One row per long-table row of a pair, in the long table's order.
PAIR_ROWS_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string()),
        pa.field("epoch", pa.int32()),
        pa.field("dataset", pa.string()),
        pa.field("g_frag", pa.string()),  # null: no grade (`include_ungraded` rows)
        pa.field("g_pos", pa.int64()),
        pa.field("s_frag", pa.string()),  # null: no stored solution
        pa.field("s_pos", pa.int64()),
        pa.field("stale", pa.bool_()),
        pa.field("fp", pa.uint64()),
    ]
)
KEY = ["item_id", "epoch"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_STEP = np.uint64(0x9E3779B97F4A7C15)
_NULL = np.uint64(0x6A09E667F3BCC909)  # a null value's word (sqrt(2)'s fraction bits)
_NO_GRADE = np.uint64(0xBB67AE8584CAA73B)  # the grade word of an ungraded row


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit moves every output bit."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _text_words(values: pa.Array) -> np.ndarray:
    """A 64-bit word per string (blake2b of each distinct value; nulls get `_NULL`)."""
    encoded = pc.dictionary_encode(values)
    distinct = [
        int.from_bytes(hashlib.blake2b(v.encode("utf-8"), digest_size=8).digest(), "big")
        for v in encoded.dictionary.to_pylist()
    ]
    table = np.array(distinct, dtype=np.uint64)
    indices = encoded.indices
    codes = pc.fill_null(indices, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    words = table[codes] if len(table) else np.zeros(len(values), dtype=np.uint64)
    if indices.null_count:
        words[pc.is_null(indices).to_numpy(zero_copy_only=False)] = _NULL
    return words


def _column_words(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A 64-bit word per value: its bits (numbers, times, flags) or a digest (strings)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = array.type
    if pa.types.is_dictionary(kind):
        array = array.cast(kind.value_type)
        kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _text_words(array)
    if pa.types.is_boolean(kind):
        bits = pc.fill_null(array, False).to_numpy(zero_copy_only=False).astype(np.uint64)
    elif pa.types.is_floating(kind):
        values = pc.fill_null(array.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False)
        bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    elif pa.types.is_unsigned_integer(kind):
        values = pc.fill_null(array.cast(pa.uint64()), 0).to_numpy(zero_copy_only=False)
        bits = np.asarray(values, dtype=np.uint64)
    else:  # signed integers and timestamps
        values = pc.fill_null(array.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        bits = np.ascontiguousarray(values, dtype=np.int64).view(np.uint64)
    if array.null_count:
        bits = bits.copy()
        bits[pc.is_null(array).to_numpy(zero_copy_only=False)] = _NULL
    return bits


def row_fingerprints(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """A 64-bit fingerprint per row of `columns` (in that order): equal rows give equal
    fingerprints; different ones differ but with probability 2^-64."""
    h = np.zeros(table.num_rows, dtype=np.uint64)
    for index, name in enumerate(columns):
        h = _mix(h * _STEP + _column_words(table.column(name)) + np.uint64(index + 1))
    return h


def content_columns(stage: Stage) -> list[str]:
    """The cells columns a row is made of (all but its key and where it is stored)."""
    return [n for n in cells_schema(stage).names if n not in (*stage.keys, *_PLACE)]


@dataclass(frozen=True)
class Selection:
    """What an export covers: the plan's selected items (each with its dataset and a word of
    its dataset's fingerprint) and epochs `0 .. epochs-1`."""

    item_ids: pa.Array
    datasets: pa.Array
    dataset_words: np.ndarray
    epochs: int

    @classmethod
    def of(cls, plan: Plan) -> Selection:
        items = plan.items
        ids = items.column("item_id").combine_chunks()
        datasets = items.column("dataset").combine_chunks().cast(pa.string())
        prints = items.column("fingerprint").combine_chunks().cast(pa.string())
        joined = pc.binary_join_element_wise(datasets, prints, "\x1f")
        return cls(ids, datasets, _text_words(joined), plan.design.epochs)


@dataclass
class PairRows:
    """The long-table rows of one pair (`PAIR_ROWS_SCHEMA`) and where their cells live."""

    rows: pa.Table
    grades: Location  # G's partition
    solutions: Location  # C's partition
    outside_selection: int  # grade cells of items or epochs outside the selection
    solutions_word: int = 0  # an order-free digest of every selected solution cell

    @property
    def content(self) -> str:
        """An order-free digest of the pair's rows and of C's selected solutions: equal when
        no row and no solution changed (whatever compaction moved)."""
        n = self.rows.num_rows
        words = _as_words(self.rows.column("fp")) if n else np.zeros(0, dtype=np.uint64)
        total = int(_mix(words).sum(dtype=np.uint64)) if n else 0
        return f"{n}:{total:016x}:{self.solutions_word:016x}"

    @property
    def graded(self) -> int:
        return self.rows.num_rows - int(self.rows.column("g_frag").null_count)

    @property
    def stale(self) -> int:
        return int(pc.sum(self.rows.column("stale")).as_py() or 0)


def pair_rows(
    store: StudyStore,
    grade_id: str,
    gen_id: str,
    selection: Selection,
    *,
    include_ungraded: bool = False,
) -> PairRows:
    """The rows of the pair (`grade_id`, `gen_id`) (see the module doc)."""
    grades_at = store.partition(GRADES, grade_id)
    solutions_at = store.partition(SOLUTIONS, gen_id)
    g_content = content_columns(GRADES)
    s_content = content_columns(SOLUTIONS)
    grades = read_cells(GRADES, grades_at, generate=[gen_id]).cells
    solutions = read_cells(SOLUTIONS, solutions_at).cells
    grades, outside = _in_selection(grades, selection)
    solutions, _ = _in_selection(solutions, selection)
    graded = pa.table(
        {
            "item_id": grades.column("item_id"),
            "epoch": grades.column("epoch"),
            "g_frag": grades.column("fragment"),
            "g_pos": grades.column("position"),
            "solution_hash": grades.column("solution_hash"),
            "g_fp": pa.array(row_fingerprints(grades, g_content), pa.uint64()),
        }
    )
    sols = pa.table(
        {
            "item_id": solutions.column("item_id"),
            "epoch": solutions.column("epoch"),
            "s_frag": solutions.column("fragment"),
            "s_pos": solutions.column("position"),
            "text_hash": solutions.column("text_hash"),
            "s_fp": pa.array(row_fingerprints(solutions, s_content), pa.uint64()),
            "dataset": solutions.column("dataset"),
            "d_word": solutions.column("d_word"),
        }
    )
    solutions_word = (
        int(
            _mix(_mix(_as_words(sols.column("s_fp"))) + _as_words(sols.column("d_word"))).sum(
                dtype=np.uint64
            )
        )
        if sols.num_rows
        else 0
    )
    del grades, solutions
    if graded.num_rows:
        joined = graded.join(sols, KEY, join_type="left outer")
        joined = joined.sort_by([("g_frag", "ascending"), ("g_pos", "ascending")])
        # A grade whose solution is not stored (a removed fragment): its dataset from the items.
        if joined.column("dataset").null_count:
            joined = _fill_dataset(joined, selection)
    else:
        joined = None
    parts = [] if joined is None else [joined]
    if include_ungraded:
        keys = graded.select(KEY)
        ungraded = sols.join(keys, KEY, join_type="left anti") if keys.num_rows else sols
        ungraded = ungraded.sort_by([("s_frag", "ascending"), ("s_pos", "ascending")])
        n = ungraded.num_rows
        ungraded = ungraded.append_column("g_frag", pa.nulls(n, pa.string()))
        ungraded = ungraded.append_column("g_pos", pa.nulls(n, pa.int64()))
        ungraded = ungraded.append_column("solution_hash", pa.nulls(n, pa.uint64()))
        ungraded = ungraded.append_column("g_fp", pa.nulls(n, pa.uint64()))
        parts.append(ungraded.select(parts[0].column_names) if parts else ungraded)
    if not parts:
        empty = PAIR_ROWS_SCHEMA.empty_table()
        return PairRows(empty, grades_at, solutions_at, outside, solutions_word)
    table = pa.concat_tables(parts)
    return PairRows(_finish(table), grades_at, solutions_at, outside, solutions_word)


def _in_selection(cells: pa.Table, selection: Selection) -> tuple[pa.Table, int]:
    """The cells of selected items and epochs, with each one's dataset and dataset word; and
    how many were left out."""
    if cells.num_rows == 0:
        cells = cells.append_column("dataset", pa.array([], pa.string()))
        return cells.append_column("d_word", pa.array([], pa.uint64())), 0
    where = pc.index_in(cells.column("item_id"), value_set=selection.item_ids)
    keep = pc.and_(pc.is_valid(where), pc.less(cells.column("epoch"), selection.epochs))
    keep = pc.fill_null(keep, False)
    kept = cells.filter(keep)
    where = where.filter(keep)
    indices = where.to_numpy(zero_copy_only=False).astype(np.int64)
    kept = kept.append_column("dataset", selection.datasets.take(where))
    kept = kept.append_column("d_word", pa.array(selection.dataset_words[indices], pa.uint64()))
    return kept, cells.num_rows - kept.num_rows


def _fill_dataset(table: pa.Table, selection: Selection) -> pa.Table:
    where = pc.index_in(table.column("item_id"), value_set=selection.item_ids)
    indices = where.to_numpy(zero_copy_only=False).astype(np.int64)
    datasets = selection.datasets.take(where)
    words = pa.array(selection.dataset_words[indices], pa.uint64())
    table = table.set_column(table.schema.get_field_index("dataset"), "dataset", datasets)
    return table.set_column(table.schema.get_field_index("d_word"), "d_word", words)


def _finish(table: pa.Table) -> pa.Table:
    """`PAIR_ROWS_SCHEMA` from the joined cells: the stale flag and the row's fingerprint."""
    n = table.num_rows
    g_fp = table.column("g_fp")
    graded = pc.is_valid(g_fp)
    stale = pc.and_(
        graded,
        pc.fill_null(pc.not_equal(table.column("solution_hash"), table.column("text_hash")), False),
    )
    g_words = pc.fill_null(g_fp, pa.scalar(int(_NO_GRADE), pa.uint64()))
    s_words = pc.fill_null(table.column("s_fp"), pa.scalar(int(_NULL), pa.uint64()))
    fp = _mix(
        _mix(_as_words(g_words) * _STEP + _as_words(s_words)) * _STEP
        + _as_words(table.column("d_word"))
    )
    return pa.table(
        {
            "item_id": table.column("item_id"),
            "epoch": table.column("epoch"),
            "dataset": table.column("dataset"),
            "g_frag": table.column("g_frag"),
            "g_pos": table.column("g_pos"),
            "s_frag": table.column("s_frag"),
            "s_pos": table.column("s_pos"),
            "stale": stale,
            "fp": pa.array(fp, pa.uint64()) if n else pa.array([], pa.uint64()),
        },
        schema=PAIR_ROWS_SCHEMA,
    )


def _as_words(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.uint64)
