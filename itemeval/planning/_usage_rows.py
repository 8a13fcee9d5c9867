"""The usage rows calibration learns from: one condition's stored rows (its best row per
cell) and the response cache's rows of cells the store does not hold, read one condition at a
time and reduced to a few int32 arrays per row (`UsageRows`). `planning/_calibration.py` fits them.

Only the usage columns are read, never a text. A million stored rows read whole cost ~150 MB
while they are reduced; after a large condition the freed pages go back to the system
(`let_go`), so each condition's read reuses them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval._util.heap import release_unused_memory
from itemeval.errors import StoreError
from itemeval.storage import Location, resolve
from itemeval.store import (
    GRADES,
    RESPONSE_SCHEMA,
    RESPONSES,
    ItemLookup,
    StudyStore,
    keys_present,
    partition_dir,
    read_partition_cells,
)
from itemeval.store.fragments import read_partitions

USAGE = ["input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens"]
CELL = ["item_id", "epoch"]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a calibration came from: rows of this study's store and of the response cache."""

    store_rows: int = 0
    cache_rows: int = 0

    @property
    def rows(self) -> int:
        return self.store_rows + self.cache_rows

    def describe(self) -> str:
        if not self.rows:
            return "prior"
        parts = []
        if self.store_rows:
            parts.append(f"store {self.store_rows:,}")
        if self.cache_rows:
            parts.append(f"cache {self.cache_rows:,}")
        return " + ".join(parts) + (" row" if self.rows == 1 else " rows")


#: Rows read for one condition from which its read's freed pages are handed back before the
#: next condition is read (below it they are few, and the collection is not worth its time).
TRIM_AFTER_ROWS = 100_000


def let_go(rows: UsageRows) -> None:
    """After a condition's rows are read and reduced: a large read's freed pages go back to
    the system, so that the next condition's read reuses them instead of raising the peak."""
    if rows.store_rows + rows.cache_rows >= TRIM_AFTER_ROWS:
        release_unused_memory()


@dataclass
class UsageRows:
    """One condition's usage rows: store rows first, then cache-only rows."""

    pos: np.ndarray  # position in the selected items, -1 for an item outside this study
    input: np.ndarray
    output: np.ndarray
    cached: np.ndarray
    reasoning: np.ndarray
    prior_input: np.ndarray  # per row; NaN where unknown (the judged solution is not stored)
    store_rows: int
    cache_rows: int
    epoch: np.ndarray  # per row
    store_answered: int  # stored rows that the response cache answered

    @classmethod
    def of(
        cls,
        stored: pa.Table,
        extra: pa.Table,
        item_ids: pa.Array | ItemLookup,
        *,
        per_item: np.ndarray | None = None,
        per_stored_row: np.ndarray | None = None,
    ) -> UsageRows:
        """`per_item`: the prior input of each selected item; or `per_stored_row`: of each
        stored row (judges: cache rows have no judged solution to count, so NaN)."""
        lookup = item_ids if isinstance(item_ids, ItemLookup) else ItemLookup(item_ids)
        stored_pos = _positions(stored, lookup) if stored.num_rows else np.zeros(0, np.int64)
        stored = stored.select([*CELL, *USAGE, "cached"])
        # The store's columns are non-nullable and an empty cache read's are not: the same
        # columns either way, so let arrow unify their nullability.
        table = pa.concat_tables(
            [stored.select([*CELL, *USAGE]), extra.select([*CELL, *USAGE])],
            promote_options="permissive",
        )
        pos = np.concatenate([stored_pos, lookup.positions(extra.column("item_id"))])
        if len(lookup) < 2**31:
            pos = pos.astype(np.int32)
        known = pos >= 0
        if per_stored_row is not None:
            per_row = np.concatenate([per_stored_row, np.full(extra.num_rows, np.nan)])
        else:
            assert per_item is not None
            per_row = np.full(len(pos), np.nan)
            per_row[known] = per_item[pos[known]]
        return cls(
            pos=pos,
            input=_ints(table, "input_tokens"),
            output=_ints(table, "output_tokens"),
            cached=_ints(table, "cached_input_tokens"),
            reasoning=_ints(table, "reasoning_tokens"),
            prior_input=per_row,
            store_rows=stored.num_rows,
            cache_rows=extra.num_rows,
            epoch=_ints(table, "epoch"),
            store_answered=int(pc.sum(stored.column("cached")).as_py() or 0),
        )

    def answered(self, items: int, epochs: int) -> np.ndarray | None:
        """Per item: cache-only rows of this study's cells (answers the cache holds); None
        when there are none (no per-item array is made: a million items would cost 8 MB)."""
        extra = slice(self.store_rows, None)
        pos, epoch = self.pos[extra], self.epoch[extra]
        keep = (pos >= 0) & (epoch < epochs)
        if not keep.any():
            return None
        return np.bincount(pos[keep], minlength=items).astype(np.int32)

    @property
    def source(self) -> Source:
        return Source(self.store_rows, self.cache_rows)

    def input_sums(self) -> tuple[float, float, int]:
        """Reported and prior input over the rows where both are known, and their number."""
        usable = ~np.isnan(self.prior_input)
        return (
            float(self.input[usable].sum()),
            float(self.prior_input[usable].sum()),
            int(usable.sum()),
        )


# -- reading -----------------------------------------------------------------------------------


#: A column `store_rows` adds when it knows each row's item position without an id look-up.
ITEM_POSITION = "_item"


def store_rows(
    store: StudyStore,
    stage: str,
    condition_id: str,
    columns: Sequence[str],
    items: ItemLookup | None = None,
) -> pa.Table:
    """The usage of every stored cell's row of one condition (its best row: ok before error),
    from the partition's cells (its summary and the fragments it does not cover). Error rows
    count when the provider reported usage: an empty or filtered answer was billed, and its
    retry will be too."""
    stage_of = store.stage(stage)
    read = read_partition_cells(
        stage_of, store.partition(stage_of, condition_id), columns, items=items
    )
    table = read.cells
    if read.item_positions is not None:
        table = table.append_column(ITEM_POSITION, pa.array(read.item_positions))
    if table.num_rows == 0:  # nothing stored yet
        if stage_of.name == GRADES.name:
            return empty_grade_rows()
        return empty_rows().append_column("cached", pa.array([], pa.bool_()))
    return with_usage(table)


def covers_selection(stored: pa.Table, lookup: ItemLookup, epochs: int, cells: int) -> bool:
    """Whether `stored` (usage rows of one condition) holds a row for each of its `cells` in
    the selection: then the response cache has nothing the calibration would use (its rows of
    cells the store does not hold are other studies' items or epochs, which count only while
    this study's own rows are too few), and is not read."""
    if stored.num_rows < cells:
        return False
    pos = _positions(stored, lookup)
    epoch = stored.column("epoch").to_numpy()
    # One row per key (cell, or grade and cell): counting those inside counts the cells held.
    return int(((pos >= 0) & (epoch < epochs)).sum()) >= cells


class CacheReader:
    """The response cache's usage rows, one group at a time. A cache that cannot be read is
    said once (in `warnings`) and then left alone: the calibration rests on the store."""

    def __init__(
        self, url: str | None, options: dict[str, Any] | None, warnings: list[str]
    ) -> None:
        self._url = url
        self._options = options
        self._warnings = warnings
        self._root: Location | None = None

    def rows(self, group: str) -> pa.Table | None:
        if self._url is None:
            return None
        try:
            if self._root is None:
                self._root = resolve(self._url, self._options)
            partition = self._root.join(RESPONSES.name, partition_dir(RESPONSES, group))
            table = read_partitions({group: partition}, RESPONSE_SCHEMA, [*CELL, *USAGE])[group]
        except (StoreError, OSError, ValueError) as exc:
            self._warnings.append(
                f"the estimate's calibration could not read the response cache at {self._url} "
                f"({exc}); it rests on the store alone"
            )
            self._url = None
            return None
        return with_usage(table.select([*CELL, *USAGE]))


def _positions(stored: pa.Table, lookup: ItemLookup) -> np.ndarray:
    """Each stored row's item position: as read (`ITEM_POSITION`), else looked up."""
    if ITEM_POSITION in stored.column_names:
        return stored.column(ITEM_POSITION).to_numpy().astype(np.int64)
    return lookup.positions(stored.column("item_id"))


def with_usage(table: pa.Table) -> pa.Table:
    """Rows with usage: a call always has input, so 0 means the host reported none (some
    OpenAI-compatible servers omit usage); such rows would teach the estimate zeros."""
    return table.filter(pc.greater(table.column("input_tokens"), 0))


def cache_only(cached: pa.Table | None, stored: pa.Table) -> pa.Table:
    """Cache rows of cells the store does not hold, one per cell."""
    if cached is None or cached.num_rows == 0:
        return empty_rows()
    if stored.num_rows:
        cached = cached.filter(pa.array(~keys_present(cached, stored, CELL)))
        if cached.num_rows == 0:
            return empty_rows()
    numbered = cached.append_column("_row", pa.array(np.arange(cached.num_rows)))
    first = numbered.group_by(CELL, use_threads=False).aggregate([("_row", "min")])
    return cached.take(first.column("_row_min")).select([*CELL, *USAGE])


def visible_of(condition_id: str, solutions: pa.Table) -> pa.Table:
    """Visible output tokens of one generate condition's stored solutions, keyed by condition
    and cell."""
    visible = pc.subtract(solutions.column("output_tokens"), solutions.column("reasoning_tokens"))
    return pa.table(
        {
            "gen_condition_id": pa.repeat(pa.scalar(condition_id), solutions.num_rows),
            "item_id": solutions.column("item_id"),
            "epoch": solutions.column("epoch"),
            "visible": visible,
        },
        schema=_VISIBLE,
    )


_VISIBLE = pa.schema(
    [
        pa.field("gen_condition_id", pa.string()),
        pa.field("item_id", pa.string()),
        pa.field("epoch", pa.int32()),
        pa.field("visible", pa.int64()),
    ]
)


def empty_visible() -> pa.Table:
    return _VISIBLE.empty_table()


def judge_prior_input(
    grades: pa.Table, visible: pa.Table, items: ItemLookup, base: np.ndarray
) -> np.ndarray:
    """Per stored grade row: the rubric's tokens for its item plus the judged solution's visible
    tokens (NaN where the item or the solution is unknown)."""
    if grades.num_rows == 0:
        return np.zeros(0)
    numbered = grades.select(["gen_condition_id", *CELL]).append_column(
        "_row", pa.array(np.arange(grades.num_rows))
    )
    joined = numbered.join(
        visible, keys=["gen_condition_id", *CELL], join_type="left outer", use_threads=False
    ).sort_by("_row")
    pos = items.positions(joined.column("item_id"))
    seen = joined.column("visible").to_numpy(zero_copy_only=False).astype(np.float64)
    out = np.full(grades.num_rows, np.nan)
    known = (pos >= 0) & ~np.isnan(seen)
    out[known] = base[pos[known]] + seen[known]
    return out


def _ints(table: pa.Table, column: str) -> np.ndarray:
    """A column of token counts or epochs as int32: 4 bytes a row (a condition can have a
    million rows); sums are taken in int64 by numpy. A count past 2**31 - 1 is clipped."""
    values = table.column(column).to_numpy()
    return np.minimum(values, np.iinfo(np.int32).max).astype(np.int32)


def empty_rows() -> pa.Table:
    return pa.schema([RESPONSE_SCHEMA.field(c) for c in [*CELL, *USAGE]]).empty_table()


def empty_grade_rows() -> pa.Table:
    fields = [pa.field("gen_condition_id", pa.string())]
    fields += [RESPONSE_SCHEMA.field(c) for c in [*CELL, *USAGE]]
    return pa.schema([*fields, pa.field("cached", pa.bool_())]).empty_table()
