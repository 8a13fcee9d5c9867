"""Compaction in bounded memory: one unit's fragments merged into one new fragment
(`_compact.py` decides what is merged and keeps the order of operations; `_compact_summary.py`
writes the summary).

A unit is merged in two passes over its fragments, never holding its rows whole:

1. the keys of every row, what the store's rule compares and what the row cost, a batch of
   fragments at a time (a large fragment a row group at a time); the best row of each key is
   chosen from these (the **winners**), and what each fragment's rows cost is noted;
2. the winners' rows gathered fragment by fragment, in write order, into one new fragment (its
   row groups written as they fill), and their cells made as they go.

So a compacted fragment holds its rows in the order they were written (a grade shard's
solutions, one items part, lie together), and the summary holds them sorted by key. Strings
that repeat (fragment names, models, conditions, codes) stay dictionary-encoded in memory. A
merge asked to stop (`stop()` true) raises `Stopped` between batches.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval._util.heap import trim_heap
from itemeval.storage import Location, unique_name
from itemeval.store._cells import (
    MERGED_KEY,
    SPENT_SCHEMA,
    SUPERSEDED_KEY,
    FragmentCost,
    add_spent,
    cells_schema,
    fragment_cost,
    model_column,
    paid_spent,
    row_columns,
    rows_to_cells,
    spent_of,
    spent_to_json,
)
from itemeval.store._layout import Stage
from itemeval.store._schemas import TIER_BATCH
from itemeval.store.fragments import (
    FRAGMENT_SUFFIX,
    ROW_GROUP_ROWS,
    FragmentInfo,
    open_parquet,
    read_fragments,
)

#: Fragments read at once (in parallel) in each pass, and at most this many bytes of them.
BATCH_FRAGMENTS = 64
BATCH_BYTES = 4 << 20
#: A fragment this large (bytes on storage) is read a row group at a time.
LARGE_BYTES = 4 << 20
#: A compacted fragment's row group is written when it holds `ROW_GROUP_ROWS` rows or this
#: many bytes in memory, whichever comes first (long answers make large rows).
ROW_GROUP_BYTES = 32 << 20
#: Cell columns kept dictionary-encoded in memory (a name per row otherwise: 40-50 bytes).
DICTIONARY_COLUMNS = ("gen_condition_id", "model", "grader", "error_code", "parse_code", "fragment")
_ORDINAL = "_ordinal"
_POSITION = "_position"
_OK = "_ok"


class Stopped(Exception):
    """The merge was asked to stop (the run was interrupted)."""


class Vanished(Exception):
    """A fragment or the summary changed since the partition was listed: try again."""


@dataclass
class MergedUnit:
    """One unit merged: the new fragment (written by the caller), its cells (parquet bytes, in
    the fragment's order, dictionary-encoded) and what merging it read."""

    name: str
    payload: bytes
    cells: bytes
    gens: frozenset[str]  # the generate conditions it holds (grades)
    rows_read: int
    rows_written: int
    costs: dict[str, FragmentCost]


def merge_unit(
    stage: Stage,
    partition: Location,
    infos: Sequence[FragmentInfo],
    stop: Callable[[], bool] | None = None,
    *,
    check: Callable[[dict[str, FragmentCost]], None] | None = None,
) -> MergedUnit:
    """Merge `infos` (in name order) into one fragment's bytes (see the module doc).
    `check(costs)` runs once every fragment's cost is known, before the rows are gathered
    (it raises to give up). `Vanished` when a fragment vanished meanwhile."""
    keys = list(stage.keys)
    lean_parts: list[pa.Table] = []
    costs: dict[str, FragmentCost] = {}
    codes: dict[str, int] = {}
    every_row = _SpentInOrder(stage)
    for batch in _batches(infos):
        check_stop(stop)
        for ordinal, info, table in _read(stage, partition, batch, _pass_one(stage), infos):
            costs[info.name] = _add_cost(costs.get(info.name), stage, table)
            every_row.add(table)
            lean_parts.append(_lean(stage, table, ordinal, codes))
    if check is not None:
        check(costs)
    lean = pa.concat_tables(lean_parts)
    del lean_parts
    check_stop(stop)
    rows_read = lean.num_rows
    winners = lean.select([_ORDINAL, _POSITION]).take(pa.array(_winners(lean, keys)))
    del lean
    ordinal = winners.column(_ORDINAL).to_numpy()
    position = winners.column(_POSITION).to_numpy()
    del winners
    order = np.lexsort((position, ordinal))  # write order: fragment, then place in it
    ordinal, position = ordinal[order], position[order]
    del order
    check_stop(stop)
    # The winners of each fragment: `position[start:end]` (sorted).
    spans: dict[int, tuple[int, int]] = {}
    if len(ordinal):
        starts = np.flatnonzero(np.r_[True, ordinal[1:] != ordinal[:-1]])
        ends = np.append(starts[1:], len(ordinal))
        spans = {int(ordinal[s]): (int(s), int(e)) for s, e in zip(starts, ends, strict=True)}
    # What the dropped rows cost: what every row cost less what the kept rows cost, the latter
    # summed as a reader of the new fragment sums them (in its order), so the two add up
    # exactly. Without dropped rows that is every row's cost in order; else the kept rows are
    # read again (rare: retried errors, repeated cells).
    kept = every_row
    if len(ordinal) != rows_read:
        kept = _SpentInOrder(stage)
        for batch in _batches([infos[o] for o in sorted(spans)]):
            check_stop(stop)
            for o, _, table in _read(stage, partition, batch, _pass_one(stage), infos):
                wanted = _within(table, position[slice(*spans[o])])
                kept.add(table.take(pa.array(wanted)))
    superseded = _difference(paid_spent(costs), kept.table())
    name = unique_name(suffix=FRAGMENT_SUFFIX)
    gathered = _Gathered(stage, name, superseded, [info.name for info in infos])
    for batch in _batches([infos[o] for o in sorted(spans)]):
        check_stop(stop)
        for o, _, table in _read(stage, partition, batch, list(stage.schema.names), infos):
            wanted = _within(table, position[slice(*spans[o])])
            if len(wanted):
                gathered.add(table, wanted)
    return gathered.finish(rows_read, costs)


# -- pass 1: winners ---------------------------------------------------------------------------


def _lean(stage: Stage, table: pa.Table, ordinal: int, codes: dict[str, int]) -> pa.Table:
    """What pass 1 keeps of a batch of a fragment's rows: the keys, what the rule compares and
    where the row is. A grades key's condition becomes a small integer (`codes`: value ->
    code, shared by the unit's batches). Positions continue across a large fragment's batches
    (`_offset`)."""
    n = table.num_rows
    offset = _offset(table)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for key in stage.keys:
        column = table.column(key)
        if key == "gen_condition_id":
            column = _coded(column, codes)
        columns[key] = column
    columns[_OK] = pc.equal(table.column("status"), "ok")
    columns["written_at"] = table.column("written_at")
    columns[_ORDINAL] = pa.array(np.full(n, ordinal, dtype=np.int32))
    columns[_POSITION] = pa.array(np.arange(offset, offset + n, dtype=np.int64))
    return pa.table(columns)


def _coded(column: pa.ChunkedArray, codes: dict[str, int]) -> pa.Array:
    """Each value's code (`codes` grows with new values)."""
    encoded = pc.dictionary_encode(column).combine_chunks()
    values = encoded.dictionary.to_pylist()
    mapping = np.array([codes.setdefault(v, len(codes)) for v in values], np.int32)
    return pa.array(mapping[encoded.indices.to_numpy(zero_copy_only=False)])


class _SpentInOrder:
    """`spent_of` of rows fed a batch at a time, in order: arrow sums a model's values one
    after the other, so a sum carried on from batch to batch (`np.cumsum` from where it
    stopped) is, to the last bit, `spent_of` of all the rows read as one table."""

    def __init__(self, stage: Stage):
        self.stage = stage
        self.sums: dict[str, list[float | int | None]] = {}  # model -> usd, tokens, batch usd

    def add(self, rows: pa.Table) -> None:
        if rows.num_rows == 0:
            return
        paid = pc.invert(rows.column("cached"))
        batch = pc.and_(paid, pc.equal(rows.column("tier"), TIER_BATCH))
        work = pa.table(
            {
                "model": rows.column(model_column(self.stage)),
                "usd": rows.column("usd"),
                "tokens": pc.if_else(paid, rows.column("cached_input_tokens"), 0),
                "batch_usd": pc.if_else(batch, rows.column("usd"), 0.0),
            }
        )
        grouped = work.group_by("model", use_threads=False).aggregate(
            [("usd", "list"), ("tokens", "sum"), ("batch_usd", "list")]
        )
        for row, model in enumerate(grouped.column("model").to_pylist()):
            usd, tokens, batch_usd = self.sums.setdefault(model, [None, None, None])
            tokens_now = grouped.column("tokens_sum")[row].as_py()
            self.sums[model] = [
                _carried(usd, grouped.column("usd_list")[row]),
                tokens if tokens_now is None else (tokens or 0) + tokens_now,
                _carried(batch_usd, grouped.column("batch_usd_list")[row]),
            ]

    def table(self) -> pa.Table:
        models = sorted(self.sums)
        values = [self.sums[m] for m in models]
        return pa.table(
            {
                "model": pa.array(models, pa.string()),
                "usd": pa.array([v[0] for v in values], pa.float64()),
                "paid_cached_input_tokens": pa.array([v[1] for v in values], pa.int64()),
                "paid_batch_usd": pa.array([v[2] for v in values], pa.float64()),
            },
            schema=SPENT_SCHEMA,
        )


def _carried(start: float | None, values: pa.Scalar) -> float | None:
    """`start` plus `values` one after the other (nulls skipped, as arrow's sum does)."""
    present = values.values.drop_null().to_numpy(zero_copy_only=False)
    if not len(present):
        return start
    run = present if start is None else np.r_[float(start), present]
    return float(np.cumsum(run)[-1])


def _pass_one(stage: Stage) -> list[str]:
    """What pass 1 reads: the keys, what the rule compares, what a row cost (`spent_of`)."""
    return [
        *stage.keys,
        model_column(stage),
        "status",
        "written_at",
        "usd",
        "cached",
        "tier",
        "cached_input_tokens",
    ]


def _within(table: pa.Table, positions: np.ndarray) -> np.ndarray:
    """Of a fragment's `positions`, those in `table` (a batch of it), as places in `table`."""
    offset = _offset(table)
    inside = positions[(positions >= offset) & (positions < offset + table.num_rows)]
    return inside - offset


def _winners(lean: pa.Table, keys: list[str]) -> np.ndarray:
    """Indices of the best row of each key (the store's rule: `ok`, then the later
    `written_at`, then the later fragment; a stable sort keeps a fragment's first row)."""
    n = lean.num_rows
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = [(k, "ascending") for k in keys]
    order += [(_OK, "descending"), ("written_at", "descending"), (_ORDINAL, "descending")]
    indices = pc.sort_indices(lean, sort_keys=order)
    first = np.zeros(n, dtype=bool)
    first[0] = True
    for key in keys:
        ordered = pc.take(lean.column(key), indices).combine_chunks()
        first[1:] |= pc.not_equal(ordered.slice(1), ordered.slice(0, n - 1)).to_numpy(
            zero_copy_only=False
        )
    return indices.to_numpy()[first]


def _difference(total: pa.Table, part: pa.Table) -> pa.Table:
    """`total - part` per model."""
    negative = part
    for name in ("usd", "paid_cached_input_tokens", "paid_batch_usd"):
        at = part.schema.get_field_index(name)
        negative = negative.set_column(at, name, pc.negate(part.column(name)))
    return add_spent(total, negative)


def _add_cost(before: FragmentCost | None, stage: Stage, table: pa.Table) -> FragmentCost:
    """A fragment's cost, one batch at a time: its metadata (what a compaction dropped, what it
    merged) counts once, with the first batch."""
    if before is None:
        return fragment_cost(stage, table)
    return FragmentCost(add_spent(before.spent, spent_of(stage, table)), before.merged)


# -- pass 2: the new fragment ------------------------------------------------------------------


class _Gathered:
    """The winners' rows written as one fragment, row group by row group, and their cells."""

    def __init__(self, stage: Stage, name: str, superseded: pa.Table, merged: list[str]):
        self.stage = stage
        self.name = name
        meta: dict[bytes, bytes] = {}
        if superseded.num_rows:
            meta[SUPERSEDED_KEY] = json.dumps(spent_to_json(superseded)).encode()
        # Which fragments it holds: until they are deleted, readers count their cost once.
        meta[MERGED_KEY] = json.dumps(merged).encode()
        self.sink = io.BytesIO()
        self.writer = pq.ParquetWriter(
            self.sink,
            stage.schema.with_metadata(meta),
            compression="zstd",
            use_dictionary=False,
            write_statistics=True,
        )
        self.cells_sink = io.BytesIO()
        self.cells_writer: pq.ParquetWriter | None = None
        self.pending: list[pa.Table] = []
        self.pending_rows = self.pending_bytes = 0
        self.written = 0
        self.gens: set[str] = set()

    def add(self, table: pa.Table, positions: np.ndarray) -> None:
        """The rows of `table` at `positions` (its own rows' places)."""
        rows = table.take(pa.array(positions)).replace_schema_metadata(None)
        self.pending.append(rows)
        self.pending_rows += rows.num_rows
        self.pending_bytes += rows.nbytes
        if self.pending_rows >= ROW_GROUP_ROWS or self.pending_bytes >= ROW_GROUP_BYTES:
            self._flush(whole=self.pending_bytes < ROW_GROUP_BYTES)

    def _flush(self, whole: bool = False) -> None:
        """Write what is pending as row groups of `ROW_GROUP_ROWS`; with `whole`, only full
        ones (the rest waits for more rows)."""
        if not self.pending:
            return
        rows = pa.concat_tables(self.pending)  # not combined: the writer takes the pieces
        end = rows.num_rows - rows.num_rows % ROW_GROUP_ROWS if whole else rows.num_rows
        rest = rows.slice(end)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows = rest.num_rows
        self.pending_bytes = rest.nbytes if rest.num_rows else 0
        for start in range(0, end, ROW_GROUP_ROWS):
            group = rows.slice(start, min(ROW_GROUP_ROWS, end - start))
            self.writer.write_table(group, row_group_size=ROW_GROUP_ROWS)
            self._cells(group)

    def _cells(self, rows: pa.Table) -> None:
        cells = rows_to_cells(self.stage, rows.select(row_columns(self.stage)), self.name)
        at = cells.schema.get_field_index("position")
        shifted = pc.add(cells.column("position"), pa.scalar(self.written, pa.int64()))
        cells = encoded(cells.set_column(at, "position", shifted))
        self.written += rows.num_rows
        if "gen_condition_id" in cells.column_names:
            column = cells.column("gen_condition_id")
            self.gens.update(v for chunk in column.chunks for v in chunk.dictionary.to_pylist())
        if self.cells_writer is None:
            self.cells_writer = pq.ParquetWriter(self.cells_sink, cells.schema, compression="zstd")
        self.cells_writer.write_table(cells)

    def finish(self, rows_read: int, costs: dict[str, FragmentCost]) -> MergedUnit:
        self._flush()
        self.writer.close()
        if self.cells_writer is None:
            empty = encoded(cells_schema(self.stage).empty_table())
            self.cells_writer = pq.ParquetWriter(self.cells_sink, empty.schema)
        self.cells_writer.close()
        return MergedUnit(
            self.name,
            self.sink.getvalue(),
            self.cells_sink.getvalue(),
            frozenset(self.gens),
            rows_read,
            self.written,
            costs,
        )


# -- reading fragments in bounded memory -------------------------------------------------------


def _batches(infos: Sequence[FragmentInfo]) -> Iterator[list[FragmentInfo]]:
    """Small fragments in batches (read in parallel); a large one alone."""
    batch: list[FragmentInfo] = []
    size = 0
    for info in infos:
        large = (info.size or 0) >= LARGE_BYTES
        if batch and (large or len(batch) >= BATCH_FRAGMENTS or size >= BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(info)
        size += info.size or 0
        if large:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _read(
    stage: Stage,
    partition: Location,
    batch: list[FragmentInfo],
    columns: list[str],
    infos: Sequence[FragmentInfo],
) -> Iterator[tuple[int, FragmentInfo, pa.Table]]:
    """`(ordinal, info, rows)` of each fragment of `batch` (its ordinal: its place in
    `infos`); a large fragment a row group at a time, each with its first row's place in the
    fragment as `_offset` in its metadata. `Vanished` when one is gone."""
    ordinal_of = {info.name: i for i, info in enumerate(infos)}
    if len(batch) == 1 and (batch[0].size or 0) >= LARGE_BYTES:
        info = batch[0]
        for table in _row_groups(stage, partition, info, columns):
            yield ordinal_of[info.name], info, table
        return
    tables = read_fragments(partition, batch, stage.schema, columns)
    for info, table in zip(batch, tables, strict=True):
        if table is None:
            raise Vanished(info.name)
        yield ordinal_of[info.name], info, table


def _row_groups(
    stage: Stage, partition: Location, info: FragmentInfo, columns: list[str]
) -> Iterator[pa.Table]:
    try:
        handle = None
        if partition.is_local:
            parquet = open_parquet(info.path)
        else:
            handle = partition.fs.open(info.path, "rb")
            parquet = pq.ParquetFile(handle, pre_buffer=True)
    except FileNotFoundError:
        raise Vanished(info.name) from None
    try:
        stored = parquet.schema_arrow
        if any(
            name not in stored.names or stored.field(name).type != stage.schema.field(name).type
            for name in columns
        ):  # an older version of the schema: read whole, as every reader does
            (table,) = read_fragments(partition, [info], stage.schema, columns)
            if table is None:
                raise Vanished(info.name)
            yield table
            return
        meta = dict(stored.metadata or {})
        offset = 0
        for group in range(parquet.num_row_groups):
            try:
                table = parquet.read_row_group(group, columns=columns, use_threads=False)
            except FileNotFoundError:
                raise Vanished(info.name) from None
            yield table.replace_schema_metadata({**meta, b"_offset": str(offset).encode()})
            meta = {}  # the fragment's own metadata counts once (`_add_cost`)
            offset += table.num_rows
    finally:
        if handle is not None:
            handle.close()


def _offset(table: pa.Table) -> int:
    """The place of `table`'s first row in its fragment (a large fragment's row group)."""
    return int((table.schema.metadata or {}).get(b"_offset", b"0"))


def check_stop(stop: Callable[[], bool] | None) -> None:
    """Between batches: stop when asked; hand the batch's freed pages back (arrow's pool and
    glibc keep them otherwise, and a compaction's peak was twice what it held)."""
    if stop is not None and stop():
        raise Stopped
    pa.default_memory_pool().release_unused()
    trim_heap()


def encoded(cells: pa.Table) -> pa.Table:
    """`cells` with the repeating strings dictionary-encoded."""
    for name in DICTIONARY_COLUMNS:
        at = cells.schema.get_field_index(name)
        if at >= 0 and not pa.types.is_dictionary(cells.schema.field(name).type):
            cells = cells.set_column(at, name, pc.dictionary_encode(cells.column(name)))
    return cells
