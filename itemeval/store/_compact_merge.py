"""Compaction in bounded memory: one unit's fragments merged, and the partition's summary
written from the units' cells one generate condition at a time (`_compact.py` decides what is
merged and keeps the order of operations).

A unit is merged in two passes over its fragments, never holding its rows whole:

1. the cells' small columns of every row (`row_columns`), a batch of fragments at a time (a
   large fragment a row group at a time), reduced to the keys and what the store's rule
   compares; the best row of each key is chosen from these (the **winners**), and what each
   fragment's rows cost is noted;
2. the winners' rows gathered fragment by fragment, in write order, into one new fragment (its
   row groups written as they fill), and their cells made as they go.

So a compacted fragment holds its rows in the order they were written (a grade shard's
solutions, one items part, lie together), and the summary holds them sorted by key. Strings
that repeat (fragment names, models, conditions, codes) stay dictionary-encoded until they are
written. A merge asked to stop (`stop()` true) raises `Stopped` between batches.
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
    best_cells,
    cell_groups,
    cells_schema,
    fragment_cost,
    group_columns,
    groups_to_json,
    model_column,
    paid_spent,
    row_columns,
    rows_to_cells,
    spent_of,
    spent_to_json,
)
from itemeval.store._dedup import keys_present
from itemeval.store._layout import GRADES, Stage
from itemeval.store._schemas import TIER_BATCH
from itemeval.store._summary import SUMMARY_FILE, SUMMARY_KEY, SUMMARY_VERSION, PartitionSummary
from itemeval.store.fragments import (
    FRAGMENT_SUFFIX,
    ROW_GROUP_ROWS,
    FragmentInfo,
    open_parquet,
    read_fragments,
)

#: Fragments read at once (in parallel) in each pass, and at most this many bytes of them.
BATCH_FRAGMENTS = 256
BATCH_BYTES = 16 << 20
#: A fragment this large (bytes on storage) is read a row group at a time.
LARGE_BYTES = 4 << 20
#: A compacted fragment's row group is written when it holds `ROW_GROUP_ROWS` rows or this
#: many bytes in memory, whichever comes first (long answers make large rows).
ROW_GROUP_BYTES = 64 << 20
#: The summary's row groups (as `_summary.encode_summary` writes them).
SUMMARY_GROUP_ROWS = 1 << 17
#: Cell columns kept dictionary-encoded in memory (a name per row otherwise: 40-50 bytes).
_DICTIONARY = ("gen_condition_id", "model", "grader", "error_code", "parse_code", "fragment")
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
        _check_stop(stop)
        for ordinal, info, table in _read(stage, partition, batch, _pass_one(stage), infos):
            costs[info.name] = _add_cost(costs.get(info.name), stage, table)
            every_row.add(table)
            lean_parts.append(_lean(stage, table, ordinal, codes))
    if check is not None:
        check(costs)
    lean = pa.concat_tables(lean_parts)
    del lean_parts
    rows_read = lean.num_rows
    winners = lean.select([_ORDINAL, _POSITION]).take(pa.array(_winners(lean, keys)))
    del lean
    ordinal = winners.column(_ORDINAL).to_numpy()
    position = winners.column(_POSITION).to_numpy()
    del winners
    order = np.lexsort((position, ordinal))  # write order: fragment, then place in it
    ordinal, position = ordinal[order], position[order]
    del order
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
            _check_stop(stop)
            for o, _, table in _read(stage, partition, batch, _pass_one(stage), infos):
                wanted = _within(table, position[slice(*spans[o])])
                kept.add(table.take(pa.array(wanted)))
    superseded = _difference(paid_spent(costs), kept.table())
    name = unique_name(suffix=FRAGMENT_SUFFIX)
    gathered = _Gathered(stage, name, superseded, [info.name for info in infos])
    for batch in _batches([infos[o] for o in sorted(spans)]):
        _check_stop(stop)
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
        rows = pa.concat_tables(self.pending).combine_chunks()
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
        cells = _encoded(cells.set_column(at, "position", shifted))
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
            empty = _encoded(cells_schema(self.stage).empty_table())
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


def _check_stop(stop: Callable[[], bool] | None) -> None:
    """Between batches: stop when asked; hand the batch's freed pages back (arrow's pool and
    glibc keep them otherwise, and a compaction's peak was twice what it held)."""
    if stop is not None and stop():
        raise Stopped
    pa.default_memory_pool().release_unused()
    trim_heap()


# -- cells in memory ---------------------------------------------------------------------------


def _encoded(cells: pa.Table) -> pa.Table:
    """`cells` with the repeating strings dictionary-encoded."""
    for name in _DICTIONARY:
        at = cells.schema.get_field_index(name)
        if at >= 0 and not pa.types.is_dictionary(cells.schema.field(name).type):
            cells = cells.set_column(at, name, pc.dictionary_encode(cells.column(name)))
    return cells


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
    groups = _GroupSums(stage)
    for gen in conditions:
        _check_stop(stop)
        kept = _old_cells(stage, partition, old, gen, merged)
        new = [_unit_cells(u, gen) for u in units if gen is None or gen in u.gens]
        cells = _merged(stage, kept, new)
        sink = io.BytesIO()
        writer = pq.ParquetWriter(sink, cells_schema(stage), compression="zstd")
        if cells.num_rows:
            keys = [(k, "ascending") for k in stage.keys if k != "gen_condition_id"]
            order = pc.sort_indices(cells.select([k for k, _ in keys]), sort_keys=keys)
            for start in range(0, cells.num_rows, SUMMARY_GROUP_ROWS):
                chunk = _decoded(stage, cells.take(order.slice(start, SUMMARY_GROUP_ROWS)))
                writer.write_table(chunk, row_group_size=SUMMARY_GROUP_ROWS)
                groups.add(chunk)
        writer.close()
        pieces.append(sink.getvalue())
        del cells, kept, new
    meta = {
        "version": SUMMARY_VERSION,
        "stage": stage.name,
        "fragments": fragments,
        "spent": spent_to_json(spent),
        "groups": groups_to_json(groups.table()),
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


def _unit_cells(unit: MergedUnit, gen: str | None) -> pa.Table:
    table = open_parquet(pa.BufferReader(unit.cells)).read()
    if gen is not None and len(unit.gens) > 1:
        table = table.filter(pc.equal(pc.cast(table.column("gen_condition_id"), pa.string()), gen))
    return table


def _old_cells(
    stage: Stage,
    partition: Location,
    old: PartitionSummary | None,
    gen: str | None,
    merged: frozenset[str],
) -> pa.Table | None:
    """The cells of `old`'s file (of condition `gen`), without those of `merged` fragments."""
    if old is None or not set(old.fragments) - merged:
        return None
    location = partition.join(SUMMARY_FILE)
    present = [n for n in _DICTIONARY if n in cells_schema(stage).names]
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
    groups = list(range(parquet.num_row_groups))
    if gen is not None:
        at = parquet.schema_arrow.get_field_index("gen_condition_id")
        groups = [g for g in groups if _may_hold(parquet.metadata.row_group(g).column(at), gen)]
    table = parquet.read_row_groups(groups, use_threads=False).replace_schema_metadata(None)
    keep = pc.invert(
        pc.is_in(pc.cast(table.column("fragment"), pa.string()), pa.array(sorted(merged)))
    )
    if gen is not None:
        keep = pc.and_(keep, pc.equal(pc.cast(table.column("gen_condition_id"), pa.string()), gen))
    return _encoded(table.filter(keep))


def _may_hold(column: pq.ColumnChunkMetaData, gen: str) -> bool:
    stats = column.statistics
    if stats is None or not stats.has_min_max:
        return True
    return bool(str(stats.min) <= gen <= str(stats.max))


def _merged(stage: Stage, kept: pa.Table | None, new: list[pa.Table]) -> pa.Table:
    """One cell per key: `kept` (one per key) and the units' new cells by the store's rule.
    Only keys present on both sides (or in several units) are compared, as strings."""
    schema = _encoded(cells_schema(stage).empty_table()).schema
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
        decided = _encoded(best_cells(stage, contested)).select(schema.names)
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
