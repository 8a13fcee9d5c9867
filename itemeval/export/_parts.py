"""The long table in parts: per condition pair, files of at most `PART_ROWS` rows.

`long_table/grade_condition_id=<G>/gen_condition_id=<C>/part-NNNNN-<random>.parquet` (zstd, row
groups of `ROW_GROUP_ROWS`) and the same rows in `long_table_csv/.../part-NNNNN-<random>.csv`
(header, UTF-8, nulls as empty fields). The two condition ids are in the folder names (hive
partitioning, as the store keeps them), not in the files: a dataset reader (pyarrow, DuckDB,
polars, Spark) adds them back as columns; `read_long_table` returns the table in the long
table's own column order and types.

An export of a changed pair writes new parts only: the rows that are new or changed, and the
rows still current of the parts that held a changed or removed row (those parts are replaced),
so no superseded row survives in a part, and parts of unchanged rows are not touched. A small
newest part (fewer than `PART_ROWS / 20` rows) is filled up rather than followed by another, so
repeated small exports do not leave many small files.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from itemeval.export._manifest import CSV_DIR, PART_ROWS, TABLE_DIR, Commit, PartRecord, pair_folder
from itemeval.export._outputs import OutputDir, OutputFile
from itemeval.results import LONG_TABLE_SCHEMA
from itemeval.storage import resolve

TABLE_FORMATS = ("parquet", "csv")
#: The columns the folder names say (hive partitions), not written inside the parts.
PARTITION_COLUMNS = ("grade_condition_id", "gen_condition_id")
PART_SCHEMA = pa.schema(
    [f for f in LONG_TABLE_SCHEMA if f.name not in PARTITION_COLUMNS],
    metadata=LONG_TABLE_SCHEMA.metadata,
)
#: Rows per parquet row group.
ROW_GROUP_ROWS = 64 * 1024
_ROOTS = {"parquet": TABLE_DIR, "csv": CSV_DIR}


def key_strings(item_ids: pa.Array | pa.ChunkedArray, epochs: pa.Array | pa.ChunkedArray) -> Any:
    """`item_id \\x1f epoch` per row: one string a key, for set membership."""
    return pc.binary_join_element_wise(item_ids, pc.cast(epochs, pa.string()), "\x1f")


class PairParts:
    """The parts one export writes for one pair (see the module doc)."""

    def __init__(
        self,
        out: OutputDir,
        commit: Commit,
        grade: str,
        generate: str,
        formats: Sequence[str],
        next_part: int,
    ) -> None:
        self.out = out
        self.commit = commit
        self.formats = [f for f in TABLE_FORMATS if f in formats]
        self.folders = {f: pair_folder(_ROOTS[f], grade, generate) for f in self.formats}
        self.next_part = next_part
        self.part_rows = PART_ROWS
        self.records: list[PartRecord] = []
        self._placed: list[pa.Table] = []  # item_id, epoch, part of every row written
        self._current: _OpenPart | None = None

    # -- rows in --------------------------------------------------------------------------
    def copy(self, part: PartRecord, drop: pa.Array) -> None:
        """The rows of an earlier part, less those whose key (`key_strings`) is in `drop`."""
        for batch in _read_part(self.out, part):
            table = pa.Table.from_batches([batch])
            if len(drop):
                keys = key_strings(table.column("item_id"), table.column("epoch"))
                table = table.filter(pc.invert(pc.is_in(keys, value_set=drop)))
            self._append(table)

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Long-table rows (`LONG_TABLE_SCHEMA`) of this pair."""
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        self._append(table.select(PART_SCHEMA.names))

    def _append(self, table: pa.Table) -> None:
        while table.num_rows:
            if self._current is None:
                self._current = self._open()
            room = self.part_rows - self._current.rows
            piece, table = table.slice(0, room), table.slice(room)
            self._current.write(piece)
            self._placed.append(
                pa.table(
                    {
                        "item_id": piece.column("item_id"),
                        "epoch": piece.column("epoch"),
                        "part": pa.repeat(pa.scalar(self._current.id, pa.int32()), piece.num_rows),
                    }
                )
            )
            if self._current.rows >= self.part_rows:
                self._close_current()

    def _open(self) -> _OpenPart:
        part_id = self.next_part
        self.next_part += 1
        suffix = np.random.default_rng().integers(0, 1 << 32)
        name = f"part-{part_id:05d}-{suffix:08x}"
        files = {f: f"{self.folders[f]}/{name}.{f}" for f in self.formats}
        return _OpenPart(part_id, {f: (path, self.commit.stage(path)) for f, path in files.items()})

    def _close_current(self) -> None:
        current, self._current = self._current, None
        if current is None:
            return
        current.close(self.commit)
        if current.rows:
            self.records.append(
                PartRecord(
                    id=current.id,
                    rows=current.rows,
                    files={f: p for f, (p, _) in current.files.items()},
                )
            )

    # -- done -----------------------------------------------------------------------------
    def close(self) -> pa.Table:
        """Finish the open part; the part of every row written (item_id, epoch, part)."""
        self._close_current()
        if not self._placed:
            return pa.table(
                {
                    "item_id": pa.array([], pa.string()),
                    "epoch": pa.array([], pa.int32()),
                    "part": pa.array([], pa.int32()),
                }
            )
        return pa.concat_tables(self._placed)

    def abort(self) -> None:
        if self._current is not None:
            self._current.abort()
            self._current = None


class _OpenPart:
    """One part being written, in each format."""

    def __init__(self, part_id: int, files: dict[str, tuple[str, OutputFile]]) -> None:
        self.id = part_id
        self.files = files
        self.rows = 0
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._parquet = (
            pq.ParquetWriter(files["parquet"][1].handle, PART_SCHEMA, compression="zstd")
            if "parquet" in files
            else None
        )
        self._csv = pacsv.CSVWriter(files["csv"][1].handle, PART_SCHEMA) if "csv" in files else None

    def write(self, table: pa.Table) -> None:
        table = table.cast(PART_SCHEMA) if not table.schema.equals(PART_SCHEMA) else table
        self.rows += table.num_rows
        if self._csv is not None:
            self._csv.write_table(table)
        if self._parquet is not None:
            self._pending.append(table)
            self._pending_rows += table.num_rows
            if self._pending_rows >= ROW_GROUP_ROWS:
                self._flush()

    def _flush(self) -> None:
        if self._pending and self._parquet is not None:
            table = pa.concat_tables(self._pending)
            self._parquet.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self._pending, self._pending_rows = [], 0

    def close(self, commit: Commit) -> None:
        self._flush()
        if self._parquet is not None:
            self._parquet.close()
        if self._csv is not None:
            self._csv.close()
        for path, file in self.files.values():
            commit.done(file, path)

    def abort(self) -> None:
        self._pending = []
        for writer in (self._parquet, self._csv):
            if writer is not None:
                with contextlib.suppress(Exception):  # the original error is what matters
                    writer.close()
        for _, file in self.files.values():
            file.discard()


def _read_part(out: OutputDir, part: PartRecord) -> Iterator[pa.RecordBatch]:
    """An earlier part's rows, a row group (or a CSV block) at a time: from its parquet file
    when there is one, else from its CSV file."""
    if "parquet" in part.files:
        location = out.location(part.files["parquet"])
        source: Any = location.path if location.is_local else location.open("rb")
        parquet = pq.ParquetFile(source)
        yield from parquet.iter_batches(batch_size=ROW_GROUP_ROWS, use_threads=False)
        return
    location = out.location(part.files["csv"])
    with location.open("rb") as handle:
        reader = pacsv.open_csv(
            handle,
            read_options=pacsv.ReadOptions(block_size=16 << 20),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=csv_convert_options(),
        )
        yield from reader


def csv_convert_options() -> pacsv.ConvertOptions:
    """How the long table's CSV reads back with its own types."""
    return pacsv.ConvertOptions(
        column_types={f.name: f.type for f in LONG_TABLE_SCHEMA},
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )


def read_long_table(
    url: str, *, storage_options: dict[str, Any] | None = None, csv: bool = False
) -> pa.Table:
    """An exported long table read whole, with `LONG_TABLE_SCHEMA` (its columns, in order):
    `url` is the export folder (`--out`) or its `long_table/` (`long_table_csv/` with
    `csv=True`) folder. Held in memory: for a large study, read the folder with a dataset
    reader (DuckDB, `pyarrow.dataset`) instead."""
    location = resolve(url, storage_options)
    root = _ROOTS["csv" if csv else "parquet"]
    if location.name != root:
        location = location.join(root)
    partitioning = ds.partitioning(
        pa.schema([LONG_TABLE_SCHEMA.field(c) for c in PARTITION_COLUMNS]), flavor="hive"
    )
    if csv:
        file_format: ds.FileFormat = ds.CsvFileFormat(
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=csv_convert_options(),
        )
    else:
        file_format = ds.ParquetFileFormat()
    if not location.exists():
        return LONG_TABLE_SCHEMA.empty_table()
    dataset = ds.dataset(
        location.path,
        filesystem=location.fs,
        format=file_format,
        partitioning=partitioning,
        schema=LONG_TABLE_SCHEMA,
    )
    return dataset.to_table().select(LONG_TABLE_SCHEMA.names)
