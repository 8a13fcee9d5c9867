"""The partition's summary written by a compaction a generate condition at a time, from the
units it merged and the cells of the summary it replaces (`_compact.py`, step 3).

It reads as `_summary.encode_summary` writes it (the same cells, sorted by key, in row groups of
one generate condition at most; the same metadata), without holding every condition's cells:
each condition's cells are merged, sorted and encoded on their own, then the pieces are copied
into one file under the metadata, which is known only once every condition has been counted.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval.storage import Location
from itemeval.store._cells import (
    best_cells,
    cell_groups,
    cells_schema,
    group_columns,
    groups_to_json,
    spent_to_json,
)
from itemeval.store._compact_merge import (
    DICTIONARY_COLUMNS,
    MergedUnit,
    Vanished,
    check_stop,
    encoded,
)
from itemeval.store._dedup import keys_present
from itemeval.store._layout import GRADES, Stage
from itemeval.store._summary_file import (
    SUMMARY_FILE,
    SUMMARY_KEY,
    SUMMARY_VERSION,
    PartitionSummary,
)
from itemeval.store.fragments import open_parquet

#: The summary's row groups (as `_summary.encode_summary` writes them).
SUMMARY_GROUP_ROWS = 1 << 17
#: A condition's cells are merged and sorted in ranges of item ids of about this many cells.
RANGE_CELLS = 1 << 18


def _decoded(stage: Stage, cells: pa.Table) -> pa.Table:
    """`cells` in the summary's schema (strings as strings)."""
    return cells.select(cells_schema(stage).names).cast(cells_schema(stage))


# -- the summary, a generate condition at a time -----------------------------------------------


def write_summary_streamed(
    stage: Stage,
    partition: Location,
    old: PartitionSummary | None,
    merged: frozenset[str],
    units: Sequence[MergedUnit],
    fragments: dict[str, int],
    spent: pa.Table,
    stop: Callable[[], bool] | None = None,
) -> bytes:
    """The partition's new summary (`_summary.py`'s format): the cells of `old` (read from its
    file, a condition at a time, the rows of `merged` fragments left out) merged with the
    units' new cells, sorted by key; `fragments` and `spent` as given. `Vanished` when the
    summary file is no longer `old`'s."""
    grades = stage.name == GRADES.name
    if grades:
        gens = {g for u in units for g in u.gens}
        if old is not None and old.groups is not None:
            gens |= set(old.groups.column("gen_condition_id").to_pylist())
        conditions: list[str | None] = sorted(gens)
    else:
        conditions = [None]
    pieces: list[bytes] = []
    layout: dict[str, dict[str, object]] = {}
    groups = _GroupSums(stage)
    keys = [(k, "ascending") for k in stage.keys if k != "gen_condition_id"]
    for gen in conditions:
        check_stop(stop)
        mine = [u for u in units if gen is None or gen in u.gens]
        sink = io.BytesIO()
        writer = pq.ParquetWriter(sink, cells_schema(stage), compression="zstd")
        # A condition's cells a range of item ids at a time (one range unless it is large).
        for low, high in _ranges(stage, partition, old, gen, mine):
            check_stop(stop)
            kept = _old_cells(stage, partition, old, gen, merged, low, high)
            new = [_unit_cells(u, gen, low, high) for u in mine]
            cells = _merged(stage, kept, new)
            del kept, new
            if not cells.num_rows:
                continue
            order = pc.sort_indices(cells.select([k for k, _ in keys]), sort_keys=keys)
            for start in range(0, cells.num_rows, SUMMARY_GROUP_ROWS):
                chunk = _decoded(stage, cells.take(order.slice(start, SUMMARY_GROUP_ROWS)))
                writer.write_table(chunk, row_group_size=SUMMARY_GROUP_ROWS)
                groups.add(chunk)
            del cells, order
            check_stop(stop)
        writer.close()
        pieces.append(sink.getvalue())
        shape = _layout_of_piece(pieces[-1])
        if shape is not None:
            layout["" if gen is None else gen] = shape
    meta = {
        "version": SUMMARY_VERSION,
        "stage": stage.name,
        "fragments": fragments,
        "spent": spent_to_json(spent),
        "groups": groups_to_json(groups.table()),
        "layout": layout,
    }
    schema = cells_schema(stage).with_metadata({SUMMARY_KEY: json.dumps(meta).encode()})
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, schema, compression="zstd", write_statistics=True) as writer:
        for piece in pieces:
            parquet = open_parquet(pa.BufferReader(piece))
            for group in range(parquet.num_row_groups):
                table = parquet.read_row_group(group).replace_schema_metadata(None)
                writer.write_table(table, row_group_size=SUMMARY_GROUP_ROWS)
    return sink.getvalue()


def _layout_of_piece(piece: bytes) -> dict[str, object] | None:
    """`_summary.layout_of` of one condition's sorted cells (`piece`, parquet), read a row
    group at a time: rows, distinct items, epochs, then the digest of the distinct ids
    (`ids_digest` hashes their count, then every length, then every byte: three passes)."""
    parquet = open_parquet(pa.BufferReader(piece))
    if not parquet.metadata.num_rows:
        return None
    rows = items = 0
    lengths: set[int] = set()  # of the items' runs of rows
    epochs_in_order = True  # each item's epochs are 0, 1, ... in its run
    carried = 0  # rows of the run the last row group ended in
    for ids, epoch, starts in _runs(parquet):
        n = len(ids)
        index = np.arange(n)
        first = np.full(n, -1)
        first[starts] = starts
        first = np.maximum.accumulate(first)
        place = np.where(first >= 0, index - first, index + carried)
        epochs_in_order = epochs_in_order and bool(np.array_equal(epoch, place))
        ended = starts[starts > 0] - 1  # the last rows of runs that end here
        lengths.update((place[ended] + 1).tolist())
        if len(starts) and starts[0] == 0 and rows:
            lengths.add(carried)
        carried = int(place[-1]) + 1
        rows += n
        items += len(starts)
    lengths.add(carried)
    epochs = lengths.pop() if epochs_in_order and len(lengths) == 1 else None
    digest = hashlib.sha256(str(items).encode())
    for ids, _, starts in _runs(parquet):
        digest.update(pc.binary_length(ids.take(pa.array(starts))).to_numpy().astype("<i8"))
    for ids, _, starts in _runs(parquet):
        distinct = ids.take(pa.array(starts))
        offsets = np.frombuffer(distinct.buffers()[1], dtype=np.int64)
        offsets = offsets[distinct.offset : distinct.offset + len(distinct) + 1]
        data = distinct.buffers()[2]
        if data is not None and len(offsets):
            digest.update(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
    return {"rows": rows, "items": items, "epochs": epochs, "digest": digest.hexdigest()}


def _runs(parquet: pq.ParquetFile) -> Iterator[tuple[pa.Array, np.ndarray, np.ndarray]]:
    """Per row group of sorted cells: the item ids (large strings), the epochs, and the rows
    that start an item's run (a row group's first row only when its id differs from the last
    row group's last)."""
    last: str | None = None
    for group in range(parquet.num_row_groups):
        table = parquet.read_row_group(group, columns=["item_id", "epoch"])
        ids = table.column("item_id").combine_chunks().cast(pa.large_string()).fill_null("")
        n = len(ids)
        if not n:
            continue
        change = np.empty(n, dtype=bool)
        change[0] = last is None or ids[0].as_py() != last
        if n > 1:
            after = pc.not_equal(ids.slice(1), ids.slice(0, n - 1))
            change[1:] = after.to_numpy(zero_copy_only=False)
        last = ids[n - 1].as_py()
        yield ids, table.column("epoch").to_numpy(), np.flatnonzero(change)


Range = tuple[str | None, str | None]  # item ids from (inclusive) .. to (exclusive); None: open


def _ranges(
    stage: Stage,
    partition: Location,
    old: PartitionSummary | None,
    gen: str | None,
    units: Sequence[MergedUnit],
) -> list[Range]:
    """Ranges of item ids that split a condition's cells into parts of about `RANGE_CELLS`
    (from a sample of the ids; any split gives the same summary)."""
    ids = [
        t.column("item_id")
        for u in units
        for t in [open_parquet(pa.BufferReader(u.cells)).read(columns=["item_id"])]
    ]
    kept = _old_cells(stage, partition, old, gen, frozenset(), None, None, ["item_id"])
    if kept is not None:
        ids.append(kept.column("item_id"))
    total = sum(len(c) for c in ids)
    if total <= RANGE_CELLS:
        return [(None, None)]
    step = max(1, total // (64 * -(-total // RANGE_CELLS)))
    sample = pa.chunked_array([c.combine_chunks()[::step] for c in ids if len(c)])
    del ids, kept
    sample = pc.take(sample, pc.sort_indices(sample))
    parts = -(-total // RANGE_CELLS)
    cuts = sorted({sample[len(sample) * i // parts].as_py() for i in range(1, parts)})
    bounds: list[str | None] = [None, *cuts, None]
    return list(itertools.pairwise(bounds))


def _in_range(ids: pa.ChunkedArray | pa.Array, low: str | None, high: str | None) -> pa.Array:
    inside = pa.array(np.ones(len(ids), dtype=bool)) if low is None else pc.greater_equal(ids, low)
    if high is not None:
        inside = pc.and_(inside, pc.less(ids, high))
    return inside


def _unit_cells(unit: MergedUnit, gen: str | None, low: str | None, high: str | None) -> pa.Table:
    """A unit's cells (of condition `gen`, item ids in `[low, high)`), read a batch at a time."""
    parquet = open_parquet(pa.BufferReader(unit.cells))
    several = gen is not None and len(unit.gens) > 1  # a unit of conditions merged together
    if low is None and high is None and not several:
        return parquet.read()
    parts = []
    for batch in parquet.iter_batches(batch_size=SUMMARY_GROUP_ROWS, use_threads=False):
        table = pa.Table.from_batches([batch])
        keep = _in_range(table.column("item_id"), low, high)
        if several:
            same = pc.equal(pc.cast(table.column("gen_condition_id"), pa.string()), gen)
            keep = pc.and_(keep, same)
        parts.append(table.filter(keep))
    return pa.concat_tables(parts) if parts else parquet.schema_arrow.empty_table()


def _old_cells(
    stage: Stage,
    partition: Location,
    old: PartitionSummary | None,
    gen: str | None,
    merged: frozenset[str],
    low: str | None,
    high: str | None,
    columns: list[str] | None = None,
) -> pa.Table | None:
    """The cells of `old`'s file (of condition `gen`, item ids in `[low, high)`), without
    those of `merged` fragments; `columns` only."""
    if old is None or not set(old.fragments) - merged:
        return None
    location = partition.join(SUMMARY_FILE)
    present = [n for n in DICTIONARY_COLUMNS if n in cells_schema(stage).names]
    try:
        if location.is_local:
            parquet = pq.ParquetFile(location.path, read_dictionary=present)
        else:
            parquet = pq.ParquetFile(
                pa.BufferReader(location.read_bytes()), read_dictionary=present
            )
    except FileNotFoundError:
        raise Vanished(SUMMARY_FILE) from None
    meta = json.loads((parquet.schema_arrow.metadata or {}).get(SUMMARY_KEY, b"{}"))
    if meta.get("fragments") != old.fragments:
        raise Vanished(SUMMARY_FILE)  # another compaction wrote it since
    schema = parquet.schema_arrow
    groups = []
    for g in range(parquet.num_row_groups):
        group = parquet.metadata.row_group(g)
        if gen is not None and not _may_hold(
            group.column(schema.get_field_index("gen_condition_id")), gen, gen
        ):
            continue
        if _may_hold(group.column(schema.get_field_index("item_id")), low, high, open_end=True):
            groups.append(g)
    needed = ["item_id", "fragment", *(["gen_condition_id"] if gen is not None else [])]
    read = None if columns is None else list(dict.fromkeys([*columns, *needed]))
    table = parquet.read_row_groups(groups, columns=read, use_threads=False)
    table = table.replace_schema_metadata(None)
    keep = _in_range(table.column("item_id"), low, high)
    if merged:
        names = pa.array(sorted(merged), pa.string())
        keep = pc.and_(
            keep, pc.invert(pc.is_in(pc.cast(table.column("fragment"), pa.string()), names))
        )
    if gen is not None:
        keep = pc.and_(keep, pc.equal(pc.cast(table.column("gen_condition_id"), pa.string()), gen))
    table = table.filter(keep)
    return encoded(table) if columns is None else table.select(columns)


def _may_hold(
    column: pq.ColumnChunkMetaData, low: str | None, high: str | None, *, open_end: bool = False
) -> bool:
    """Whether a row group's statistics allow a value in `[low, high]` (`[low, high)` with
    `open_end`); None bounds are open."""
    stats = column.statistics
    if stats is None or not stats.has_min_max:
        return True
    least, most = str(stats.min), str(stats.max)
    below = low is not None and most < low
    above = high is not None and (least >= high if open_end else least > high)
    return not (below or above)


def _merged(stage: Stage, kept: pa.Table | None, new: list[pa.Table]) -> pa.Table:
    """One cell per key: `kept` (one per key) and the units' new cells by the store's rule.
    Only keys present on both sides (or in several units) are compared, as strings."""
    schema = encoded(cells_schema(stage).empty_table()).schema
    parts = [t for t in ([kept] if kept is not None else []) + new if t.num_rows]
    if not parts:
        return schema.empty_table()
    parts = [p.select(schema.names) for p in parts]
    if len(parts) == 1:
        return parts[0]
    base, others = parts[0], pa.concat_tables(parts[1:], promote_options="permissive")
    keys = list(stage.keys)
    touched = keys_present(base, others, keys)
    if len(parts) > 2 or touched.any():
        # Keys met twice: decided by the rule, as strings (few, but counted exactly).
        contested = pa.concat_tables(
            [_decoded(stage, base.filter(pa.array(touched))), _decoded(stage, others)]
        )
        decided = encoded(best_cells(stage, contested)).select(schema.names)
        untouched = base.filter(pa.array(~touched))
        return pa.concat_tables([untouched, decided], promote_options="permissive")
    return pa.concat_tables([base, others], promote_options="permissive")


class _GroupSums:
    """`cell_groups` of every cell, fed the cells a chunk at a time in their order: counts and
    integer sums add up; a float sum goes on from where the last chunk left it, value by value,
    as arrow sums a group's values (in order, one after the other), so the figures are the
    same, to the last bit, as `cell_groups` of all the cells at once."""

    def __init__(self, stage: Stage):
        self.stage = stage
        self.keys = group_columns(stage)
        self.schema = cell_groups(stage, cells_schema(stage).empty_table()).schema
        self.sums = [f.name for f in self.schema if f.name not in self.keys and f.name != "cells"]
        self.floats = {n for n in self.sums if pa.types.is_floating(self.schema.field(n).type)}
        self.groups: dict[tuple[object, ...], dict[str, object]] = {}

    def add(self, cells: pa.Table) -> None:
        aggregates: list[tuple[str | list[str], str]] = [([], "count_all")]
        aggregates += [(n, "list" if n in self.floats else "sum") for n in self.sums]
        grouped = cells.group_by(self.keys, use_threads=False).aggregate(aggregates)
        columns = {n: grouped.column(n).to_pylist() for n in self.keys}
        for row in range(grouped.num_rows):
            key = tuple(columns[n][row] for n in self.keys)
            group = self.groups.setdefault(key, {"cells": 0})
            group["cells"] = int(group["cells"]) + grouped.column("count_all")[row].as_py()
            for name in self.sums:
                if name in self.floats:
                    values = grouped.column(f"{name}_list")[row].values.drop_null().to_numpy()
                    if len(values):
                        start = group.get(name)
                        run = values if start is None else np.r_[float(start), values]
                        group[name] = float(np.cumsum(run)[-1])
                else:
                    value = grouped.column(f"{name}_sum")[row].as_py()
                    if value is not None:
                        group[name] = int(group.get(name) or 0) + value

    def table(self) -> pa.Table:
        rows = [
            {**dict(zip(self.keys, key, strict=True)), **group}
            for key, group in self.groups.items()
        ]
        table = pa.Table.from_pylist(rows, schema=self.schema)
        return table.take(pc.sort_indices(table, [(k, "ascending") for k in self.keys]))
