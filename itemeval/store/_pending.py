"""Resume sets: which cells still need work, as boolean masks over the selected items.

A run's cells are `(condition, item, epoch)`; the driver must know which are pending without a
row per cell. `CellMasks` holds, per condition (or per grade x generate condition pair), one
`bool[items, epochs]` matrix: one byte per cell instead of a row of strings, and slices of it
become the cells of a shard only when the shard is dispatched (`cells(key, start, stop)`).

* `pending_generate`: a generate cell `(condition_id, item_id, epoch)` is pending iff it has no
  `ok` row;
* `pending_grade`: a grade cell `(grade_condition_id, gen_condition_id, item_id, epoch)` is
  pending iff its solution is `ok` and no `ok` grade row has the solution's current `text_hash`
  (judge parse failures are `ok` rows: final; provider errors are `error` rows: pending; a
  solution whose text changed is graded again);
* `SolutionIndex`: where one generate condition's `ok` solutions are (hash and fragment per
  cell), so grade shards can name the fragment a worker reads.

`force=True` selects every cell (for grades: every `ok` solution). Rows of items or epochs
outside the request are ignored. The two pending sets stream the store (`StudyStore.scan`),
only its key, status and hash columns, and fold the rows into per-cell arrays as they come:
what they hold is a few bytes per cell (masks; a 64-bit key per current solution only where a
grade names the cell), not the rows, so their memory follows the run's cells and a batch, not
the store's size.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.errors import InputError, Problem
from itemeval.store._content_keys import hash_keys
from itemeval.store._layout import GRADES, SOLUTIONS, StudyStore
from itemeval.store._positions import ItemLookup
from itemeval.store._schemas import STATUS_OK
from itemeval.store.fragments import FRAGMENT_ORDINAL

#: `CellMasks.to_table()` of generate masks (keyed by condition id).
GENERATE_CELL_SCHEMA = pa.schema(
    [
        pa.field("condition_id", pa.string()),
        pa.field("item_id", pa.string()),
        pa.field("epoch", pa.int32()),
    ]
)
#: `CellMasks.to_table()` of grade masks (keyed by grade and generate condition id).
GRADE_CELL_SCHEMA = pa.schema(
    [
        pa.field("grade_condition_id", pa.string()),
        pa.field("gen_condition_id", pa.string()),
        pa.field("item_id", pa.string()),
        pa.field("epoch", pa.int32()),
    ]
)

ItemIds = pa.Array | pa.ChunkedArray | Sequence[str]


class CellMasks:
    """Pending flags of `keys x items x epochs` (see the module doc)."""

    def __init__(self, item_ids: pa.Array, epochs: int, masks: dict[Hashable, np.ndarray]):
        self.item_ids = item_ids
        self.epochs = epochs
        self.masks = masks

    @property
    def num_rows(self) -> int:
        """All pending cells."""
        return int(sum(int(mask.sum()) for mask in self.masks.values()))

    def count(self, key: Hashable) -> int:
        mask = self.masks.get(key)
        return 0 if mask is None else int(mask.sum())

    def per_item(self, key: Hashable, at: slice = slice(None)) -> np.ndarray:
        """Pending epochs of each item (aligned with `item_ids`), of the items `at`."""
        mask = self.masks.get(key)
        if mask is None:
            return np.zeros(len(range(len(self.item_ids))[at]), dtype=np.int64)
        return mask[at].sum(axis=1, dtype=np.int64)

    def cells(self, key: Hashable, start: int = 0, stop: int | None = None) -> pa.Table:
        """`item_id, epoch` of the pending cells of items `start:stop`, items in order."""
        mask = self.masks.get(key)
        stop = len(self.item_ids) if stop is None else stop
        if mask is None:
            rows = np.zeros(0, dtype=np.int64)
            epochs = np.zeros(0, dtype=np.int32)
        else:
            rows, epochs = np.nonzero(mask[start:stop])
        return pa.table(
            {
                "item_id": self.item_ids.take(pa.array(rows + start, pa.int64())),
                "epoch": pa.array(epochs.astype(np.int32), pa.int32()),
            }
        )

    def to_table(self) -> pa.Table:
        """Every pending cell as a row, key by key, items in order, epochs ascending
        (`GENERATE_CELL_SCHEMA`, or `GRADE_CELL_SCHEMA` for grade masks). For inspection and
        tests: the runtime reads slices with `cells`."""
        grade = any(isinstance(key, tuple) for key in self.masks)
        schema = GRADE_CELL_SCHEMA if grade else GENERATE_CELL_SCHEMA
        parts = []
        for key in self.masks:
            cells = self.cells(key)
            names = key if isinstance(key, tuple) else (key,)
            for position, value in reversed(list(enumerate(names))):
                column = pa.repeat(value, cells.num_rows)
                cells = cells.add_column(0, schema.field(position), column)
            parts.append(cells)
        if not parts:
            return schema.empty_table()
        return pa.concat_tables(parts).cast(schema)


def as_item_ids(item_ids: ItemIds, *, unique: bool = False) -> pa.Array:
    """`item_ids` as one string array; duplicates are an `InputError` (ids are keys).
    `unique=True`: the caller checked them already (the planner does, while reading), which
    saves a hash table of every id."""
    if isinstance(item_ids, pa.ChunkedArray):
        array = item_ids.combine_chunks()
    elif isinstance(item_ids, pa.Array):
        array = item_ids
    else:
        array = pa.array(list(item_ids), type=pa.string())
    if not pa.types.is_string(array.type):
        array = array.cast(pa.string())
    if array.null_count:
        raise InputError(Problem("item ids contain a null", field="item_id"))
    if not unique and pc.count_distinct(array).as_py() != len(array):
        counts = pc.value_counts(array)
        repeated = counts.filter(pc.greater(counts.field("counts"), 1)).field("values")
        raise InputError(
            Problem(
                f"item ids are not unique: {repeated.slice(0, 5).to_pylist()}",
                field="item_id",
                hint="item ids are keys of the store; make them unique across datasets",
            )
        )
    return array


def _checked(item_ids: ItemIds, epochs: int, unique: bool) -> pa.Array:
    if epochs < 1:
        raise InputError(Problem(f"epochs must be at least 1, not {epochs}", field="epochs"))
    return as_item_ids(item_ids, unique=unique)


def ok_rows(table: pa.Table) -> pa.Table:
    """A fragment's `ok` rows, without the status column (a `read_partitions` reducer)."""
    ok = table.filter(pc.equal(table.column("status"), STATUS_OK))
    return ok.drop_columns(["status"])


_GEN_CONDITION = pa.dictionary(pa.int32(), pa.string())


def _keyed(table: pa.Table, column: str) -> pa.Table:
    at = table.schema.get_field_index(column)
    return table.set_column(at, column, pa.array(hash_keys(table.column(at)), pa.uint64()))


def _ok_rows_keyed(table: pa.Table) -> pa.Table:
    """A solutions fragment's `ok` rows, `text_hash` as a `hash_keys` key."""
    return _keyed(ok_rows(table), "text_hash")


def _ok_grade_cells(table: pa.Table) -> pa.Table:
    """A grades fragment's `ok` rows, `gen_condition_id` dictionary-encoded."""
    ok = ok_rows(table)
    at = ok.schema.get_field_index("gen_condition_id")
    return ok.set_column(at, "gen_condition_id", ok.column(at).cast(_GEN_CONDITION))


def _ok_grade_rows(table: pa.Table) -> pa.Table:
    """A grades fragment's `ok` rows, `gen_condition_id` dictionary-encoded and
    `solution_hash` as a `hash_keys` key."""
    return _keyed(_ok_grade_cells(table), "solution_hash")


def cell_positions(
    table: pa.Table, items: ItemLookup, epochs: int
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of `table` that name a selected item and epoch, and their cell positions
    (`item index * epochs + epoch`)."""
    item = items.positions(table.column("item_id"))
    epoch = table.column("epoch").to_numpy().astype(np.int64)
    rows = np.flatnonzero((item >= 0) & (epoch < epochs))
    return rows, item[rows] * epochs + epoch[rows]


def pending_generate(
    store: StudyStore,
    condition_ids: Sequence[str],
    item_ids: ItemIds,
    epochs: int,
    *,
    force: bool = False,
    unique_ids: bool = False,
) -> CellMasks:
    """Generate cells of `condition_ids x item_ids x range(epochs)` without an `ok` row
    (keyed by condition id). `unique_ids=True` skips checking that `item_ids` are unique."""
    items = _checked(item_ids, epochs, unique_ids)
    n = len(items)
    masks: dict[Hashable, np.ndarray] = {}
    lookup = ItemLookup(items) if not force and n else None
    for cid in dict.fromkeys(condition_ids):
        pending = np.ones(n * epochs, dtype=bool)
        if lookup is not None:
            # Streamed: a cell with an `ok` row is done, however often the row is seen.
            for ok in store.scan(SOLUTIONS, cid, ["item_id", "epoch", "status"], reduce=ok_rows):
                _, positions = cell_positions(ok, lookup, epochs)
                pending[positions] = False
        masks[cid] = pending.reshape(n, epochs)
    return CellMasks(items, epochs, masks)


def pending_grade(
    store: StudyStore,
    grade_condition_ids: Sequence[str],
    gen_condition_ids: Sequence[str],
    item_ids: ItemIds,
    epochs: int,
    *,
    force: bool = False,
    unique_ids: bool = False,
) -> CellMasks:
    """Grade cells still to grade: every grade condition crossed with every generate condition
    given (keyed `(grade_condition_id, gen_condition_id)`). `unique_ids` as for
    `pending_generate`.

    Both stages are streamed (`StudyStore.scan`), never held as rows: first which cells some
    `ok` grade names (a bit per cell), and which grades fragments hold rows of which generate
    condition; then one generate condition at a time, its solutions folded into a bit per cell
    (is there an `ok` one) and, for the named cells only, the current solution's 64-bit key,
    and its grades read again (only the fragments that hold some), each clearing its cell if it
    graded that solution. So at most one condition's keys are held, whatever the number of
    models, and a first run's grade stage (no grade stored yet) holds masks and the id lookup,
    not a key per cell. Grades fragments hold one generate condition each unless compacted;
    a compacted one is read once per condition."""
    items = _checked(item_ids, epochs, unique_ids)
    n = len(items)
    gens = list(dict.fromkeys(gen_condition_ids))
    grade_ids = list(dict.fromkeys(grade_condition_ids))
    lookup = ItemLookup(items)
    named = {gen: np.zeros(n * epochs, dtype=bool) for gen in gens}
    where = (
        {} if force else {gid: _mark_graded(store, gid, named, lookup, epochs) for gid in grade_ids}
    )
    masks: dict[Hashable, np.ndarray] = {}
    for gen in gens:
        solutions = current_solution_keys(store, gen, lookup, epochs, watch=_watch(named.pop(gen)))
        for gid in grade_ids:
            pending = solutions.present.copy()
            fragments = where.get(gid)
            if fragments is not None and fragments.holds(gen) and len(solutions.keys):
                _clear_graded_cells(store, gid, gen, fragments, solutions, pending, lookup, epochs)
            masks[(gid, gen)] = pending.reshape(n, epochs)
        del solutions  # before the next condition's keys are made
    ordered = {(gid, gen): masks[(gid, gen)] for gid in grade_ids for gen in gens}
    return CellMasks(items, epochs, ordered)


@dataclass
class GradeFragments:
    """Which fragments of a grades partition hold `ok` rows of which generate condition (for
    the selected cells), as one scan saw them."""

    seen: set[str]  # every fragment that scan read
    holding: dict[str, set[str]]  # generate condition -> the fragments holding some of its rows

    def holds(self, gen: str) -> bool:
        return bool(self.holding.get(gen))

    def without(self, gen: str) -> set[str]:
        """Fragments seen that hold no row of `gen` (a later scan for `gen` may skip them;
        fragments it did not see, written or compacted since, are read)."""
        return self.seen - self.holding.get(gen, set())


#: Above this share of a condition's cells named by grades, every cell keeps its key: the
#: sorted positions (8 bytes each) and their look-ups would cost more than they save.
DENSE_WATCH = 0.5


def _mark_graded(
    store: StudyStore,
    grade_condition_id: str,
    named: dict[str, np.ndarray],
    items: ItemLookup,
    epochs: int,
) -> GradeFragments | None:
    """Mark in `named` (per generate condition, a bit per cell) the cells an `ok` grade row of
    `grade_condition_id` names; which fragments hold them (None: no fragment does)."""
    listed: list[str] = []
    holding: dict[str, set[int]] = {}
    columns = ["gen_condition_id", "item_id", "epoch", "status"]
    scan = store.scan(
        GRADES, grade_condition_id, columns, reduce=_ok_grade_cells, fragment_names=listed
    )
    for graded in scan:
        rows, positions = cell_positions(graded, items, epochs)
        if not len(rows):
            continue
        gen_of_row = graded.column("gen_condition_id").take(pa.array(rows))
        fragment_of_row = graded.column(FRAGMENT_ORDINAL).to_numpy()[rows]
        for gen, cells in named.items():
            mine = pc.equal(gen_of_row, gen).to_numpy(zero_copy_only=False)
            if mine.any():
                cells[positions[mine]] = True
                holding.setdefault(gen, set()).update(np.unique(fragment_of_row[mine]).tolist())
    if not holding:
        return None
    return GradeFragments(
        seen=set(listed),
        holding={gen: {listed[o] for o in ordinals} for gen, ordinals in holding.items()},
    )


def _watch(named: np.ndarray) -> np.ndarray | None:
    """The sorted positions of the named cells (None: so many that every cell keeps its key)."""
    if int(named.sum()) > DENSE_WATCH * len(named):
        return None
    return np.flatnonzero(named)


@dataclass
class SolutionKeys:
    """One generate condition's current `ok` solution per cell (by cell position): whether
    there is one, and for the watched cells the `hash_keys` key of its text."""

    present: np.ndarray  # bool[cells]
    #: sorted cell positions whose key is kept (`keys` aligned with them); None: every cell
    watched: np.ndarray | None
    keys: np.ndarray  # uint64, 0 where not present; empty when no watched cell has one

    def is_current(self, positions: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Whether each of `keys` is the key of the current solution at its position (False
        where there is none, or where the position is not watched: no key is known there)."""
        if not len(self.keys):
            return np.zeros(len(positions), dtype=bool)
        if self.watched is None:
            return self.present[positions] & (self.keys[positions] == keys)
        slots = np.minimum(np.searchsorted(self.watched, positions), len(self.watched) - 1)
        known = self.watched[slots] == positions
        return known & self.present[positions] & (self.keys[slots] == keys)


def current_solution_keys(
    store: StudyStore,
    gen_condition_id: str,
    items: pa.Array | ItemLookup,
    epochs: int,
    *,
    watch: np.ndarray | None = None,
) -> SolutionKeys:
    """Fold one generate condition's `ok` rows, streamed, into whether each cell has one and
    the key of the current one at the `watch`ed cells (sorted unique positions; None: every
    cell): the store's rule among `ok` rows (the later `written_at`, then the later fragment),
    as `deduplicate` would choose. A row seen twice (compaction during the scan) is the same
    row and changes nothing."""
    lookup = items if isinstance(items, ItemLookup) else ItemLookup(items)
    if watch is None:
        return _every_cells_keys(store, gen_condition_id, lookup, epochs)
    present = np.zeros(len(lookup) * epochs, dtype=bool)
    keys = _fold_by_rule(store, gen_condition_id, lookup, epochs, watch, present)
    return SolutionKeys(present, watch, keys)


def _fold_by_rule(
    store: StudyStore,
    gen_condition_id: str,
    lookup: ItemLookup,
    epochs: int,
    watch: np.ndarray | None,
    present: np.ndarray | None,
) -> np.ndarray:
    """The current solution's key at each `watch`ed cell (None: every cell) by the store's rule
    (empty when none has one), marking in `present` (if given) every cell with an `ok` row."""
    current = CurrentFold(len(lookup) * epochs if watch is None else len(watch))
    columns = ["item_id", "epoch", "status", "text_hash", "written_at"]
    for ok in store.scan(SOLUTIONS, gen_condition_id, columns, reduce=_ok_rows_keyed):
        rows, positions = cell_positions(ok, lookup, epochs)
        if present is not None:
            present[positions] = True
        if watch is not None:
            rows, positions = _watched(watch, rows, positions)
        if len(rows):
            written = ok.column("written_at").cast(pa.int64()).to_numpy()[rows]
            current.add(positions, written, ok.column("text_hash").to_numpy()[rows])
    return current.keys


#: Above this share of a condition's cells with several `ok` rows (a forced run made them all
#: again, say), `_every_cells_keys` folds every cell by the rule at once: watching that many
#: (their positions, and a key and a `written_at` each) would cost more than it saves.
SEVERAL_SHARE = 0.25


def _every_cells_keys(
    store: StudyStore, gen_condition_id: str, lookup: ItemLookup, epochs: int
) -> SolutionKeys:
    """`current_solution_keys` of every cell, in a key and a byte a cell: a cell with one `ok`
    row (nearly every cell) has that row's key; the few with two or more (a solution made
    again, a row seen twice while the partition was compacted) are decided by the store's rule
    in a second scan that watches only them. Folding every cell by the rule at once held a
    `written_at` a cell more (8 MB a million cells, at the grade stage's peak)."""
    cells = len(lookup) * epochs
    rows_of = np.zeros(cells, dtype=np.uint8)  # `ok` rows seen of each cell, counted up to 2
    keys = np.zeros(cells, dtype=np.uint64)
    columns = ["item_id", "epoch", "status", "text_hash"]
    for ok in store.scan(SOLUTIONS, gen_condition_id, columns, reduce=_ok_rows_keyed):
        rows, positions = cell_positions(ok, lookup, epochs)
        if not len(rows):
            continue
        keys[positions] = ok.column("text_hash").to_numpy()[rows]  # right where seen once
        seen, times = np.unique(positions, return_counts=True)
        rows_of[seen] = np.minimum(rows_of[seen] + np.minimum(times, 2), 2)
    several = np.flatnonzero(rows_of > 1)
    present = rows_of > 0
    del rows_of
    if len(several) > SEVERAL_SHARE * cells:
        del keys, several  # before the fold's own arrays are made
        return SolutionKeys(
            present, None, _fold_by_rule(store, gen_condition_id, lookup, epochs, None, None)
        )
    if len(several):
        decided = _fold_by_rule(store, gen_condition_id, lookup, epochs, several, None)
        # No key (the cells' rows gone since the first scan): none is current, so they are
        # graded again, never matched against a row the first scan happened to see last.
        keys[several] = decided if len(decided) else 0
    return SolutionKeys(present, None, keys if present.any() else np.zeros(0, np.uint64))


class CurrentFold:
    """Per slot (a cell, or a watched cell), the current `ok` solution of the rows folded so
    far: its `written_at`, its `hash_keys` key and, when given, its fragment's ordinal. Rows
    come in fragment order; the store's rule decides: the later `written_at`, then the later
    fragment. The arrays are made when a first row comes (8 bytes a slot each)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.keys = np.zeros(0, dtype=np.uint64)
        self.newest = np.zeros(0, dtype=np.int64)
        self.fragments = np.zeros(0, dtype=np.int32)

    def add(
        self,
        slots: np.ndarray,
        written: np.ndarray,
        keys: np.ndarray,
        fragments: np.ndarray | None = None,
    ) -> None:
        if not len(self.keys):
            self.keys = np.zeros(self.slots, dtype=np.uint64)
            self.newest = np.full(self.slots, np.iinfo(np.int64).min, dtype=np.int64)
            if fragments is not None:
                self.fragments = np.zeros(self.slots, dtype=np.int32)
        # The last row of each slot in (slot, written_at, row order): within a batch, fragments
        # come in name order, so a tie goes to the later fragment as the rule says.
        order = np.lexsort((np.arange(len(slots)), written, slots))
        slots, written, keys = slots[order], written[order], keys[order]
        last = np.ones(len(slots), dtype=bool)
        last[:-1] = slots[1:] != slots[:-1]
        slots, written, keys = slots[last], written[last], keys[last]
        # Against earlier batches (earlier fragments): ties go to this one.
        newer = written >= self.newest[slots]
        at = slots[newer]
        self.newest[at] = written[newer]
        self.keys[at] = keys[newer]
        if fragments is not None:
            self.fragments[at] = fragments[order][last][newer]


def _watched(
    watch: np.ndarray, rows: np.ndarray, positions: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The rows at watched positions, and their slots in `watch`."""
    if not len(watch):
        return rows[:0], positions[:0]
    at = np.minimum(np.searchsorted(watch, positions), len(watch) - 1)
    hit = watch[at] == positions
    return rows[hit], at[hit]


def _clear_graded_cells(
    store: StudyStore,
    grade_condition_id: str,
    gen: str,
    fragments: GradeFragments,
    current: SolutionKeys,
    pending: np.ndarray,
    items: ItemLookup,
    epochs: int,
) -> None:
    """Mark done the cells of `gen` that an `ok` grade of `grade_condition_id` graded with the
    current solution, reading only the fragments that may hold such grades."""
    columns = ["gen_condition_id", "item_id", "epoch", "solution_hash", "status"]
    skip = fragments.without(gen)
    for graded in store.scan(GRADES, grade_condition_id, columns, reduce=_ok_grade_rows, skip=skip):
        _clear_graded(graded, gen, current, pending, items, epochs)


def _clear_graded(
    graded: pa.Table,
    gen: str,
    current: SolutionKeys,
    pending: np.ndarray,
    items: ItemLookup,
    epochs: int,
) -> None:
    """Mark done the cells of `gen` in `graded` (`ok` grade rows) whose solution hash is the
    current solution's."""
    mine = pc.equal(graded.column("gen_condition_id"), gen)
    graded = graded.filter(mine)
    rows, positions = cell_positions(graded, items, epochs)
    if not len(rows):
        return
    grade_keys = graded.column("solution_hash").to_numpy()[rows]
    pending[positions[current.is_current(positions, grade_keys)]] = False
