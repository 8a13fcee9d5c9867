"""Compaction: merge a partition's small fragments into one deduplicated fragment per unit, and
keep the partition's summary (`_summary.py`) up to date.

A **unit** is what one compacted fragment holds: the whole partition for solutions, one generate
condition for grades (a grades partition holds the grades of every generate condition; a unit
each keeps a compaction's memory to one condition's rows). Which fragments a compaction merges:

* every fragment the summary does not cover (written since, or never summarised), and every
  covered fragment of fewer than `SMALL_ROWS` rows;
* every fragment of a unit, when that unit would otherwise keep more than `MAX_LARGE` large
  fragments, or with `full=True`, or when the partition has no usable summary.

So a run's thousands of small fragments become one, and a large compacted fragment is not
rewritten for each small addition (a resumed run's 1% costs 1% to compact).

Safe while writers and readers run, because of the order of operations:

1. list the partition and read the summary (a summary naming a fragment no longer listed is
   ignored);
2. read exactly the fragments chosen (F) and write the best row of each key of F as one new
   fragment per unit (C), wholly or not at all, with what F's dropped rows cost in its metadata;
3. write the summary covering C and the fragments not merged;
4. rewrite the partition's `_compaction` marker;
5. delete exactly F, never a fragment written meanwhile.

A reader listing between 2 and 5 sees F and C and deduplicates the overlap; a reader whose
fragment of F vanishes re-lists and finds C; a reader whose listing overlapped the deletes sees
the marker change and reads the partition again (`fragments.read_partitions`); a reader of the
summary that finds a fragment it names gone reads the newer summary. A crash between any two
steps leaves duplicates that reads deduplicate and the next compaction removes, or fragments the
summary does not cover, which readers read in full. Rows keep their `written_at`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval.errors import Problem, StoreError
from itemeval.storage import Location, unique_name
from itemeval.store._cells import (
    MERGED_KEY,
    SUPERSEDED_KEY,
    add_spent,
    best_cells,
    cells_schema,
    fragment_cost,
    merge_cells,
    paid_spent,
    replaces_any,
    row_columns,
    rows_to_cells,
    spent_of,
    spent_to_json,
)
from itemeval.store._layout import GRADES, STAGES, Stage, StudyStore
from itemeval.store._selection import select_conditions
from itemeval.store._summary import summarise_partition
from itemeval.store._summary_file import PartitionSummary, read_summary, write_summary
from itemeval.store.fragments import (
    FRAGMENT_SUFFIX,
    ROW_GROUP_ROWS,
    FragmentInfo,
    list_fragments,
    mark_compaction,
    read_fragments,
)

_MAX_ATTEMPTS = 5
#: A covered fragment with fewer rows is merged by the next compaction.
SMALL_ROWS = 100_000
#: A unit keeping more large fragments than this is compacted whole.
MAX_LARGE = 4


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What compacting one partition did."""

    stage: str
    condition_id: str
    fragments_read: int
    rows_read: int
    rows_written: int
    fragment_written: str | None  # the first new fragment; None when nothing was merged
    fragments_written: tuple[str, ...] = field(default=())
    summary_written: bool = False

    @property
    def duplicates_dropped(self) -> int:
        return self.rows_read - self.rows_written


def compact_partition(
    store: StudyStore, stage: Stage | str, condition_id: str, *, full: bool = False
) -> CompactionResult:
    """Compact one partition (see the module doc) and write its summary."""
    stage = store.stage(stage)
    partition = store.partition(stage, condition_id)
    for _ in range(_MAX_ATTEMPTS):
        listed = list_fragments(partition)
        if not listed:
            return CompactionResult(stage.name, condition_id, 0, 0, 0, None)
        names = {info.name for info in listed}
        summary = read_summary(partition, stage)
        if summary is not None and not set(summary.fragments) <= names:
            summary = None  # names a fragment another compaction removed: start afresh
        done = _compact_once(stage, partition, listed, summary, full=full or summary is None)
        if done is not None:
            return CompactionResult(stage.name, condition_id, *done)
    raise StoreError(
        Problem(
            "fragments kept disappearing during compaction (another compaction running?)",
            file=partition.url,
        )
    )


def _compact_once(
    stage: Stage,
    partition: Location,
    listed: list[FragmentInfo],
    summary: PartitionSummary | None,
    *,
    full: bool,
) -> tuple[int, int, int, str | None, tuple[str, ...], bool] | None:
    covered = summary.fragments if summary is not None else {}
    units = _units(stage, partition, listed, summary)
    if units is None:
        return None  # a fragment vanished while its footer was read
    chosen: dict[str, list[FragmentInfo]] = {}
    for unit, infos in units.items():
        small = [i for i in infos if i.name not in covered or covered[i.name] < SMALL_ROWS]
        large = len(infos) - len(small)
        pick = infos if full or large > MAX_LARGE else small
        if len(pick) >= 2 or any(i.name not in covered for i in pick):
            chosen[unit] = pick
    if not chosen:
        return 0, 0, 0, None, (), False
    merged_names = {i.name for infos in chosen.values() for i in infos}
    if summary is not None:
        kept = summary.cells.filter(
            pc.invert(pc.is_in(summary.cells.column("fragment"), pa.array(list(merged_names))))
        )
        spent = summary.spent
        fragments = {n: r for n, r in summary.fragments.items() if n not in merged_names}
    else:
        kept = cells_schema(stage).empty_table()
        spent = add_spent()
        fragments = {}
    rows_read = rows_written = 0
    written: list[tuple[str, bytes]] = []
    new_cells: list[pa.Table] = []
    for infos in chosen.values():
        done = _merge_unit(stage, partition, infos)
        if done is None:
            return None
        name, payload, cells, unit_rows, costs = done
        rows_read += unit_rows
        rows_written += cells.num_rows
        written.append((name, payload))
        new_cells.append(cells)
        fragments[name] = cells.num_rows
        # What covered fragments cost is in `summary.spent` already.
        if replaces_any(costs, covered):
            # A compaction died after writing this fragment and before its summary: the
            # summary's cost counts rows this fragment holds again. Start from every row.
            return _compact_once(stage, partition, listed, None, full=True)
        spent = add_spent(spent, paid_spent({n: c for n, c in costs.items() if n not in covered}))
    for name, payload in written:  # 2: the new fragments, wholly or not at all
        partition.join(name).write_atomic(payload)
    cells = kept
    for part in new_cells:
        cells = merge_cells(stage, cells, part)
    # 3: the summary of what stays, then 4 and 5
    write_summary(partition, PartitionSummary(stage, _sorted(stage, cells), fragments, spent))
    merged = [i for infos in chosen.values() for i in infos]
    mark_compaction(partition)
    _remove(partition, merged)
    names = tuple(name for name, _ in written)
    return len(merged), rows_read, rows_written, names[0] if names else None, names, True


def _merge_unit(
    stage: Stage, partition: Location, infos: list[FragmentInfo]
) -> tuple[str, bytes, pa.Table, int, dict[str, pa.Table]] | None:
    """One unit's fragments merged: the new fragment's name and bytes, its cells (located in
    it), the rows read and what each fragment's rows cost (its superseded rows included).
    None when a fragment vanished."""
    tables = read_fragments(partition, infos, stage.schema)
    if any(t is None for t in tables):
        return None
    parts = [t for t in tables if t is not None]
    cells = pa.concat_tables(
        [
            rows_to_cells(stage, t.select(row_columns(stage)), info.name)
            for t, info in zip(parts, infos, strict=True)
        ]
    )
    rows_read = cells.num_rows
    best = best_cells(stage, cells)
    # The winners' rows, in key order, gathered from the fragments they are in.
    order = {info.name: i for i, info in enumerate(infos)}
    offsets = np.cumsum([0] + [t.num_rows for t in parts])
    frag = np.array([order[n] for n in best.column("fragment").to_pylist()], dtype=np.int64)
    at = offsets[frag] + best.column("position").to_numpy()
    rows = pa.concat_tables(parts).take(pa.array(at))
    costs = {info.name: fragment_cost(stage, t) for t, info in zip(parts, infos, strict=True)}
    superseded = _difference(paid_spent(costs), spent_of(stage, best))
    name = unique_name(suffix=FRAGMENT_SUFFIX)
    payload = _encode(rows, superseded, [info.name for info in infos])
    located = best.set_column(
        best.schema.get_field_index("fragment"),
        "fragment",
        pa.array([name] * best.num_rows, pa.string()),
    ).set_column(
        best.schema.get_field_index("position"),
        "position",
        pa.array(np.arange(best.num_rows, dtype=np.int64)),
    )
    return name, payload, located, rows_read, costs


def _difference(total: pa.Table, part: pa.Table) -> pa.Table:
    """`total - part` per model (what the dropped rows cost)."""
    negative = part.set_column(1, "usd", pc.negate(part.column("usd")))
    negative = negative.set_column(
        2, "paid_cached_input_tokens", pc.negate(part.column("paid_cached_input_tokens"))
    )
    negative = negative.set_column(3, "paid_batch_usd", pc.negate(part.column("paid_batch_usd")))
    return add_spent(total, negative)


def _encode(table: pa.Table, superseded: pa.Table, merged: list[str]) -> bytes:
    meta = dict(table.schema.metadata or {})
    meta.pop(SUPERSEDED_KEY, None)
    meta.pop(MERGED_KEY, None)
    if superseded.num_rows:
        meta[SUPERSEDED_KEY] = json.dumps(spent_to_json(superseded)).encode()
    # Which fragments it holds: until they are deleted, readers count their cost once.
    meta[MERGED_KEY] = json.dumps(merged).encode()
    table = table.replace_schema_metadata(meta)
    sink = io.BytesIO()
    pq.write_table(
        table,
        sink,
        compression="zstd",
        use_dictionary=False,
        row_group_size=ROW_GROUP_ROWS,
        write_statistics=True,
    )
    return sink.getvalue()


def _sorted(stage: Stage, cells: pa.Table) -> pa.Table:
    if cells.num_rows <= 1:
        return cells
    return cells.take(pc.sort_indices(cells, [(k, "ascending") for k in stage.keys]))


def _units(
    stage: Stage,
    partition: Location,
    listed: list[FragmentInfo],
    summary: PartitionSummary | None,
) -> dict[str, list[FragmentInfo]] | None:
    """The partition's fragments by unit (see the module doc); None if one vanished."""
    if stage.name != GRADES.name:
        return {"": listed}
    # The generate conditions of each fragment, from its footer's statistics (a run's
    # fragment holds one); fragments spanning several join their conditions into one unit.
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    spans: list[tuple[FragmentInfo, str, str]] = []
    for info in listed:
        span = _gen_span(partition, info)
        if span is None:
            return None
        low, high = span
        spans.append((info, low, high))
        if low != high:
            parent[find(high)] = find(low)
    units: dict[str, list[FragmentInfo]] = {}
    for _, low, high in spans:
        if low != high:  # every condition between
            for other in {s[1] for s in spans} | {s[2] for s in spans}:
                if low <= other <= high:
                    parent[find(other)] = find(low)
    for info, low, _ in spans:
        units.setdefault(find(low), []).append(info)
    return units


def _gen_span(partition: Location, info: FragmentInfo) -> tuple[str, str] | None:
    """The least and greatest `gen_condition_id` of a grades fragment, from its footer."""
    try:
        if partition.is_local:
            meta = pq.read_metadata(info.path)
        else:
            with partition.fs.open(info.path, "rb") as handle:
                meta = pq.read_metadata(handle)
    except FileNotFoundError:
        return None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise StoreError(
            Problem(f"not a readable store fragment ({exc})", file=partition.url + "/" + info.name)
        ) from exc
    column = meta.schema.to_arrow_schema().get_field_index("gen_condition_id")
    low = high = None
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max:
            return "", "\U0010ffff"  # unknown: it may hold any condition
        lo, hi = str(stats.min), str(stats.max)
        low = lo if low is None or lo < low else low
        high = hi if high is None or hi > high else high
    return (low or "", high or "")


def compact(
    store: StudyStore,
    stages: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    *,
    full: bool = False,
) -> list[CompactionResult]:
    """Compact every partition of `stages` (default: solutions and grades), or those that the
    `conditions` selections (ids, prefixes, slugs, globs) name."""
    return [
        compact_partition(store, stage, cid, full=full)
        for stage, cid in _partitions(store, stages, conditions)
    ]


def rebuild_summaries(
    store: StudyStore,
    stages: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
) -> list[tuple[str, str, int]]:
    """Write every chosen partition's summary again from its rows (`compact
    --rebuild-summaries`): `(stage, condition id, cells)` per partition."""
    out = []
    for stage, cid in _partitions(store, stages, conditions):
        partition = store.partition(stage, cid)
        summary = summarise_partition(stage, partition)
        write_summary(partition, summary)
        out.append((stage.name, cid, summary.cells.num_rows))
    return out


def _partitions(
    store: StudyStore, stages: Sequence[str] | None, conditions: Sequence[str] | None
) -> list[tuple[Stage, str]]:
    chosen = [store.stage(name) for name in stages or list(STAGES)]
    known = {stage.name: store.condition_ids(stage) for stage in chosen}
    # One selection may name a generate or a grade condition: resolve against both.
    every = [cid for stage in chosen for cid in known[stage.name]]
    selected = set(select_conditions(every, conditions)) if conditions else set(every)
    return [(stage, cid) for stage in chosen for cid in known[stage.name] if cid in selected]


def _remove(partition: Location, fragments: list[FragmentInfo]) -> None:
    if not fragments:
        return
    if partition.is_local:
        for info in fragments:
            partition.join(info.name).delete(missing_ok=True)
    else:
        # s3fs deletes in bulk requests of up to 1000 keys; a missing key is not an error.
        partition.fs.rm([info.path for info in fragments])
        partition.invalidate()
