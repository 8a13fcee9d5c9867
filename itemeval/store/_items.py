"""The items snapshot: a dataset's work items, frozen in the store at the fingerprint used.

```
items/<dataset>/<fingerprint16>/part-00000.parquet    ITEM_SCHEMA, ITEMS_PER_PART rows a part
items/<dataset>/<fingerprint16>/_complete.json        written last, once: parts and rows
```

Workers read single parts by index, so a million items never travel through the driver. A
snapshot is usable iff `_complete.json` exists. Parts are a pure function of the items (fixed
part size), so a second writer of the same fingerprint rewrites identical bytes, and only one
`_complete.json` is ever created (`Location.create_exclusive`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa

from itemeval.datasets import ITEM_SCHEMA
from itemeval.errors import Problem, StoreError
from itemeval.storage import Location
from itemeval.store._layout import StudyStore
from itemeval.store._schemas import check_table
from itemeval.store.fragments import encode_fragment, read_parquet_file, read_partitions

ITEMS_PER_PART = 10_000
COMPLETE_MARKER = "_complete.json"
SNAPSHOT_FORMAT = "itemeval-items/1"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """A complete items snapshot: where it is, how many parts and rows it has."""

    dataset: str
    fingerprint: str
    parts: int
    rows: int
    location: Location

    def part(self, index: int) -> Location:
        if not 0 <= index < self.parts:
            raise StoreError(
                Problem(
                    f"items part {index} does not exist (the snapshot has {self.parts} parts)",
                    file=self.location.url,
                )
            )
        return self.location.join(part_name(index))


def part_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def fingerprint16(fingerprint: str) -> str:
    """The directory name of a fingerprint: its first 16 characters (after any `algo:` prefix)."""
    digest = fingerprint.rsplit(":", 1)[-1]
    if len(digest) < 8 or not digest.isalnum():
        raise StoreError(
            Problem(
                f"{fingerprint!r} is not a content fingerprint",
                field="fingerprint",
                hint="pass the dataset's hex digest (e.g. from itemeval.datasets._locks)",
            )
        )
    return digest[:16]


def snapshot_location(store: StudyStore, dataset: str, fingerprint: str) -> Location:
    if not _SAFE_NAME.match(dataset):
        raise StoreError(
            Problem(
                f"dataset name {dataset!r} cannot name a directory",
                field="dataset",
                hint="use letters, digits and . _ -",
            )
        )
    return store.items.join(dataset, fingerprint16(fingerprint))


def read_snapshot_info(store: StudyStore, dataset: str, fingerprint: str) -> SnapshotInfo | None:
    """The complete snapshot of `dataset` at `fingerprint`, or None if there is none yet."""
    location = snapshot_location(store, dataset, fingerprint)
    marker = location.join(COMPLETE_MARKER)
    marker.parent().invalidate()
    try:
        data = json.loads(marker.read_text())
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreError(Problem(f"not a snapshot marker: {exc}", file=marker.url)) from exc
    try:
        return SnapshotInfo(dataset, fingerprint, int(data["parts"]), int(data["rows"]), location)
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(Problem(f"snapshot marker lacks {exc}", file=marker.url)) from exc


def write_items_snapshot(
    store: StudyStore,
    dataset: str,
    fingerprint: str,
    batches: Iterable[pa.Table | pa.RecordBatch],
    *,
    rows_per_part: int = ITEMS_PER_PART,
) -> SnapshotInfo:
    """Write the snapshot from a stream of `ITEM_SCHEMA` batches (or return the existing one).

    Memory holds at most one part plus one incoming batch. A batch of another schema is a
    `StoreError` and leaves no `_complete.json` (the snapshot stays unusable).
    """
    existing = read_snapshot_info(store, dataset, fingerprint)
    if existing is not None:
        return existing
    location = snapshot_location(store, dataset, fingerprint)
    pending: list[pa.Table] = []
    buffered = 0
    parts = 0
    rows = 0

    def flush(table: pa.Table) -> None:
        nonlocal parts, rows
        location.join(part_name(parts)).write_atomic(encode_fragment(table))
        parts += 1
        rows += table.num_rows

    for batch in batches:
        table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        table = check_table(table, ITEM_SCHEMA, what=f"items of {dataset}")
        pending.append(table)
        buffered += table.num_rows
        while buffered >= rows_per_part:
            merged = pa.concat_tables(pending)
            flush(merged.slice(0, rows_per_part))
            rest = merged.slice(rows_per_part)
            pending, buffered = [rest], rest.num_rows
    if buffered:
        flush(pa.concat_tables(pending))
    marker = {
        "format": SNAPSHOT_FORMAT,
        "dataset": dataset,
        "fingerprint": fingerprint,
        "parts": parts,
        "rows": rows,
        "rows_per_part": rows_per_part,
        "written_at": datetime.now(UTC).isoformat(),
    }
    location.join(COMPLETE_MARKER).create_exclusive(json.dumps(marker, indent=2).encode())
    # Whoever created the marker first, the parts are the same; report what is stored.
    info = read_snapshot_info(store, dataset, fingerprint)
    if info is None:  # pragma: no cover - the marker was just created or found
        raise StoreError(Problem("snapshot marker vanished", file=location.url))
    return info


def read_items_part(info: SnapshotInfo, index: int, columns: list[str] | None = None) -> pa.Table:
    """Part `index` of a snapshot (what one worker reads)."""
    table = read_parquet_file(info.part(index), columns)
    if columns is None:
        table = check_table(table, ITEM_SCHEMA, what=info.part(index).url)
    return table


def read_item_ids(info: SnapshotInfo) -> pa.Array:
    """All item ids of a snapshot in part order, reading only the `item_id` column."""
    table = read_partitions({"": info.location}, ITEM_SCHEMA, ["item_id"])[""]
    if table.num_rows != info.rows:
        raise StoreError(
            Problem(
                f"snapshot has {table.num_rows} rows, its marker says {info.rows}",
                file=info.location.url,
            )
        )
    return table.column("item_id").combine_chunks()


def read_items(info: SnapshotInfo, columns: list[str] | None = None) -> pa.Table:
    """The whole snapshot (small datasets, tests, exports)."""
    names = columns or list(ITEM_SCHEMA.names)
    table = read_partitions({"": info.location}, ITEM_SCHEMA, names)[""]
    return table.select(names)
