"""Resume sets: which cells still need work, as vectorised arrow/numpy set operations.

* generate: a cell `(condition_id, item_id, epoch)` is pending iff it has no `ok` row;
* grade: a cell `(grade_condition_id, gen_condition_id, item_id, epoch)` is pending iff its
  solution is `ok` and there is no `ok` grade row whose `solution_hash` equals the solution's
  current `text_hash` (judge parse failures are `ok` rows: final; provider errors are `error`
  rows: pending; a solution whose text changed is graded again).

`force=True` selects every cell. Planning reads only the key, status and hash columns of the
partitions named, never the text.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.errors import InputError, Problem
from itemeval.store.layout import GRADES, SOLUTIONS, StudyStore
from itemeval.store.schemas import STATUS_OK

GENERATE_CELL_SCHEMA = pa.schema(
    [
        pa.field("condition_id", pa.string()),
        pa.field("item_id", pa.string()),
        pa.field("epoch", pa.int32()),
    ]
)
GRADE_CELL_SCHEMA = pa.schema(
    [
        pa.field("grade_condition_id", pa.string()),
        pa.field("gen_condition_id", pa.string()),
        pa.field("item_id", pa.string()),
        pa.field("epoch", pa.int32()),
        pa.field("solution_hash", pa.string()),
    ]
)
_GRADE_KEY = ["gen_condition_id", "item_id", "epoch", "solution_hash"]


def as_item_ids(item_ids: pa.Array | pa.ChunkedArray | Sequence[str]) -> pa.Array:
    """`item_ids` as one string array; duplicates are an `InputError` (ids are keys)."""
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
    if pc.count_distinct(array).as_py() != len(array):
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


def pending_generate(
    store: StudyStore,
    condition_ids: Sequence[str],
    item_ids: pa.Array | pa.ChunkedArray | Sequence[str],
    epochs: int,
    *,
    force: bool = False,
) -> pa.Table:
    """The generate cells of `condition_ids x item_ids x range(epochs)` without an `ok` row.

    Columns `condition_id, item_id, epoch` (`GENERATE_CELL_SCHEMA`), per condition in the
    order of `item_ids`, epochs ascending within an item.
    """
    if epochs < 1:
        raise InputError(Problem(f"epochs must be at least 1, not {epochs}", field="epochs"))
    items = as_item_ids(item_ids)
    conditions = list(dict.fromkeys(condition_ids))
    stored: dict[str, pa.Table] = {}
    if not force and len(items):
        stored = store.read_by_condition(
            SOLUTIONS, conditions, ["item_id", "epoch", "status"], dedup=False
        )
    parts = []
    for cid in conditions:
        done = np.zeros((len(items), epochs), dtype=bool)
        table = stored.get(cid)
        if table is not None and table.num_rows:
            ok = table.filter(pc.equal(table.column("status"), STATUS_OK))
            index = pc.index_in(ok.column("item_id"), value_set=items)
            epoch = ok.column("epoch")
            keep = pc.and_(pc.is_valid(index), pc.less(epoch, epochs))
            rows = pc.filter(index, keep).to_numpy(zero_copy_only=False)
            cols = pc.filter(epoch, keep).to_numpy(zero_copy_only=False)
            done[rows, cols] = True
        item_index, epoch_index = np.nonzero(~done)
        parts.append(
            pa.table(
                [
                    pa.repeat(cid, len(item_index)),
                    items.take(pa.array(item_index)),
                    pa.array(epoch_index.astype(np.int32)),
                ],
                schema=GENERATE_CELL_SCHEMA,
            )
        )
    if not parts:
        return GENERATE_CELL_SCHEMA.empty_table()
    return pa.concat_tables(parts)


def ok_solutions(
    store: StudyStore,
    gen_condition_ids: Sequence[str],
    item_ids: pa.Array | pa.ChunkedArray | Sequence[str] | None = None,
) -> pa.Table:
    """`gen_condition_id, item_id, epoch, solution_hash` of every `ok` logical solution."""
    gens = list(dict.fromkeys(gen_condition_ids))
    tables = store.read_by_condition(SOLUTIONS, gens, ["item_id", "epoch", "status", "text_hash"])
    wanted = as_item_ids(item_ids) if item_ids is not None else None
    parts = []
    for gen, table in tables.items():
        ok = table.filter(pc.equal(table.column("status"), STATUS_OK))
        if wanted is not None:
            ok = ok.filter(pc.is_in(ok.column("item_id"), value_set=wanted))
        parts.append(
            pa.table(
                {
                    "gen_condition_id": pa.repeat(gen, ok.num_rows),
                    "item_id": ok.column("item_id"),
                    "epoch": ok.column("epoch"),
                    "solution_hash": ok.column("text_hash"),
                }
            )
        )
    if not parts:
        return GRADE_CELL_SCHEMA.remove(0).empty_table()
    return pa.concat_tables(parts)


def pending_grade(
    store: StudyStore,
    grade_condition_ids: Sequence[str],
    gen_condition_ids: Sequence[str],
    *,
    force: bool = False,
    item_ids: pa.Array | pa.ChunkedArray | Sequence[str] | None = None,
) -> pa.Table:
    """The grade cells of `grade_condition_ids x` every `ok` solution of `gen_condition_ids`
    that have no `ok` grade of the solution's current text (`GRADE_CELL_SCHEMA`).

    `item_ids`, when given, narrows the solutions to those items.
    """
    solutions = ok_solutions(store, gen_condition_ids, item_ids)
    grade_ids = list(dict.fromkeys(grade_condition_ids))
    graded: dict[str, pa.Table] = {}
    if not force and solutions.num_rows:
        graded = store.read_by_condition(GRADES, grade_ids, [*_GRADE_KEY, "status"], dedup=False)
    gens = pa.array(list(dict.fromkeys(gen_condition_ids)), type=pa.string())
    parts = []
    for gid in grade_ids:
        cells = solutions
        table = graded.get(gid)
        if table is not None and table.num_rows:
            done = table.filter(
                pc.and_(
                    pc.equal(table.column("status"), STATUS_OK),
                    pc.is_in(table.column("gen_condition_id"), value_set=gens),
                )
            ).select(_GRADE_KEY)
            if done.num_rows:
                cells = solutions.join(done, keys=_GRADE_KEY, join_type="left anti")
                cells = cells.sort_by([(k, "ascending") for k in _GRADE_KEY[:3]])
        cells = cells.select(_GRADE_KEY)
        parts.append(cells.add_column(0, "grade_condition_id", pa.repeat(gid, cells.num_rows)))
    if not parts:
        return GRADE_CELL_SCHEMA.empty_table()
    return pa.concat_tables(parts).cast(GRADE_CELL_SCHEMA)
