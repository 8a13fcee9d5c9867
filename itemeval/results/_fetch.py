"""Finding the logical rows of a partition, then fetching only those rows, a batch at a time.

Exports must not hold a partition's texts in memory: a grade partition holds every solution of
every model. So reading is split in two:

1. `locate_logical_rows` reads only the key, status, time and hash columns of a partition (the
   store's own parallel reader, which also survives a concurrent compaction), chooses the
   logical row of every key with the store's dedup rule, and keeps *where* each chosen row is:
   its fragment and its position inside the fragment. `GradePartition.locate` does the same for
   the rows of one generate condition inside a grade partition, reading only the fragments
   whose parquet statistics say they hold that condition (a runtime fragment holds one), so
   memory follows one condition pair, not the whole partition.
2. `RowFetcher.take` reads the full columns of the chosen rows, row group by row group, with a
   small LRU of decoded row groups (runtime fragments are shard-sized and read once; compacted
   fragments are read one row group at a time). `ItemFetcher` does the same for items snapshot
   parts.

Fragments are immutable, so a (fragment, position) found in step 1 stays valid; a fragment that
vanished in between (a compaction finished) is a `StoreError` that says to export again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval.datasets import ITEM_SCHEMA
from itemeval.errors import Problem, StoreError
from itemeval.storage import Location
from itemeval.store import (
    GRADES,
    SnapshotInfo,
    Stage,
    StudyStore,
    best_row_indices,
    conform_older,
    fill_columns,
    read_items_part,
)
from itemeval.store.fragments import (
    FRAGMENT_NAME,
    FRAGMENT_ORDINAL,
    FragmentInfo,
    list_fragments,
    open_parquet,
    read_fragments,
    read_partitions,
)

#: Added to located keys: the fragment's ordinal (index into `PartitionRows.fragments`) and the
#: row's position inside that fragment.
FRAG = "_frag"
POS = "_pos"


@dataclass(frozen=True)
class PartitionRows:
    """The logical rows of one partition: their keys (plus requested small columns, e.g.
    `status`) and where each one is stored (`FRAG`, `POS`)."""

    stage: Stage
    condition_id: str
    location: Location
    fragments: list[str]  # fragment file names by ordinal
    keys: pa.Table

    @property
    def num_rows(self) -> int:
        return self.keys.num_rows


def locate_logical_rows(
    store: StudyStore, stage: Stage | str, condition_id: str, extra: Sequence[str] = ()
) -> PartitionRows:
    """The logical rows of a partition (see the module doc), with `extra` small columns."""
    stage = store.stage(stage)
    location = store.partition(stage, condition_id)
    wanted = list(dict.fromkeys([*stage.keys, "status", "written_at", *extra]))
    table = read_partitions({condition_id: location}, stage.schema, wanted, fragment_names=True)[
        condition_id
    ]
    keep = list(dict.fromkeys([*stage.keys, *extra]))
    n = table.num_rows
    if n == 0:
        empty = pa.schema(
            [stage.schema.field(c) for c in keep]
            + [pa.field(FRAG, pa.int32()), pa.field(POS, pa.int64())]
        ).empty_table()
        return PartitionRows(stage, condition_id, location, [], empty)
    ordinal = table.column(FRAGMENT_ORDINAL).combine_chunks().to_numpy(zero_copy_only=False)
    # The reader concatenates fragments in name order, each in file order: a row's position
    # in its fragment is its index minus the index of its fragment's first row.
    if np.any(np.diff(ordinal) < 0):  # pragma: no cover - guards the reader's documented order
        raise RuntimeError("store reader returned fragments out of order")
    values, first, counts = np.unique(ordinal, return_index=True, return_counts=True)
    positions = np.arange(n, dtype=np.int64) - np.repeat(first, counts)
    names_column = table.column(FRAGMENT_NAME)
    fragments = [""] * (int(values.max()) + 1)
    for value, index in zip(values.tolist(), first.tolist(), strict=True):
        fragments[value] = str(names_column[index].as_py())
    located = table.select(keep).append_column(FRAG, pa.array(ordinal, type=pa.int32()))
    located = located.append_column(POS, pa.array(positions, type=pa.int64()))
    best = best_row_indices(
        table.select([*stage.keys, "status", "written_at", FRAGMENT_ORDINAL]), stage.keys
    )
    return PartitionRows(stage, condition_id, location, fragments, located.take(best))


def _vanished(location: Location) -> StoreError:
    return StoreError(
        Problem(
            "a fragment vanished during the export (a compaction finished meanwhile)",
            file=location.url,
            hint="run the export again; compaction keeps every row",
        )
    )


@contextmanager
def _reading_fragment(location: Location) -> Iterator[None]:
    """A fragment that vanished or does not read as parquet: a StoreError naming it."""
    try:
        yield
    except FileNotFoundError:
        raise _vanished(location) from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise StoreError(
            Problem(f"not a readable store fragment ({exc})", file=location.url)
        ) from exc


class GradePartition:
    """One grade partition, located one generate condition at a time.

    The fragment list is taken once (`fragments`, name order = write order); for each fragment
    the parquet footer says which generate conditions it can hold (the min and max statistics
    of `gen_condition_id` per row group). `locate(gen)` reads the key columns of only the
    fragments that can hold `gen`, keeps that condition's rows and deduplicates them by the
    store's rule (the fragment's ordinal in name order is the last tie-break, as in the store).
    """

    def __init__(self, store: StudyStore, condition_id: str, *, threads: int = 8):
        self.condition_id = condition_id
        self.location = store.partition(GRADES, condition_id)
        self.fragments: list[FragmentInfo] = list_fragments(self.location)
        self._ranges = self._gen_ranges(threads)

    def _gen_ranges(self, threads: int) -> list[list[tuple[str, str]] | None]:
        """Per fragment, the (min, max) of `gen_condition_id` of each row group (None: the
        footer has no statistics, so the fragment is read for every condition)."""
        column = GRADES.schema.get_field_index("gen_condition_id")

        def ranges(info: FragmentInfo) -> list[tuple[str, str]] | None:
            location = self.location.join(info.name)
            with _reading_fragment(location):
                if location.is_local:
                    meta = pq.read_metadata(info.path)
                else:
                    with location.open("rb") as handle:
                        meta = pq.read_metadata(handle)
            out = []
            for group in range(meta.num_row_groups):
                stats = meta.row_group(group).column(column).statistics
                if stats is None or not stats.has_min_max:
                    return None
                out.append((str(stats.min), str(stats.max)))
            return out

        if len(self.fragments) <= 1 or self.location.is_local:
            return [ranges(f) for f in self.fragments]
        with ThreadPoolExecutor(max_workers=threads) as pool:
            return list(pool.map(ranges, self.fragments))

    def locate(self, gen_condition_id: str, extra: Sequence[str] = ()) -> PartitionRows:
        """The logical grade rows of `gen_condition_id`, with where each one is stored."""
        ordinals = [
            i
            for i, groups in enumerate(self._ranges)
            if groups is None or any(lo <= gen_condition_id <= hi for lo, hi in groups)
        ]
        keys = list(GRADES.keys)
        columns = list(dict.fromkeys([*keys, "status", "written_at", *extra]))
        chosen = [self.fragments[i] for i in ordinals]
        tables = read_fragments(self.location, chosen, GRADES.schema, columns)
        parts = []
        for ordinal, info, table in zip(ordinals, chosen, tables, strict=True):
            if table is None:
                raise _vanished(self.location.join(info.name))
            n = table.num_rows
            table = table.append_column(
                FRAGMENT_ORDINAL, pa.repeat(pa.scalar(ordinal, pa.int32()), n)
            ).append_column(POS, pa.array(np.arange(n, dtype=np.int64)))
            parts.append(table.filter(pc.equal(table.column("gen_condition_id"), gen_condition_id)))
        names = [f.name for f in self.fragments]
        keep = list(dict.fromkeys([*keys, *extra]))
        if not parts or not sum(p.num_rows for p in parts):
            empty = pa.schema(
                [GRADES.schema.field(c) for c in keep]
                + [pa.field(FRAG, pa.int32()), pa.field(POS, pa.int64())]
            ).empty_table()
            return PartitionRows(GRADES, self.condition_id, self.location, names, empty)
        table = pa.concat_tables(parts)
        best = best_row_indices(
            table.select([*keys, "status", "written_at", FRAGMENT_ORDINAL]), keys
        )
        located = table.select(keep).append_column(FRAG, table.column(FRAGMENT_ORDINAL))
        located = located.append_column(POS, table.column(POS))
        return PartitionRows(GRADES, self.condition_id, self.location, names, located.take(best))


@dataclass
class _FragmentMeta:
    offsets: np.ndarray  # first row of each row group, plus the total at the end
    fills: dict[str, object] = field(default_factory=dict)  # an older schema's added columns


class _TableLru:
    """Tables by key; the least recently used are dropped while all weigh more than `limit`
    (each `weigh(table)`), the newest always kept."""

    def __init__(self, limit: int, weigh: Callable[[pa.Table], int]) -> None:
        self.limit = limit
        self._weigh = weigh
        self._tables: OrderedDict[Hashable, pa.Table] = OrderedDict()
        self._weight = 0

    def get(self, key: Hashable) -> pa.Table | None:
        table = self._tables.get(key)
        if table is not None:
            self._tables.move_to_end(key)
        return table

    def put(self, key: Hashable, table: pa.Table) -> None:
        self._tables[key] = table
        self._weight += self._weigh(table)
        while self._weight > self.limit and len(self._tables) > 1:
            _, dropped = self._tables.popitem(last=False)
            self._weight -= self._weigh(dropped)


class RowFetcher:
    """Full columns of chosen rows of one partition, fetched by (fragment, position)."""

    def __init__(
        self, rows: PartitionRows, columns: Sequence[str], *, cache_rows: int = 200_000
    ) -> None:
        self.rows = rows
        self.columns = list(columns)
        self.schema = rows.stage.schema
        self.cache_rows = cache_rows
        self._meta: dict[int, _FragmentMeta] = {}
        self._cache = _TableLru(cache_rows, weigh=lambda table: table.num_rows)
        self.row_groups_read = 0

    @property
    def empty(self) -> pa.Table:
        return pa.schema([self.schema.field(c) for c in self.columns]).empty_table()

    def take(self, frag: np.ndarray, pos: np.ndarray) -> pa.Table:
        """The rows at (`frag[i]`, `pos[i]`), in that order, with `columns`."""
        n = len(frag)
        if n == 0:
            return self.empty
        order = np.lexsort((pos, frag))
        frag_sorted, pos_sorted = frag[order], pos[order]
        pieces: list[pa.Table] = []
        bounds = np.flatnonzero(np.diff(frag_sorted)) + 1
        for start, stop in zip(
            np.concatenate(([0], bounds)), np.concatenate((bounds, [n])), strict=True
        ):
            ordinal = int(frag_sorted[start])
            wanted = pos_sorted[start:stop]
            meta = self._fragment_meta(ordinal)
            if wanted[-1] >= meta.offsets[-1]:
                raise StoreError(
                    Problem(
                        "a fragment has fewer rows than when it was listed",
                        file=self._location(ordinal).url,
                        hint="fragments are immutable: something rewrote this file",
                    )
                )
            groups = np.searchsorted(meta.offsets, wanted, side="right") - 1
            group_bounds = np.flatnonzero(np.diff(groups)) + 1
            for g_start, g_stop in zip(
                np.concatenate(([0], group_bounds)),
                np.concatenate((group_bounds, [len(wanted)])),
                strict=True,
            ):
                group = int(groups[g_start])
                table = self._row_group(ordinal, group)
                local = wanted[g_start:g_stop] - meta.offsets[group]
                pieces.append(table.take(pa.array(local)))
        gathered = pa.concat_tables(pieces)
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n, dtype=np.int64)
        return gathered.take(pa.array(inverse))

    # -- reading ---------------------------------------------------------------------------
    def _location(self, ordinal: int) -> Location:
        return self.rows.location.join(self.rows.fragments[ordinal])

    def _open(self, ordinal: int) -> pq.ParquetFile:
        location = self._location(ordinal)
        with _reading_fragment(location):
            if location.is_local:
                return open_parquet(location.path)
            return open_parquet(pa.BufferReader(location.read_bytes()))

    def _fragment_meta(self, ordinal: int) -> _FragmentMeta:
        meta = self._meta.get(ordinal)
        if meta is None:
            parquet = self._open(ordinal)
            fills = conform_older(parquet.schema_arrow, self.schema)
            if fills is None:
                raise StoreError(
                    Problem(
                        "fragment does not have the store's schema",
                        file=self._location(ordinal).url,
                    )
                )
            counts = [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)]
            meta = _FragmentMeta(np.concatenate(([0], np.cumsum(counts))).astype(np.int64), fills)
            self._meta[ordinal] = meta
        return meta

    def _row_group(self, ordinal: int, group: int) -> pa.Table:
        key = (ordinal, group)
        table = self._cache.get(key)
        if table is not None:
            return table
        parquet = self._open(ordinal)
        fills = self._fragment_meta(ordinal).fills
        present = [c for c in self.columns if c not in fills]
        table = parquet.read_row_group(group, columns=present, use_threads=False)
        if fills:
            table = fill_columns(table, self.schema, self.columns, fills)
        self.row_groups_read += 1
        self._cache.put(key, table)
        return table


def plain_columns(table: pa.Table) -> pa.Table:
    """`table` with dictionary-encoded columns decoded (joins and group-bys want plain ones)."""
    fields = [
        pa.field(f.name, f.type.value_type, f.nullable) if pa.types.is_dictionary(f.type) else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


@dataclass
class ItemFetcher:
    """Item fields by item id, read from the items snapshot part by part (LRU of parts).

    `index` is the plan's item index (`item_id, dataset, ..., part`)."""

    index: pa.Table
    snapshots: dict[str, SnapshotInfo]
    columns: Sequence[str]
    cache_parts: int = 4
    _parts: _TableLru = field(init=False)

    def __post_init__(self) -> None:
        self._parts = _TableLru(self.cache_parts, weigh=lambda table: 1)
        self.index = plain_columns(self.index.select(["item_id", "dataset", "part"]))

    def take(self, item_ids: pa.Array | pa.ChunkedArray) -> pa.Table:
        """`columns` of each item in `item_ids`, in that order."""
        ids = item_ids.combine_chunks() if isinstance(item_ids, pa.ChunkedArray) else item_ids
        n = len(ids)
        if n == 0:
            return self._empty()
        where = pc.index_in(ids, value_set=self.index.column("item_id"))
        if where.null_count:
            missing = ids.filter(pc.is_null(where))[0].as_py()
            raise StoreError(
                Problem("a stored row names an item the study does not have", item=missing)
            )
        located = self.index.take(where)
        encoded = pc.dictionary_encode(located.column("dataset").combine_chunks())
        names = encoded.dictionary.to_pylist()
        codes = encoded.indices.to_numpy().astype(np.int64)
        parts = located.column("part").to_numpy().astype(np.int64)
        keys = codes * (1 << 32) + parts
        order = np.argsort(keys, kind="stable")
        pieces: list[pa.Table] = []
        sorted_keys = keys[order]
        bounds = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
        for start, stop in zip(
            np.concatenate(([0], bounds)), np.concatenate((bounds, [n])), strict=True
        ):
            first = int(order[start])
            dataset = str(names[codes[first]])
            part_table = self._part(dataset, int(parts[first]))
            chosen = ids.take(pa.array(order[start:stop]))
            rows = pc.index_in(chosen, value_set=part_table.column("item_id"))
            if rows.null_count:
                missing = chosen.filter(pc.is_null(rows))[0].as_py()
                raise StoreError(
                    Problem(
                        "item not found in its items snapshot part",
                        item=missing,
                        file=self.snapshots[dataset].location.url,
                    )
                )
            pieces.append(part_table.take(rows))
        gathered = pa.concat_tables(pieces)
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n, dtype=np.int64)
        return gathered.take(pa.array(inverse)).select(list(self.columns))

    def _empty(self) -> pa.Table:
        return pa.schema([ITEM_SCHEMA.field(c) for c in self.columns]).empty_table()

    def _part(self, dataset: str, part: int) -> pa.Table:
        key = (dataset, part)
        table = self._parts.get(key)
        if table is not None:
            return table
        info = self.snapshots.get(dataset)
        if info is None:
            raise StoreError(
                Problem(
                    f"dataset {dataset!r} has no items snapshot in the store",
                    hint="the store has rows for it, so it was run: check `--store`",
                )
            )
        table = read_items_part(info, part, list(dict.fromkeys(["item_id", *self.columns])))
        self._parts.put(key, table)
        return table
