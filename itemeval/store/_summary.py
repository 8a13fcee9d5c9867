"""Partition summaries: what the re-run commands need, kept beside each partition's fragments.

A partition's summary (`<partition>/_summary`) is its **cells**: one row per logical key
(the store's best row of the key), holding the small columns every command reads (status, codes,
scores, tokens, dollars, the answer's 64-bit text hash) and where the row lives (`fragment`,
`position`), plus, in the file's metadata, the fragments it covers (name and row count) and what
every physical row of them cost (`spent`, per model: superseded rows included). It is written by
compaction and by `compact --rebuild-summaries`, never by a run's shards. The file itself (its
encoding, writing and reading) is `_summary_file`; this module reads cells through it.

A summary is derived data, never the source of truth:

* it describes exactly the fragments it names; a reader lists the partition, reads the summary,
  and reads in full only the fragments the summary does not name (a fragment written after it,
  or one whose writer died before a compaction summarised it), merging their rows into the
  summary's cells by the store's rule (`ok` beats `error`, then the later `written_at`, then the
  later fragment). The result is the same as a read of every row, digit for digit;
* a summary naming a fragment that is no longer listed (a compaction deleted it after this
  reader read the summary) is stale: the reader reads the summary again, and after a few tries
  every row (`read_partitions`, which is consistent beside compaction);
* `ITEMEVAL_SUMMARIES=off` makes every reader ignore summaries and read every row: the check
  that both ways give the same output.

What physical rows cost is kept too (`spent`): `usd_spent` in `itemeval status` counts superseded
rows, what the study paid. A fragment written by compaction keeps, in its own metadata, what the
rows it dropped cost (`itemeval.superseded`), so a read of every row still counts them.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval.errors import Problem, StoreError
from itemeval.storage import Location
from itemeval.store._cells import (
    GROUP_SUMS,
    ROW_IN_FRAGMENT,
    RULE_COLUMNS,
    SPENT_SCHEMA,
    FragmentCost,
    add_spent,
    best_cells,
    cell_groups,
    cells_schema,
    fragment_cost,
    group_columns,
    merge_cells,
    paid_spent,
    replaces_any,
    row_columns,
    rows_to_cells,
)
from itemeval.store._layout import GRADES, Stage
from itemeval.store._positions import ItemLookup
from itemeval.store._summary_file import (
    PartitionSummary,
    SummaryFile,
    open_summary,
)
from itemeval.store.fragments import (
    FRAGMENT_NAME,
    FragmentInfo,
    list_fragments,
    read_fragments,
    read_partitions,
)

#: Set to `off` (or `0`, `no`, `false`) to make every reader ignore summaries.
SUMMARIES_ENV = "ITEMEVAL_SUMMARIES"
_STALE_TRIES = 4  # summaries read again before a reader falls back to every row


def summaries_enabled() -> bool:
    return os.environ.get(SUMMARIES_ENV, "on").strip().lower() not in ("off", "0", "no", "false")


# -- reading cells -----------------------------------------------------------------------------


@dataclass
class PartitionCells:
    """What a reader of one partition gets: its cells (one row per key), what its physical rows
    cost (empty when only some generate conditions' cells were asked for), and how they were
    read (for tests and benchmarks: the rows read in full)."""

    cells: pa.Table
    spent: pa.Table
    fragments: int = 0  # fragments in the partition
    read_in_full: int = 0  # fragments whose rows were read (not covered by a summary)
    summary_used: bool = False
    #: With `items` given and the summary's cells exactly those items (`layout_of`): each
    #: row's item position among them, known without reading an id (None otherwise).
    item_positions: np.ndarray | None = None


def read_cells(
    stage: Stage,
    partition: Location,
    columns: Sequence[str] | None = None,
    *,
    generate: Collection[str] | None = None,
    items: ItemLookup | None = None,
) -> PartitionCells:
    """The partition's cells, `columns` of them (None: all), from its summary and the fragments
    the summary does not cover (see the module doc); of grades, only those of the `generate`
    conditions when given. With `items` (a selection's ids), a summary whose cells are every
    item's, in order, with the same epochs each (the common case: a complete study, compacted)
    gives each row's item position (`item_positions`) and reads no id."""
    schema = cells_schema(stage)
    wanted = list(columns) if columns is not None else list(schema.names)
    unknown = [c for c in wanted if c not in schema.names]
    if unknown:
        raise StoreError(Problem(f"no such cell column(s) {unknown}; columns are {schema.names}"))
    needed = list(dict.fromkeys([*stage.keys, *RULE_COLUMNS, *wanted]))
    only = generate if stage.name == GRADES.name else None
    if summaries_enabled():
        for _ in range(_STALE_TRIES):
            opened = open_summary(partition, stage)
            if opened is None:
                break
            summary = opened.summary
            listed = list_fragments(partition)
            if not set(summary.fragments) <= {info.name for info in listed}:
                continue  # compacted since: read the newer summary
            newer = [info for info in listed if info.name not in summary.fragments]
            if not newer:  # the summary is the partition: only the columns asked for
                placed = _placed(opened, stage, wanted, only, items)
                if placed is not None:
                    cells, positions = placed
                    spent = summary.spent if only is None else SPENT_SCHEMA.empty_table()
                    return PartitionCells(
                        cells,
                        spent,
                        fragments=len(listed),
                        summary_used=True,
                        item_positions=positions,
                    )
                try:
                    cells = opened.cells(wanted, only)
                except (ValueError, TypeError, pa.ArrowException, OSError):
                    break  # unreadable: it is derived data, the rows are read instead
                spent = summary.spent if only is None else SPENT_SCHEMA.empty_table()
                return PartitionCells(cells, spent, fragments=len(listed), summary_used=True)
            read = _read_rows(stage, partition, newer)
            if read is None:
                continue  # a newer fragment was compacted away meanwhile
            rows, costs = read
            if replaces_any(costs, summary.fragments):
                break  # a compaction died after its fragment: count from every row
            try:
                base = opened.cells(needed, only)
            except (ValueError, TypeError, pa.ArrowException, OSError):
                break
            cells = merge_cells(stage, base, _only(rows.select(needed), only))
            spent = add_spent(summary.spent, paid_spent(costs))
            return PartitionCells(
                cells.select(wanted),
                spent if only is None else SPENT_SCHEMA.empty_table(),
                fragments=len(listed),
                read_in_full=len(newer),
                summary_used=True,
            )
    return _every_row(stage, partition, needed, wanted, only)


def every_cell_ok(stage: Stage, partition: Location, items: ItemLookup, epochs: int) -> bool:
    """Whether the partition's summary alone says every cell of `items x range(epochs)` has
    an `ok` best row: it covers every listed fragment, its cells are exactly those items in id
    order with at least `epochs` epochs each (`layout_of`), and its footer counts every cell
    `ok`. A solutions partition's footer only (no cell is read); False whenever it cannot say
    (no summary, newer fragments, another layout), and the caller reads the cells."""
    if not summaries_enabled() or stage.name == GRADES.name or not len(items.items):
        return False
    opened = open_summary(partition, stage)
    groups = opened.summary.groups if opened is not None else None
    if opened is None or groups is None:
        return False
    summary = opened.summary
    if {info.name for info in list_fragments(partition)} != set(summary.fragments):
        return False
    shape = summary.layout.get("")
    if (
        shape is None
        or shape.get("epochs") is None
        or int(shape["epochs"]) < epochs  # type: ignore[call-overload]
        or shape.get("items") != len(items.items)
        or shape.get("digest") != items.digest
    ):
        return False
    ok = groups.filter(pc.fill_null(groups.column("ok"), False))
    return int(pc.sum(ok.column("cells")).as_py() or 0) == shape.get("rows")


def generate_span(footer: pq.FileMetaData) -> tuple[str, str] | None:
    """The least and greatest `gen_condition_id` of a grades fragment, from its footer's
    statistics; None when they are not known (it may hold any condition)."""
    try:
        column = footer.schema.to_arrow_schema().get_field_index("gen_condition_id")
    except (ValueError, pa.ArrowException):
        return None
    if column < 0:
        return None
    low = high = None
    for g in range(footer.num_row_groups):
        stats = footer.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max:
            return None
        lo, hi = str(stats.min), str(stats.max)
        low = lo if low is None or lo < low else low
        high = hi if high is None or hi > high else high
    return None if low is None or high is None else (low, high)


def _placed(
    opened: SummaryFile,
    stage: Stage,
    wanted: list[str],
    only: Collection[str] | None,
    items: ItemLookup | None,
) -> tuple[pa.Table, np.ndarray] | None:
    """The summary's cells and each row's item position, when its layout says they are every
    item of `items` in order, each with epochs 0 .. k-1 (see `layout_of`); None otherwise.
    `item_id` and `epoch` are made from the positions, not read."""
    if items is None or not len(items.items):
        return None
    layout = opened.summary.layout
    groups = sorted(only) if only is not None else [""]
    if stage.name == GRADES.name and only is None:
        return None  # every generate condition's grades: placed per condition by the caller
    shapes = [layout.get(g) for g in groups]
    if any(
        shape is None
        or shape.get("epochs") is None
        or shape.get("items") != len(items.items)
        or shape.get("digest") != items.digest
        for shape in shapes
    ):
        return None
    order = items.sorted_order()
    positions = []
    epochs_of = []
    ids = []  # each shape's item ids, made only when asked for
    for shape in shapes:
        assert shape is not None
        k = int(shape["epochs"])  # type: ignore[call-overload]
        positions.append(np.repeat(order, k))
        epochs_of.append(np.tile(np.arange(k, dtype=np.int32), len(order)))
        if "item_id" in wanted:
            # One epoch: the ids in id order as they are (a gather of every id was 0.1 s a
            # partition at 1.25M items).
            ids.append(items.sorted_ids() if k == 1 else items.items.take(pa.array(positions[-1])))
    position = np.concatenate(positions)
    read = [c for c in wanted if c not in ("item_id", "epoch")]
    try:
        table = opened.cells(read, only)
    except (ValueError, TypeError, pa.ArrowException, OSError):
        return None
    if table.num_rows != len(position):
        return None  # not the layout the footer describes: read it the plain way
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name in wanted:
        if name == "epoch":
            columns[name] = pa.array(np.concatenate(epochs_of), pa.int32())
        elif name == "item_id":
            columns[name] = pa.chunked_array(ids, pa.string())
        else:
            columns[name] = table.column(name)
    schema = cells_schema(stage)
    return pa.table(columns, schema=pa.schema([schema.field(c) for c in wanted])), position


def _only(cells: pa.Table, generate: Collection[str] | None) -> pa.Table:
    if generate is None or cells.num_rows == 0:
        return cells
    return cells.filter(
        pc.is_in(cells.column("gen_condition_id"), pa.array(list(generate), pa.string()))
    )


@dataclass
class PartitionGroups:
    """A partition's cells counted by `group_columns` (`cell_groups`), and what its physical
    rows cost."""

    groups: pa.Table
    spent: pa.Table
    fragments: int = 0
    read_in_full: int = 0
    summary_used: bool = False


def read_groups(
    stage: Stage, partition: Location, *, generate: Collection[str] | None = None
) -> PartitionGroups:
    """The partition's cells counted (see `PartitionGroups`): from the summary's footer alone
    when it covers every fragment, else from the cells (`read_cells`)."""
    only = generate if stage.name == GRADES.name else None
    if summaries_enabled():
        for _ in range(_STALE_TRIES):
            opened = open_summary(partition, stage)
            if opened is None or opened.summary.groups is None:
                break
            summary = opened.summary
            listed = list_fragments(partition)
            names = {info.name for info in listed}
            if not set(summary.fragments) <= names:
                continue
            if len(names) != len(summary.fragments):
                break  # newer fragments: count the merged cells
            return PartitionGroups(
                _only(summary.groups, only),
                summary.spent,
                fragments=len(listed),
                summary_used=True,
            )
    read = read_cells(stage, partition, group_columns(stage) + list(GROUP_SUMS), generate=only)
    return PartitionGroups(
        cell_groups(stage, read.cells),
        read.spent,
        fragments=read.fragments,
        read_in_full=read.read_in_full,
        summary_used=read.summary_used,
    )


def _every_row(
    stage: Stage,
    partition: Location,
    needed: list[str],
    wanted: list[str],
    only: Collection[str] | None = None,
) -> PartitionCells:
    """The cells of every row of the partition (no summary), consistent beside compaction."""
    table, spent, read = _all_rows(stage, partition, only)
    names = table.column(FRAGMENT_NAME).cast(pa.string())
    cells = _only(rows_to_cells(stage, table, names).select(needed), only)
    return PartitionCells(
        best_cells(stage, cells).select(wanted),
        spent if only is None else SPENT_SCHEMA.empty_table(),
        fragments=read,
        read_in_full=read,
    )


def _all_rows(
    stage: Stage, partition: Location, generate: Collection[str] | None = None
) -> tuple[pa.Table, pa.Table, int]:
    """Every row of the partition (`row_columns` and `FRAGMENT_NAME`), what its physical rows
    cost (`paid_spent`), and how many fragments were read. With `generate` (grades), only the
    rows of those generate conditions: a fragment whose footer says it holds none of them is not
    read (a run's grade fragments hold one condition each), and the cost is of what was read."""
    notes: dict[str, FragmentCost] = {}

    def note(name: str, table: pa.Table) -> None:
        notes[name] = fragment_cost(stage, table)

    skip_if = reduce = None
    if generate is not None and stage.name == GRADES.name:
        wanted = sorted(generate)
        value_set = pa.array(wanted, pa.string())

        def skip_if(footer: pq.FileMetaData) -> bool:
            span = generate_span(footer)
            return span is not None and not any(span[0] <= g <= span[1] for g in wanted)

        def reduce(table: pa.Table) -> pa.Table:
            # Each row keeps its place in the fragment: the cells' `position` says where to
            # fetch the row from (the long table reads it there).
            placed = table.append_column(
                ROW_IN_FRAGMENT, pa.array(np.arange(table.num_rows, dtype=np.int64))
            )
            return placed.filter(pc.is_in(table.column("gen_condition_id"), value_set))

    tables = read_partitions(
        {"": partition},
        stage.schema,
        row_columns(stage),
        fragment_names=True,
        on_read=note,
        skip_if=skip_if,
        reduce=reduce,
    )
    table = tables[""]
    read = set(pc.unique(table.column(FRAGMENT_NAME).cast(pa.string())).to_pylist())
    return table, paid_spent({n: c for n, c in notes.items() if n in read}), len(read)


def _read_rows(
    stage: Stage, partition: Location, fragments: Sequence[FragmentInfo]
) -> tuple[pa.Table, dict[str, FragmentCost]] | None:
    """The cells rows (not deduplicated) of exactly `fragments` and what each cost; None when
    one of them vanished since it was listed."""
    if not fragments:
        return cells_schema(stage).empty_table(), {}
    tables = read_fragments(partition, fragments, stage.schema, row_columns(stage))
    if any(t is None for t in tables):
        return None
    parts = [rows_to_cells(stage, t, info.name) for t, info in zip(tables, fragments, strict=True)]
    costs = {
        info.name: fragment_cost(stage, t)
        for t, info in zip(tables, fragments, strict=True)
        if t is not None
    }
    return pa.concat_tables(parts), costs


def summarise_partition(stage: Stage, partition: Location) -> PartitionSummary:
    """A summary of the partition as it is now, made from every row (`compact
    --rebuild-summaries`); it covers the fragments it read."""
    table, spent, _ = _all_rows(stage, partition)
    names = table.column(FRAGMENT_NAME).cast(pa.string())
    cells = best_cells(stage, rows_to_cells(stage, table, names))
    counts = pc.value_counts(names)
    fragments = {
        str(v): int(c)
        for v, c in zip(
            counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True
        )
    }
    return PartitionSummary(stage, cells, fragments, spent)
