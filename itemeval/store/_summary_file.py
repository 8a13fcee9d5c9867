"""A partition's summary file (`<partition>/_summary`): its cells, the fragments they cover and
what those fragments' physical rows cost, written and read back (`_summary` reads cells through
it; the contract is in `_summary`'s docstring)."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval.storage import Location
from itemeval.store._cells import (
    SPENT_SCHEMA,
    cell_groups,
    cells_schema,
    groups_from_json,
    groups_to_json,
    spent_from_json,
    spent_to_json,
)
from itemeval.store._layout import GRADES, Stage
from itemeval.store._positions import ids_digest
from itemeval.store.fragments import (
    open_parquet,
)

#: A parquet file named without `.parquet`: other tools' globs of a partition's fragments
#: (`solutions/*/*.parquet`: DuckDB reads `_`-names, pyarrow skips them) never take it for one.
SUMMARY_FILE = "_summary"
SUMMARY_VERSION = 1
#: The metadata key of a summary.
SUMMARY_KEY = b"itemeval.summary"


# -- the summary file --------------------------------------------------------------------------


@dataclass
class PartitionSummary:
    """A partition's cells, the fragments they cover (name -> physical rows) and what those
    fragments' physical rows cost."""

    stage: Stage
    cells: pa.Table
    fragments: dict[str, int]
    spent: pa.Table = field(default_factory=SPENT_SCHEMA.empty_table)
    groups: pa.Table | None = None  # `cell_groups` of the cells, as written (read back only)
    layout: dict[str, dict[str, object]] = field(default_factory=dict)  # `layout_of`, read back

    @property
    def rows(self) -> int:
        """Physical rows of the covered fragments."""
        return sum(self.fragments.values())


def encode_summary(summary: PartitionSummary) -> bytes:
    meta = {
        "version": SUMMARY_VERSION,
        "stage": summary.stage.name,
        "fragments": summary.fragments,
        "spent": spent_to_json(summary.spent),
        "groups": groups_to_json(cell_groups(summary.stage, summary.cells)),
        "layout": layout_of(summary.stage, summary.cells),
    }
    cells = _sorted_by_key(summary.stage, summary.cells.select(cells_schema(summary.stage).names))
    cells = cells.replace_schema_metadata({SUMMARY_KEY: json.dumps(meta).encode()})
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, cells.schema, compression="zstd", write_statistics=True) as out:
        # Row groups of one generate condition at most (grades, sorted by it): a reader of
        # one condition's cells skips the rest.
        for part in _by_generate_condition(summary.stage, cells):
            out.write_table(part, row_group_size=_SUMMARY_ROW_GROUP)
    return sink.getvalue()


_SUMMARY_ROW_GROUP = 1 << 17


def layout_of(stage: Stage, cells: pa.Table) -> dict[str, dict[str, object]]:
    """Per generate condition (grades) or for the whole (solutions, key ""), sorted cells: how
    many rows, which items (`ids_digest` of the distinct ids in order) and, when every item has
    the epochs 0 .. k-1 and no other, k. A reader whose selection is those items places every
    cell without reading an id: row i is the selection's i // k-th id in order, epoch i % k."""
    out: dict[str, dict[str, object]] = {}
    if cells.num_rows == 0:
        return out
    parts = _by_generate_condition(stage, _sorted_by_key(stage, cells))
    for part in parts:
        key = part.column("gen_condition_id")[0].as_py() if stage.name == GRADES.name else ""
        ids = part.column("item_id").combine_chunks()
        n = len(ids)
        starts = np.concatenate(
            (
                [0],
                np.flatnonzero(
                    pc.not_equal(ids.slice(1), ids.slice(0, n - 1)).to_numpy(zero_copy_only=False)
                )
                + 1,
            )
        )
        items = len(starts)
        epochs: int | None = n // items if n % items == 0 else None
        if epochs is not None:
            epoch = part.column("epoch").to_numpy()
            if not np.array_equal(epoch, np.tile(np.arange(epochs, dtype=epoch.dtype), items)):
                epochs = None
        out[str(key)] = {
            "rows": n,
            "items": items,
            "epochs": epochs,
            "digest": ids_digest(ids.take(pa.array(starts))),
        }
    return out


def _sorted_by_key(stage: Stage, cells: pa.Table) -> pa.Table:
    order = pc.sort_indices(cells, [(k, "ascending") for k in stage.keys])
    return cells.take(order)


def _by_generate_condition(stage: Stage, cells: pa.Table) -> list[pa.Table]:
    if stage.name != GRADES.name or cells.num_rows == 0:
        return [cells]
    gens = cells.column("gen_condition_id")
    starts = [0]
    changes = pc.not_equal(gens.slice(1), gens.slice(0, cells.num_rows - 1))
    starts += [int(i) + 1 for i in np.flatnonzero(changes.to_numpy(zero_copy_only=False))]
    bounds = [*starts, cells.num_rows]
    return [cells.slice(a, b - a) for a, b in itertools.pairwise(bounds)]


def write_summary(partition: Location, summary: PartitionSummary) -> None:
    partition.join(SUMMARY_FILE).write_atomic(encode_summary(summary))


class SummaryFile:
    """An open summary: its footer read (what it covers, what it cost, its counts), its cells
    read on demand (`cells`)."""

    def __init__(self, stage: Stage, parquet: pq.ParquetFile, summary: PartitionSummary):
        self.stage = stage
        self.parquet = parquet
        self.summary = summary  # without cells

    def cells(
        self, columns: Sequence[str] | None = None, generate: Collection[str] | None = None
    ) -> pa.Table:
        """Its cells, `columns` only (None: all); of grades, only the `generate` conditions'
        when given (whole row groups are skipped: a row group is one condition's)."""
        chosen = list(columns) if columns is not None else list(self.parquet.schema_arrow.names)
        if generate is None or self.stage.name != GRADES.name:
            return self.parquet.read(columns=chosen).replace_schema_metadata(None)
        wanted = set(generate)
        groups, pure = _row_groups_of(self.parquet, wanted)
        if pure:  # every row group chosen is one wanted condition's: no filter
            return self.parquet.read_row_groups(groups, columns=chosen).replace_schema_metadata(
                None
            )
        extra = [] if "gen_condition_id" in chosen else ["gen_condition_id"]
        table = self.parquet.read_row_groups(groups, columns=[*chosen, *extra])
        table = table.filter(
            pc.is_in(table.column("gen_condition_id"), pa.array(sorted(wanted), pa.string()))
        )
        return table.select(chosen).replace_schema_metadata(None)


def open_summary(partition: Location, stage: Stage) -> SummaryFile | None:
    """The partition's summary with its footer read; None when there is none, or it cannot be
    read (it is derived data: the rows are read instead)."""
    location = partition.join(SUMMARY_FILE)
    try:
        if location.is_local:
            parquet = open_parquet(location.path)
        else:
            parquet = pq.ParquetFile(location.fs.open(location.path, "rb"), pre_buffer=True)
        summary = _summary_of(stage, parquet.schema_arrow.metadata, None)
    except FileNotFoundError:
        return None
    except (KeyError, ValueError, TypeError, pa.ArrowException, OSError):
        return None
    return None if summary is None else SummaryFile(stage, parquet, summary)


def read_summary(
    partition: Location,
    stage: Stage,
    columns: Sequence[str] | None = None,
    *,
    generate: Collection[str] | None = None,
) -> PartitionSummary | None:
    """The partition's summary, `columns` of its cells only (None: all; an empty list: none,
    only the footer is read), for grades only the rows of the `generate` conditions when given;
    None when the partition has none or it cannot be read."""
    opened = open_summary(partition, stage)
    if opened is None:
        return None
    summary = opened.summary
    if columns is not None and not columns:
        return summary
    try:
        cells = opened.cells(columns, generate)
    except (ValueError, TypeError, pa.ArrowException, OSError):
        return None
    return PartitionSummary(stage, cells, summary.fragments, summary.spent, summary.groups)


def _row_groups_of(parquet: pq.ParquetFile, generate: set[str]) -> tuple[list[int], bool]:
    """The row groups that may hold a row of the `generate` conditions (by their statistics),
    and whether each of them holds only one wanted condition's rows."""
    meta = parquet.metadata
    column = parquet.schema_arrow.get_field_index("gen_condition_id")
    chosen = []
    pure = True
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max:
            chosen.append(g)
            pure = False
            continue
        low, high = str(stats.min), str(stats.max)
        if any(low <= cid <= high for cid in generate):
            chosen.append(g)
            pure = pure and low == high and low in generate
    return chosen, pure


def _summary_of(
    stage: Stage, metadata: Mapping[bytes, bytes] | None, table: pa.Table | None
) -> PartitionSummary | None:
    meta = json.loads((metadata or {})[SUMMARY_KEY])
    if meta.get("version") != SUMMARY_VERSION or meta.get("stage") != stage.name:
        return None
    cells = cells_schema(stage).empty_table() if table is None else table
    return PartitionSummary(
        stage,
        cells.replace_schema_metadata(None),
        {str(k): int(v) for k, v in meta["fragments"].items()},
        spent_from_json(meta.get("spent", [])),
        groups_from_json(stage, meta.get("groups", [])),
        dict(meta.get("layout", {})),
    )


def remove_summary(partition: Location) -> None:
    partition.join(SUMMARY_FILE).delete(missing_ok=True)


def covered_rows(summaries: Mapping[str, PartitionSummary]) -> int:
    return sum(s.rows for s in summaries.values())
