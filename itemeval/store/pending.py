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
from itemeval.store.cell_masks import generate_pending
from itemeval.store.fragments import FRAGMENT_NAME
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
    items = as_item_ids(item_ids)
    masks = generate_pending(store, condition_ids, items, epochs, force=force)
    parts = []
    for cid in masks.masks:
        cells = masks.cells(cid)
        parts.append(cells.add_column(0, "condition_id", pa.repeat(cid, cells.num_rows)))
    if not parts:
        return GENERATE_CELL_SCHEMA.empty_table()
    return pa.concat_tables(parts).cast(GENERATE_CELL_SCHEMA)


def ok_solutions(
    store: StudyStore,
    gen_condition_ids: Sequence[str],
    item_ids: pa.Array | pa.ChunkedArray | Sequence[str] | None = None,
) -> pa.Table:
    """`gen_condition_id, item_id, epoch, solution_hash` of every `ok` logical solution."""
    by_gen = _ok_solutions_by_gen(store, list(dict.fromkeys(gen_condition_ids)), item_ids)
    parts = [
        table.add_column(0, "gen_condition_id", pa.repeat(gen, table.num_rows))
        for gen, table in by_gen.items()
    ]
    if not parts:
        return GRADE_CELL_SCHEMA.remove(0).empty_table()
    return pa.concat_tables(parts)


def _ok_solutions_by_gen(
    store: StudyStore,
    gens: list[str],
    item_ids: pa.Array | pa.ChunkedArray | Sequence[str] | None,
    fragment_names: bool = False,
) -> dict[str, pa.Table]:
    """Per generate condition: `item_id, epoch, solution_hash` of its `ok` logical rows (and
    `fragment`, the file holding each, with `fragment_names`)."""
    tables = store.read_by_condition(
        SOLUTIONS,
        gens,
        ["item_id", "epoch", "status", "text_hash"],
        fragment_names=fragment_names,
    )
    wanted = as_item_ids(item_ids) if item_ids is not None else None
    out = {}
    for gen, table in tables.items():
        keep = pc.equal(table.column("status"), STATUS_OK)
        if wanted is not None:
            keep = pc.and_(keep, pc.is_in(table.column("item_id"), value_set=wanted))
        ok = table.filter(keep)
        columns = {
            "item_id": ok.column("item_id"),
            "epoch": ok.column("epoch"),
            "solution_hash": ok.column("text_hash"),
        }
        if fragment_names:
            columns["fragment"] = ok.column(FRAGMENT_NAME).cast(pa.string())
        out[gen] = pa.table(columns)
    return out


def pending_grade(
    store: StudyStore,
    grade_condition_ids: Sequence[str],
    gen_condition_ids: Sequence[str],
    *,
    force: bool = False,
    item_ids: pa.Array | pa.ChunkedArray | Sequence[str] | None = None,
    fragment_names: bool = False,
) -> pa.Table:
    """The grade cells of `grade_condition_ids x` every `ok` solution of `gen_condition_ids`
    that have no `ok` grade of the solution's current text (`GRADE_CELL_SCHEMA`).

    `item_ids`, when given, narrows the solutions to those items. Per grade condition, per
    generate condition, in the solutions' key order. With `fragment_names`, a last column
    `fragment` names the solutions fragment holding each cell's solution (what a grading
    worker reads).
    """
    gens = list(dict.fromkeys(gen_condition_ids))
    grade_ids = list(dict.fromkeys(grade_condition_ids))
    solutions = _ok_solutions_by_gen(store, gens, item_ids, fragment_names)
    schema = GRADE_CELL_SCHEMA
    if fragment_names:
        schema = schema.append(pa.field("fragment", pa.string()))
    graded: dict[str, pa.Table] = {}
    if not force and any(t.num_rows for t in solutions.values()):
        graded = store.read_by_condition(GRADES, grade_ids, [*_GRADE_KEY, "status"], dedup=False)
    parts = []
    for gid in grade_ids:
        table = graded.get(gid)
        grades_by_gen = _ok_grades_by_gen(table) if table is not None else {}
        for gen in gens:
            cells = solutions[gen]
            done = grades_by_gen.get(gen)
            if done is not None and cells.num_rows:
                cells = cells.filter(pa.array(~_graded_mask(cells, done)))
            cells = cells.add_column(0, "gen_condition_id", pa.repeat(gen, cells.num_rows))
            parts.append(cells.add_column(0, "grade_condition_id", pa.repeat(gid, cells.num_rows)))
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts).cast(schema)


def _ok_grades_by_gen(table: pa.Table) -> dict[str, pa.Table]:
    """The `ok` grade rows per `gen_condition_id`: one pass to group, one take, zero-copy
    slices (not one filter over the whole table per generate condition)."""
    if table.num_rows == 0:
        return {}
    encoded = pc.dictionary_encode(table.column("gen_condition_id")).combine_chunks()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    ok_rows = np.flatnonzero(
        pc.equal(table.column("status"), STATUS_OK).to_numpy(zero_copy_only=False)
    )
    order = ok_rows[np.argsort(codes[ok_rows], kind="stable")]
    grouped = table.select(["item_id", "epoch", "solution_hash"]).take(pa.array(order))
    counts = np.bincount(codes[ok_rows], minlength=len(encoded.dictionary))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return {
        gen: grouped.slice(int(starts[i]), int(counts[i]))
        for i, gen in enumerate(encoded.dictionary.to_pylist())
        if counts[i]
    }


def _graded_mask(cells: pa.Table, grades: pa.Table) -> np.ndarray:
    """For each solution cell, whether some grade row has its key and its `solution_hash`.

    Vectorised: solution cells are unique per (item, epoch), so a dense map from
    `item index * epochs + epoch` to the cell's row finds each grade's solution in O(1).
    """
    encoded = pc.dictionary_encode(cells.column("item_id")).combine_chunks()
    n_epochs = int(pc.max(cells.column("epoch")).as_py()) + 1
    cell_code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64) * n_epochs
    cell_code += cells.column("epoch").to_numpy()
    row_of = np.full(len(encoded.dictionary) * n_epochs, -1, dtype=np.int64)
    row_of[cell_code] = np.arange(cells.num_rows)

    item_index = pc.index_in(grades.column("item_id"), value_set=encoded.dictionary)
    grade_epoch = grades.column("epoch")
    known = pc.and_(pc.is_valid(item_index), pc.less(grade_epoch, n_epochs))
    known_np = known.to_numpy(zero_copy_only=False)
    index_np = pc.fill_null(item_index, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    epoch_np = grade_epoch.to_numpy().astype(np.int64)
    rows = np.where(known_np, row_of[index_np * n_epochs + np.where(known_np, epoch_np, 0)], -1)
    found = rows >= 0
    candidate_rows = rows[found]
    same = pc.equal(
        cells.column("solution_hash").take(pa.array(candidate_rows)),
        grades.column("solution_hash").filter(pa.array(found)),
    ).to_numpy(zero_copy_only=False)
    mask = np.zeros(cells.num_rows, dtype=bool)
    mask[candidate_rows[same]] = True
    return mask
