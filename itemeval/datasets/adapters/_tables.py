"""Streaming rows out of tabular files: JSON Lines, CSV (with or without a header) and parquet.

Every reader yields `(Where, row)` pairs, where a row is a dict of column values or, for a line
that cannot be read, a `Problem`. Files are streamed (JSONL in 1 MiB chunks, CSV line by line,
parquet in record batches within row groups), so memory does not grow with the file.
`required` names the columns the mapping reads: readers that know the columns up front (CSV
header, parquet schema) check them before the first row and report a missing one once.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from typing import Any

from itemeval.datasets.adapters._mapping import column_hint
from itemeval.datasets.format import Where
from itemeval.datasets.format._records import UTF8_BOM, UTF8_HINT, iter_jsonl, iter_lines
from itemeval.errors import Problem
from itemeval.storage import Location

Row = tuple[Where, dict[str, Any] | Problem]
PARQUET_BATCH_ROWS = 4096


def iter_jsonl_rows(location: Location) -> Iterator[Row]:
    for where, record in iter_jsonl(location):
        if isinstance(record, Problem | dict):
            yield where, record
        else:
            yield where, where.error(f"expected a JSON object, found a {type(record).__name__}")


def iter_csv_rows(
    location: Location,
    *,
    columns: Sequence[str] | None,
    header: bool,
    delimiter: str,
    required: Sequence[tuple[str, str]] = (),
) -> Iterator[Row]:
    """CSV records as dicts. `columns` names headerless columns (or renames a header);
    a UTF-8 byte order mark is skipped (spreadsheets write one)."""
    base = Where(file=location.url)
    names: list[str] | None = list(columns) if columns else None
    if not header:
        if names is None:
            yield (
                base,
                base.error(
                    "a CSV without a header needs `columns:` in the mapping",
                    field="mapping.columns",
                ),
            )
            return
        problem = _check_columns(names, required, base.at(line=1))
        if problem is not None:
            yield base, problem
            return
    expect_header = header
    reader = csv.reader(_decoded_lines(location), delimiter=delimiter)
    previous_end = 0
    try:
        for record in reader:
            where = base.at(line=previous_end + 1)
            previous_end = reader.line_num
            if not record or record == [""]:
                continue
            if expect_header:
                names, problem = _header_names(record, names, where)
                if problem is None:
                    problem = _check_columns(names, required, where)
                if problem is not None:
                    yield where, problem
                    return
                expect_header = False
                continue
            assert names is not None
            if len(record) != len(names):
                yield (
                    where,
                    where.error(
                        f"expected {len(names)} columns ({', '.join(names)}), found {len(record)}",
                        hint="check the quoting of fields that contain commas or newlines",
                    ),
                )
                continue
            yield where, dict(zip(names, record, strict=True))
    except _NotUtf8 as exc:
        where = base.at(line=exc.line)
        yield (
            where,
            where.error(
                f"not valid UTF-8 text (byte 0x{exc.byte:02x} at column {exc.column})",
                hint=UTF8_HINT,
            ),
        )
    except csv.Error as exc:
        where = base.at(line=previous_end + 1)
        yield where, where.error(f"not valid CSV: {exc}")


def iter_parquet_rows(
    location: Location, required: Sequence[tuple[str, str]] = ()
) -> Iterator[Row]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = Where(file=location.url)
    with location.open("rb") as handle:
        try:
            parquet = pq.ParquetFile(handle)
        except (pa.ArrowInvalid, OSError) as exc:
            yield base, base.error(f"not a readable parquet file: {exc}")
            return
        problem = _check_columns(parquet.schema_arrow.names, required, base)
        if problem is not None:
            yield base, problem
            return
        row_number = 0
        for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS):
            for row in batch.to_pylist():
                row_number += 1
                yield base.at(line=row_number), row


class _NotUtf8(Exception):
    def __init__(self, line: int, byte: int, column: int):
        self.line, self.byte, self.column = line, byte, column


def _decoded_lines(location: Location) -> Iterator[str]:
    """The file's lines as text with their line ends, for `csv.reader` (which counts them, so
    `line_num` stays the physical line number). Decoding per line locates a bad byte exactly."""
    for line_no, raw in iter_lines(location):
        if line_no == 1 and raw.startswith(UTF8_BOM):
            raw = raw[len(UTF8_BOM) :]
        try:
            yield raw.decode("utf-8") + "\n"
        except UnicodeDecodeError as exc:
            raise _NotUtf8(line_no, raw[exc.start], exc.start + 1) from None


def _header_names(
    record: list[str], names: list[str] | None, where: Where
) -> tuple[list[str], Problem | None]:
    header = [name.strip() for name in record]
    if names is None:
        if len(set(header)) != len(header):
            return header, where.error(
                "the header names a column twice",
                hint="rename it, or give `columns:` in the mapping",
            )
        return header, None
    if len(names) != len(header):
        return names, where.error(
            f"`columns:` gives {len(names)} names but the header has {len(header)} columns",
            field="mapping.columns",
        )
    return names, None


def _check_columns(
    names: Sequence[str], required: Sequence[tuple[str, str]], where: Where
) -> Problem | None:
    present = set(names)
    missing = [(field, column) for field, column in required if column not in present]
    if not missing:
        return None
    listed = "; ".join(f"mapping.{field} names column {column!r}" for field, column in missing)
    return where.error(
        f"{listed}, which the file does not have (its columns: {', '.join(names)})",
        field=f"mapping.{missing[0][0]}",
        hint=column_hint(*missing[0]),
    )
