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
outside the request are ignored. The pending sets read the partitions' cells (`_summary`: a
partition's summary and the fragments it does not cover, the best row of each key, only the
key, status and hash columns), one partition at a time, and keep a few bytes per cell
(masks; a 64-bit key per current solution), not the rows.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.errors import InputError, Problem
from itemeval.store._layout import GRADES, SOLUTIONS, StudyStore
from itemeval.store._positions import ItemLookup
from itemeval.store._schemas import STATUS_OK
from itemeval.store._summary import PartitionCells, every_cell_ok, read_cells

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

ItemIds: TypeAlias = pa.Array | pa.ChunkedArray | Sequence[str]


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
            rows: np.ndarray = np.zeros(0, dtype=np.int64)
            epochs: np.ndarray = np.zeros(0, dtype=np.int32)
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


def cell_positions(
    table: pa.Table, items: ItemLookup, epochs: int, item: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of `table` that name a selected item and epoch, and their cell positions
    (`item index * epochs + epoch`); `item`: each row's item position when known already."""
    if item is None:
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
        partition = store.partition(SOLUTIONS, cid)
        if lookup is not None and every_cell_ok(SOLUTIONS, partition, lookup, epochs):
            pending[:] = False  # the summary's footer says so: no cell read
        elif lookup is not None:
            read = read_cells(SOLUTIONS, partition, _KEYS_OK, items=lookup)
            ok, item = _ok_cells(read)
            _, positions = cell_positions(ok, lookup, epochs, item)
            pending[positions] = False
        masks[cid] = pending.reshape(n, epochs)
    return CellMasks(items, epochs, masks)


_KEYS_OK = ["item_id", "epoch", "ok"]


def _ok_cells(read: PartitionCells) -> tuple[pa.Table, np.ndarray | None]:
    """The `ok` cells of a read, and their item positions when the read knew them."""
    ok = read.cells.column("ok")
    mask = (
        ok.to_numpy(zero_copy_only=False)
        if not isinstance(ok, pa.ChunkedArray)
        else (ok.combine_chunks().to_numpy(zero_copy_only=False))
    )
    item = read.item_positions
    return read.cells.filter(pa.array(mask)), (None if item is None else item[mask])


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

    Read from the partitions' cells (their summaries and the fragments they do not cover), one
    generate condition at a time: its current `ok` solutions' text keys (8 bytes a cell), then
    each grade condition's cells of that condition only (a summary's row groups are one
    generate condition's), each clearing its cell when its best row is `ok` and graded the
    current solution."""
    items = _checked(item_ids, epochs, unique_ids)
    n = len(items)
    gens = list(dict.fromkeys(gen_condition_ids))
    grade_ids = list(dict.fromkeys(grade_condition_ids))
    lookup = ItemLookup(items)
    masks: dict[Hashable, np.ndarray] = {}
    for gen in gens:
        solutions = current_solution_keys(store, gen, lookup, epochs)
        for gid in grade_ids:
            pending = solutions.present.copy()
            if not force and len(solutions.keys):
                read = read_cells(
                    GRADES,
                    store.partition(GRADES, gid),
                    ["item_id", "epoch", "ok", "solution_hash"],
                    generate=[gen],
                    items=lookup,
                )
                graded, item = _ok_cells(read)
                rows, positions = cell_positions(graded, lookup, epochs, item)
                keys = graded.column("solution_hash").to_numpy()[rows]
                pending[positions[solutions.is_current(positions, keys)]] = False
            masks[(gid, gen)] = pending.reshape(n, epochs)
        del solutions  # before the next condition's keys are made
    ordered: dict[Hashable, np.ndarray] = {
        (gid, gen): masks[(gid, gen)] for gid in grade_ids for gen in gens
    }
    return CellMasks(items, epochs, ordered)


@dataclass
class SolutionKeys:
    """One generate condition's current `ok` solution per cell (by cell position): whether
    there is one, and the `hash_keys` key of its text."""

    present: np.ndarray  # bool[cells]
    keys: np.ndarray  # uint64[cells], 0 where not present; empty when none is

    def is_current(self, positions: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Whether each of `keys` is the key of the current solution at its position (False
        where there is none)."""
        if not len(self.keys):
            return np.zeros(len(positions), dtype=bool)
        return self.present[positions] & (self.keys[positions] == keys)


def current_solution_keys(
    store: StudyStore, gen_condition_id: str, items: pa.Array | ItemLookup, epochs: int
) -> SolutionKeys:
    """Whether each cell of one generate condition has an `ok` solution, and the key of its
    text: the partition's cells (the store's rule: an `ok` row beats an error, then the later
    `written_at`, then the later fragment)."""
    lookup = items if isinstance(items, ItemLookup) else ItemLookup(items)
    read = read_cells(
        SOLUTIONS,
        store.partition(SOLUTIONS, gen_condition_id),
        [*_KEYS_OK, "text_hash"],
        items=lookup,
    )
    ok, item = _ok_cells(read)
    rows, positions = cell_positions(ok, lookup, epochs, item)
    present = np.zeros(len(lookup) * epochs, dtype=bool)
    if not len(rows):
        return SolutionKeys(present, np.zeros(0, dtype=np.uint64))
    keys = np.zeros(len(present), dtype=np.uint64)
    keys[positions] = ok.column("text_hash").to_numpy()[rows]
    present[positions] = True
    return SolutionKeys(present, keys)
