# One piece: a pair's state (keys, fingerprints, where each row lives) and the rows selected from
# it share one layout; split, each half would import the other's private columns.
"""A condition pair's state: every key of its grades and solutions, where each logical row lives
and a fingerprint of it; and the long-table rows that state gives.

The long table's rows of one pair (grade condition G, generate condition C) are the logical
grade rows of C in G's partition, joined with C's logical solution rows (and, with
`include_ungraded`, C's solutions without a grade), for the selected items and epochs. A pair's
**state** (`STATE_SCHEMA`) has one row per key of either side (selected or not): for each side,
the logical row's status, `written_at`, text hash, where it lives (fragment, position) and a
64-bit **fingerprint** of what it is (`row_fingerprints` of its small columns; not where it is
stored, so a compaction that moves a row does not change it).

It is read two ways:

* `read_state`: from the store's cells (`store._summary.read_cells`: each partition's summary
  plus the fragments it does not cover, the same as a read of every row), no text read;
* `advance_state`: from an earlier state and only the fragments written since (listed by name:
  fragments are never changed once written). A key whose logical row changed has it in one of
  those fragments: a new row is written to a new fragment, and a compaction that drops a row
  keeps the row that beat it, in its new fragment. So the rows of the new fragments, merged
  with the earlier state by the store's rule (`ok` beats `error`, then the later `written_at`,
  then the later fragment), give the state as `read_state` would.

`pair_rows` turns a state into the long-table rows (`PAIR_ROWS_SCHEMA`) with their dataset and
a fingerprint of the row (both sides and the dataset's fingerprint): a row whose fingerprint is
the same is the same row. `scan.LongTableScan` fetches the full rows of the ones it is given.

Memory: the state of one pair (about 100 bytes a key; 150 while the cells are read).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval.errors import Problem, StoreError
from itemeval.planning import Plan
from itemeval.storage import Location
from itemeval.store import GRADES, SOLUTIONS, Stage, StudyStore
from itemeval.store._cells import best_cells, row_columns, rows_to_cells  # the store's cells
from itemeval.store._summary import read_cells
from itemeval.store.fragments import FragmentInfo, read_fragments

KEY = ["item_id", "epoch"]
_TS = pa.timestamp("us", tz="UTC")
#: What a pair's state holds of each key (`g_*`: its grade in G, `s_*`: its solution in C;
#: null when that side has no row).
STATE_SCHEMA: pa.Schema = pa.schema(
    [
        pa.field("item_id", pa.string()),
        pa.field("epoch", pa.int32()),
        pa.field("g_ok", pa.bool_()),
        pa.field("g_at", _TS),
        pa.field("g_frag", pa.string()),
        pa.field("g_pos", pa.int64()),
        pa.field("g_hash", pa.uint64()),  # the solution text it graded
        pa.field("g_fp", pa.uint64()),
        pa.field("s_ok", pa.bool_()),
        pa.field("s_at", _TS),
        pa.field("s_frag", pa.string()),
        pa.field("s_pos", pa.int64()),
        pa.field("s_hash", pa.uint64()),  # its text
        pa.field("s_fp", pa.uint64()),
    ]
)
_SIDE = ["ok", "at", "frag", "pos", "hash", "fp"]
#: Cells columns each side's fingerprint is made of (a changed row has a new `written_at`).
_GRADE_PRINT = ["ok", "written_at", "solution_hash", "score", "correct", "parse_ok", "error_code"]
_SOLUTION_PRINT = ["ok", "written_at", "text_hash", "error_code"]
_RULE = ["ok", "written_at", "fragment", "position"]
_GRADE_CELLS = [*GRADES.keys, *_RULE, "solution_hash", "score", "correct", "parse_ok", "error_code"]
_SOLUTION_CELLS = [*SOLUTIONS.keys, *_RULE, "text_hash", "error_code"]

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


def words(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A uint64 column as numpy (nulls as 0)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return np.asarray(pc.fill_null(array, 0).to_numpy(zero_copy_only=False), dtype=np.uint64)


def key_strings(table: pa.Table) -> pa.Array:
    """`item_id \\x1f epoch` per row: one string a key, for lookups."""
    ids = table.column("item_id")
    epochs = pc.cast(table.column("epoch"), pa.string())
    joined = pc.binary_join_element_wise(ids, epochs, "\x1f")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


# -- the two sides -------------------------------------------------------------------------------


def _side(cells: pa.Table, prefix: str, hash_column: str, printed: Sequence[str]) -> pa.Table:
    """Cells (one row per key) as one side of a state: `item_id, epoch, <prefix>_*`."""
    return pa.table(
        {
            "item_id": cells.column("item_id"),
            "epoch": cells.column("epoch"),
            f"{prefix}_ok": cells.column("ok"),
            f"{prefix}_at": cells.column("written_at"),
            f"{prefix}_frag": cells.column("fragment"),
            f"{prefix}_pos": cells.column("position"),
            f"{prefix}_hash": cells.column(hash_column),
            f"{prefix}_fp": pa.array(row_fingerprints(cells, printed), pa.uint64()),
        }
    )


def _grade_side(cells: pa.Table) -> pa.Table:
    return _side(cells, "g", "solution_hash", _GRADE_PRINT)


def _solution_side(cells: pa.Table) -> pa.Table:
    return _side(cells, "s", "text_hash", _SOLUTION_PRINT)


def _join_sides(grades: pa.Table, solutions: pa.Table) -> pa.Table:
    if grades.num_rows == 0 and solutions.num_rows == 0:
        return STATE_SCHEMA.empty_table()
    state = grades.join(solutions, KEY, join_type="full outer", use_threads=False)
    return state.select(STATE_SCHEMA.names).cast(STATE_SCHEMA)


def read_state(store: StudyStore, grade_id: str, gen_id: str) -> pa.Table:
    """The pair's state from the store's cells (see the module doc)."""
    grades = read_cells(
        GRADES, store.partition(GRADES, grade_id), _GRADE_CELLS, generate=[gen_id]
    ).cells
    solutions = read_cells(SOLUTIONS, store.partition(SOLUTIONS, gen_id), _SOLUTION_CELLS).cells
    return _join_sides(_grade_side(grades), _solution_side(solutions))


def advance_state(
    store: StudyStore,
    grade_id: str,
    gen_id: str,
    state: pa.Table,
    new_grades: Sequence[FragmentInfo],
    new_solutions: Sequence[FragmentInfo],
    listed_grades: set[str],
    listed_solutions: set[str],
) -> tuple[pa.Table, np.ndarray]:
    """The pair's state after the fragments written since `state` was made (see the module
    doc), and which of its rows changed (`state`'s rows first, in their order; new keys
    after). `listed_*`: every fragment of each partition now."""
    grades = _candidates(store, GRADES, grade_id, new_grades, gen_id)
    solutions = _candidates(store, SOLUTIONS, gen_id, new_solutions)
    if grades.num_rows == 0 and solutions.num_rows == 0:
        return state, np.zeros(state.num_rows, dtype=bool)
    keys = key_strings(state)
    grade_side = _merged(state, keys, _grade_side(grades), "g", listed_grades)
    solution_side = _merged(state, keys, _solution_side(solutions), "s", listed_solutions)
    touched = _join_sides(grade_side, solution_side)  # keys whose logical row may have changed
    where = pc.index_in(key_strings(touched), value_set=keys)
    known = pc.is_valid(where).to_numpy(zero_copy_only=False)
    at = pc.fill_null(where, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    # A side the new fragments did not touch keeps its earlier value.
    previous = state.take(pa.array(at))
    grade_touched = pc.is_valid(touched.column("g_frag"))
    solution_touched = pc.is_valid(touched.column("s_frag"))
    columns = {}
    for name in STATE_SCHEMA.names:
        column = touched.column(name)
        if name.startswith(("g_", "s_")):
            side = grade_touched if name.startswith("g_") else solution_touched
            column = pc.if_else(side, column, _masked(previous.column(name), known))
        columns[name] = column
    touched = pa.table(columns, schema=STATE_SCHEMA)
    changed = np.zeros(state.num_rows, dtype=bool)
    changed[at[known]] = True
    updated = touched.filter(pa.array(known))
    # Rows keep their place (the earlier state's order), new keys go last.
    order = np.argsort(at[known], kind="stable")
    merged = _scatter(state, changed, updated.take(pa.array(order)))
    added = touched.filter(pa.array(~known))
    result = pa.concat_tables([merged, added]) if added.num_rows else merged
    return result, np.concatenate([changed, np.ones(added.num_rows, dtype=bool)])


def holding(
    partition: Location,
    fragments: Sequence[FragmentInfo],
    gen_id: str,
    ranges: dict[str, list[tuple[str, str]] | None],
) -> list[FragmentInfo]:
    """The grade `fragments` that may hold rows of `gen_id`, by the min and max of
    `gen_condition_id` in each row group's statistics (read once per fragment into
    `ranges`; a runtime fragment and a compacted one hold one generate condition)."""
    chosen = []
    for info in fragments:
        if info.name not in ranges:
            ranges[info.name] = _gen_ranges(partition.join(info.name))
        known = ranges[info.name]
        if known is None or any(low <= gen_id <= high for low, high in known):
            chosen.append(info)
    return chosen


def _gen_ranges(location: Location) -> list[tuple[str, str]] | None:
    try:
        if location.is_local:
            meta = pq.read_metadata(location.path)
        else:
            with location.open("rb") as handle:
                meta = pq.read_metadata(handle)
    except (OSError, pa.ArrowException):
        return None  # read in full (a vanished fragment is reported there)
    column = meta.schema.to_arrow_schema().get_field_index("gen_condition_id")
    if column < 0:
        return None
    out = []
    for group in range(meta.num_row_groups):
        stats = meta.row_group(group).column(column).statistics
        if stats is None or not stats.has_min_max:
            return None
        out.append((str(stats.min), str(stats.max)))
    return out


def _masked(column: pa.ChunkedArray | pa.Array, known: np.ndarray) -> pa.Array:
    """`column` with nulls where `known` is false (a key the earlier state did not have)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return pc.if_else(pa.array(known), array, pa.scalar(None, array.type))


def _scatter(state: pa.Table, changed: np.ndarray, updated: pa.Table) -> pa.Table:
    """`state` with its `changed` rows (in order) replaced by `updated`'s rows."""
    if not changed.any():
        return state
    n = state.num_rows
    source = np.arange(n, dtype=np.int64)
    source[changed] = n + np.arange(int(changed.sum()), dtype=np.int64)
    both = pa.concat_tables([state, updated.select(state.column_names).cast(state.schema)])
    return both.take(pa.array(source))


def _candidates(
    store: StudyStore,
    stage: Stage,
    condition_id: str,
    fragments: Sequence[FragmentInfo],
    gen_id: str | None = None,
) -> pa.Table:
    """The best cells among the rows of `fragments` (of `gen_id`'s grades, for grades)."""
    partition = store.partition(stage, condition_id)
    columns = row_columns(stage)
    if not fragments:
        return rows_to_cells(stage, stage.schema.empty_table().select(columns), "")
    tables = read_fragments(partition, fragments, stage.schema, columns)
    parts = []
    for info, table in zip(fragments, tables, strict=True):
        if table is None:
            raise StoreError(
                Problem(
                    "a fragment vanished during the export (a compaction finished meanwhile)",
                    file=partition.join(info.name).url,
                    hint="run the export again; compaction keeps every row",
                )
            )
        cells = rows_to_cells(stage, table, info.name)
        if gen_id is not None:
            cells = cells.filter(pc.equal(cells.column("gen_condition_id"), gen_id))
        parts.append(cells)
    return best_cells(stage, pa.concat_tables(parts))


def _merged(
    state: pa.Table, keys: pa.Array, candidates: pa.Table, prefix: str, listed: set[str]
) -> pa.Table:
    """One side (a side table) of the keys `candidates` holds: the better of the earlier
    logical row (when its fragment is still there) and the candidate, by the store's rule."""
    if candidates.num_rows == 0:
        return candidates
    at = pc.index_in(key_strings(candidates), value_set=keys)
    found = pc.is_valid(at)
    if not pc.any(found).as_py():
        return candidates
    earlier = state.take(pc.fill_null(at, 0))
    ok = pc.and_(found, pc.is_valid(earlier.column(f"{prefix}_frag")))
    still = pc.is_in(earlier.column(f"{prefix}_frag"), value_set=pa.array(sorted(listed)))
    ok = pc.and_(ok, pc.fill_null(still, False))
    if not pc.any(ok).as_py():
        return candidates
    earlier = earlier.filter(ok).select(candidates.column_names)
    return _best_side(pa.concat_tables([earlier, candidates]), prefix)


def _best_side(side: pa.Table, prefix: str) -> pa.Table:
    """One row per key of a side table, by the store's rule (via `best_cells`)."""
    cells = pa.table(
        {
            "gen_condition_id": pa.repeat(pa.scalar("", pa.string()), side.num_rows),
            "item_id": side.column("item_id"),
            "epoch": side.column("epoch"),
            "ok": side.column(f"{prefix}_ok"),
            "written_at": side.column(f"{prefix}_at"),
            "fragment": side.column(f"{prefix}_frag"),
            "_row": pa.array(np.arange(side.num_rows, dtype=np.int64)),
        }
    )
    best = best_cells(GRADES, cells)
    return side.take(best.column("_row"))


# -- the long-table rows -------------------------------------------------------------------------


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

    def place(self, table: pa.Table) -> tuple[pa.Array, np.ndarray]:
        """Each key's dataset (null: not selected) and its dataset's word."""
        n = table.num_rows
        if n == 0:
            return pa.array([], pa.string()), np.zeros(0, dtype=np.uint64)
        where = pc.index_in(table.column("item_id"), value_set=self.item_ids)
        selected = pc.fill_null(
            pc.and_(pc.is_valid(where), pc.less(table.column("epoch"), self.epochs)), False
        )
        where = pc.if_else(selected, where, pa.scalar(None, where.type))
        datasets = self.datasets.take(where)
        if isinstance(datasets, pa.ChunkedArray):
            datasets = datasets.combine_chunks()
        indices = pc.fill_null(where, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        dataset_words = self.dataset_words[indices] if len(self.dataset_words) else indices * 0
        return datasets, np.asarray(dataset_words, dtype=np.uint64)


@dataclass
class PairRows:
    """The long-table rows of one pair (`PAIR_ROWS_SCHEMA`), where their cells live, and what
    the state counted."""

    rows: pa.Table
    grades: Location  # G's partition
    solutions: Location  # C's partition
    outside_selection: int  # grade rows of items or epochs outside the selection
    #: An order-free digest of the rows and of every selected solution: equal when no row
    #: and no solution changed (whatever compaction moved).
    content: str = ""

    @property
    def graded(self) -> int:
        return self.rows.num_rows - int(self.rows.column("g_frag").null_count)

    @property
    def stale(self) -> int:
        return int(pc.sum(self.rows.column("stale")).as_py() or 0)


def row_words(
    state: pa.Table, dataset_words: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(graded, stale, fingerprint) per key of a state: the row's fingerprint mixes both
    sides' and the dataset's."""
    graded = pc.is_valid(state.column("g_frag")).to_numpy(zero_copy_only=False)
    has_solution = pc.is_valid(state.column("s_frag")).to_numpy(zero_copy_only=False)
    g_words = np.where(graded, words(state.column("g_fp")), _NO_GRADE)
    s_words = np.where(has_solution, words(state.column("s_fp")), _NULL)
    fp = _mix(_mix(g_words * _STEP + s_words) * _STEP + dataset_words)
    stale = graded & has_solution & (words(state.column("g_hash")) != words(state.column("s_hash")))
    return graded, stale, fp


def ordered_rows(
    state: pa.Table,
    mask: np.ndarray,
    dataset: pa.Array,
    stale: np.ndarray,
    fp: np.ndarray,
    extra: dict[str, np.ndarray] | None = None,
) -> pa.Table:
    """The keys of `state` in `mask` as long-table rows (`PAIR_ROWS_SCHEMA`, plus the `extra`
    columns): graded keys in the order their grades were written, then the others in the order
    their solutions were."""
    graded = pc.is_valid(state.column("g_frag")).to_numpy(zero_copy_only=False)
    parts = []
    for rows, sort in (
        (mask & graded, [("g_frag", "ascending"), ("g_pos", "ascending")]),
        (mask & ~graded, [("s_frag", "ascending"), ("s_pos", "ascending")]),
    ):
        if not rows.any():
            continue
        chosen = pa.array(np.flatnonzero(rows))
        columns = {
            "item_id": state.column("item_id").take(chosen),
            "epoch": state.column("epoch").take(chosen),
            "dataset": dataset.take(chosen),
            "g_frag": state.column("g_frag").take(chosen),
            "g_pos": state.column("g_pos").take(chosen),
            "s_frag": state.column("s_frag").take(chosen),
            "s_pos": state.column("s_pos").take(chosen),
            "stale": pa.array(stale[rows]),
            "fp": pa.array(fp[rows], pa.uint64()),
        }
        for name, values in (extra or {}).items():
            columns[name] = pa.array(values[rows])
        parts.append(pa.table(columns).sort_by(sort))
    if not parts:
        schema = PAIR_ROWS_SCHEMA
        for name, values in (extra or {}).items():
            schema = schema.append(pa.field(name, pa.from_numpy_dtype(values.dtype)))
        return schema.empty_table()
    return pa.concat_tables(parts)


def content_digest(
    state: pa.Table, row: np.ndarray, selected: np.ndarray, fp: np.ndarray, dataset_word: np.ndarray
) -> str:
    """An order-free digest of a pair's rows and of every selected solution: equal when no row
    and no solution changed (whatever compaction moved)."""
    solved = selected & pc.is_valid(state.column("s_frag")).to_numpy(zero_copy_only=False)
    row_sum = int(_mix(fp[row]).sum(dtype=np.uint64))
    solution_words = _mix(_mix(words(state.column("s_fp")))[solved] + dataset_word[solved])
    solution_sum = int(solution_words.sum(dtype=np.uint64))
    return f"{int(row.sum())}:{row_sum:016x}:{int(solved.sum())}:{solution_sum:016x}"


def pair_rows(
    state: pa.Table,
    selection: Selection,
    grades: Location,
    solutions: Location,
    *,
    include_ungraded: bool = False,
) -> PairRows:
    """The long-table rows a state gives (see the module doc and `ordered_rows`)."""
    datasets, dataset_words = selection.place(state)
    selected = pc.is_valid(datasets).to_numpy(zero_copy_only=False)
    graded, stale, fp = row_words(state, dataset_words)
    has_solution = pc.is_valid(state.column("s_frag")).to_numpy(zero_copy_only=False)
    row = selected & (graded | (has_solution & include_ungraded))
    table = ordered_rows(state, row, datasets, stale, fp)
    content = content_digest(state, row, selected, fp, dataset_words)
    return PairRows(table, grades, solutions, int((graded & ~selected).sum()), content)
