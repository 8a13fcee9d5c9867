"""The items' per-item tables kept beside their snapshot, so a re-run plans without rendering.

Planning renders every selected item through every prompt and rubric to count its tokens (the
estimate's prior, `_tokens.py`), and reads every item to count modalities. Both depend only on
the items (the snapshot's fingerprint) and on the template and output-length parameters, so a
run keeps them beside the items snapshot when it commits its plan:

    items/<dataset>/<fingerprint16>/_tables-<key>

(parquet files without the `.parquet` suffix, so that no glob of the snapshot's parts, ours
or another tool's, takes them for items), one file per solver shape (`input`, `output`,
`visible` per item), per rubric (`input`) and one for the modality of every item (`modality`,
with the names and key counts in the file's metadata); `key` hashes what the counts depend on
and `TABLES_VERSION`. A file covers the dataset's first `rows` items
(a `--limit` run counts only those). They are derived data: a missing, short or unreadable file
is computed again from the items, and `plan` only reads them (a run writes them).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from itemeval.ids import sha256_hex
from itemeval.storage import Location
from itemeval.store import SnapshotInfo

#: Bump when the counting changes (`_tokens.py`): older files are then not used.
TABLES_VERSION = 1
_PREFIX = "_tables-"
_META = b"itemeval.item_tables"


def table_key(*parts: object) -> str:
    """The file key of a table that depends on `parts` (template hashes, parameters)."""
    return sha256_hex(json.dumps([TABLES_VERSION, *parts], default=str))[:24]


def _location(snapshot: SnapshotInfo, key: str) -> Location:
    return snapshot.location.join(f"{_PREFIX}{key}")


def read_item_table(
    snapshot: SnapshotInfo, key: str, rows: int
) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """The table's columns over the dataset's first `rows` items and its metadata (JSON), or None
    when the snapshot has no such table covering them."""
    location = _location(snapshot, key)
    try:
        source = location.path if location.is_local else pa.BufferReader(location.read_bytes())
        table = pq.read_table(source)
        meta = json.loads((table.schema.metadata or {})[_META])
    except (FileNotFoundError, KeyError, ValueError, pa.ArrowException, OSError):
        return None
    if meta.get("version") != TABLES_VERSION or table.num_rows < rows:
        return None
    columns = {
        name: table.column(name).to_numpy()[:rows].astype(np.int32) for name in table.column_names
    }
    return columns, meta


def write_item_table(
    snapshot: SnapshotInfo,
    key: str,
    columns: Mapping[str, np.ndarray],
    meta: Mapping[str, object] | None = None,
) -> None:
    """Write a table (replacing one that covers fewer items)."""
    rows = {len(c) for c in columns.values()}
    if len(rows) != 1:
        raise ValueError("columns of an item table must have one length")
    (count,) = rows
    existing = read_item_table(snapshot, key, count)
    if existing is not None:
        return
    table = pa.table({name: pa.array(np.asarray(c, np.int32)) for name, c in columns.items()})
    info = {"version": TABLES_VERSION, "rows": count, **(meta or {})}
    table = table.replace_schema_metadata({_META: json.dumps(info).encode()})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    _location(snapshot, key).write_atomic(sink.getvalue())
