"""What a worker reads for its shards: the items of a shard's part and the solution texts its
judge cells grade, each from a small cache, so the shards in flight in one worker share reads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval.datasets import WorkItem, table_to_items
from itemeval.errors import StoreError
from itemeval.runtime._shards import Shard
from itemeval.store import (
    SOLUTION_SCHEMA,
    SOLUTIONS,
    SnapshotInfo,
    StudyStore,
    read_items_part,
    read_snapshot_info,
)
from itemeval.store.fragments import FragmentInfo, read_fragments

#: Items parts a worker keeps as `WorkItem`s (10,000 items each, about 15 MB as objects): the
#: shards in flight in one worker come from one or two parts at a time.
ITEM_PARTS_CACHED = 4
FRAGMENTS_CACHED = 4
#: A solutions fragment with more rows (a compacted one) is not read whole: only the row groups
#: that hold the shard's cells, found from its keys a row group at a time, so a worker's memory
#: does not grow with a partition's size.
WHOLE_FRAGMENT_ROWS = 50_000
_TEXT_COLUMNS = ["item_id", "epoch", "text", "text_hash", "status"]
_KEY_COLUMNS = ["item_id", "epoch"]


class ShardReads:
    """One worker's reads of items parts and solution fragments (the last ones read are kept)."""

    def __init__(self, store: StudyStore) -> None:
        self.store = store
        self._snapshots: dict[tuple[str, str], SnapshotInfo] = {}
        self._parts: OrderedDict[tuple[str, str, int], dict[str, WorkItem]] = OrderedDict()
        # Shards read their part on threads. The first reader of a part converts it and the
        # other readers of that part wait (a run's first shards each converted the same part,
        # issue 14); readers of other parts do not. `_parts_lock` guards the two dicts only.
        self._parts_lock = threading.Lock()
        self._part_locks: dict[tuple[str, str, int], threading.Lock] = {}
        self._fragments: OrderedDict[tuple[str, str], pa.Table] = OrderedDict()

    def items(self, shard: Shard) -> dict[str, WorkItem]:
        """The items of the shard's part, by id (the last parts read are kept)."""
        key = (shard.dataset, shard.fingerprint, shard.part)
        with self._parts_lock:
            items = self._kept_part(key)
            if items is not None:
                return items
            part_lock = self._part_locks.setdefault(key, threading.Lock())
        with part_lock:
            with self._parts_lock:
                items = self._kept_part(key)
            if items is not None:  # converted while this reader waited
                return items
            items = self._convert_part(shard)
            with self._parts_lock:
                self._parts[key] = items
                if len(self._parts) > ITEM_PARTS_CACHED:
                    evicted, _ = self._parts.popitem(last=False)
                    self._part_locks.pop(evicted, None)
            return items

    def _kept_part(self, key: tuple[str, str, int]) -> dict[str, WorkItem] | None:
        items = self._parts.get(key)
        if items is not None:
            self._parts.move_to_end(key)
        return items

    def _convert_part(self, shard: Shard) -> dict[str, WorkItem]:
        snap_key = (shard.dataset, shard.fingerprint)
        info = self._snapshots.get(snap_key)
        if info is None:
            info = read_snapshot_info(self.store, shard.dataset, shard.fingerprint)
            if info is None:
                raise StoreError(
                    f"the items snapshot of {shard.dataset} ({shard.fingerprint[:16]}) is "
                    "missing from the store; run the command again to rewrite it"
                )
            self._snapshots[snap_key] = info
        return {item.id: item for item in table_to_items(read_items_part(info, shard.part))}

    def solution_texts(self, shard: Shard) -> dict[tuple[str, int, str], str]:
        """`(item_id, epoch, text_hash) -> text` for the shard's cells, read from the fragments
        the shard names (or the whole partition when one was compacted away since planning)."""
        gen = str(shard.gen_condition_id)
        wanted = shard.cells.select(["item_id", "epoch"])
        tables = []
        for name in sorted(set(shard.cells.column("fragment").to_pylist())):
            table = self._fragment(gen, name, wanted)
            if table is None:  # compacted since planning: read the partition once
                partition = self.store.read_by_condition(SOLUTIONS, [gen], _TEXT_COLUMNS)
                tables = [partition[gen]]
                break
            tables.append(table)
        if not tables:
            return {}
        rows = pa.concat_tables(tables).join(wanted, ["item_id", "epoch"], join_type="inner")
        rows = rows.filter(pc.equal(rows.column("status"), "ok"))
        return {
            (i, e, h): t
            for i, e, h, t in zip(
                rows.column("item_id").to_pylist(),
                rows.column("epoch").to_pylist(),
                rows.column("text_hash").to_pylist(),
                rows.column("text").to_pylist(),
                strict=True,
            )
        }

    def _fragment(self, gen: str, name: str, wanted: pa.Table) -> pa.Table | None:
        """The fragment's text columns: a small fragment whole (kept for the next shards), a
        large one only the rows of `wanted` cells (`WHOLE_FRAGMENT_ROWS`); None if it is gone."""
        key = (gen, name)
        if key in self._fragments:
            self._fragments.move_to_end(key)
            return self._fragments[key]
        partition = self.store.partition(SOLUTIONS, gen)
        # Opened by name, not found in a listing: listing a partition of thousands of fragments
        # for every fragment a shard names made grading quadratic in the stage's size.
        location = partition.join(name)
        try:
            with location.open("rb") as handle:
                parquet = pq.ParquetFile(handle)
                if parquet.metadata.num_rows > WHOLE_FRAGMENT_ROWS and _current(parquet):
                    return _rows_of(parquet, wanted)
        except FileNotFoundError:
            return None
        info = FragmentInfo(name, location.path, None)
        (table,) = read_fragments(partition, [info], SOLUTION_SCHEMA, _TEXT_COLUMNS)
        if table is None:
            return None
        self._fragments[key] = table
        if len(self._fragments) > FRAGMENTS_CACHED:
            self._fragments.popitem(last=False)
        return table


def _current(parquet: pq.ParquetFile) -> bool:
    """Whether the fragment has the text columns as the current schema has them."""
    stored = parquet.schema_arrow
    return all(
        name in stored.names and stored.field(name).type == SOLUTION_SCHEMA.field(name).type
        for name in _TEXT_COLUMNS
    )


def _rows_of(parquet: pq.ParquetFile, wanted: pa.Table) -> pa.Table:
    """The text columns of the rows of `parquet` whose key is one of `wanted`'s, read a row
    group at a time: its keys first, its texts only where one of them is wanted."""
    cells = wanted.select(_KEY_COLUMNS)
    cells = cells.set_column(1, "epoch", cells.column("epoch").cast(pa.int32()))
    parts = []
    for group in range(parquet.num_row_groups):
        keys = parquet.read_row_group(group, columns=_KEY_COLUMNS, use_threads=False)
        keys = keys.append_column("_row", pa.array(range(keys.num_rows), pa.int64()))
        hits = keys.join(cells, _KEY_COLUMNS, join_type="left semi", use_threads=False)
        if hits.num_rows:
            rows = parquet.read_row_group(group, columns=_TEXT_COLUMNS, use_threads=False)
            parts.append(rows.take(hits.column("_row")))
    if not parts:
        return SOLUTION_SCHEMA.empty_table().select(_TEXT_COLUMNS)
    return pa.concat_tables(parts)
