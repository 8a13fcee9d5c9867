"""What changed in a condition pair since the last export: its rows against the key index.

The key index of a pair (`_export/<grade>/<generate>/keys-*.parquet`, one per export that
changed the pair) has one row per exported row: its key, dataset and fingerprint
(`_table.pairs`), the long-table part that holds it, and what the Every Eval Ever writer needs
(`_eee.writer.EEE_INDEX_FIELDS`: whether it is a sample line, where the line is, its tally).

`diff` joins the pair's current rows with the index by key: a current row is **new** (no
indexed row), **changed** (another fingerprint) or unchanged; an indexed row is **removed**
when it changed or left (its key is no longer stored or selected).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval.export._eee.writer import EEE_INDEX_FIELDS
from itemeval.export._outputs import OutputDir
from itemeval.export._table.pairs import KEY

KEY_INDEX_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string()),
        pa.field("epoch", pa.int32()),
        pa.field("dataset", pa.string()),
        pa.field("fp", pa.uint64()),
        pa.field("part", pa.int32()),  # null: no table format exported
        *EEE_INDEX_FIELDS,  # null: Every Eval Ever not exported
    ]
)
UNCHANGED, CHANGED, NEW = 0, 1, 2


@dataclass
class PairDelta:
    """`state` per current row (UNCHANGED, CHANGED, NEW) and `removed` per indexed row."""

    state: np.ndarray
    removed: np.ndarray

    @property
    def any(self) -> bool:
        return bool((self.state != UNCHANGED).any() or self.removed.any())


def diff(current: pa.Table, index: pa.Table | None) -> PairDelta:
    """Compare the pair's rows (`item_id, epoch, fp`) with its key index (see the module
    doc)."""
    n = current.num_rows
    if index is None or index.num_rows == 0:
        m = 0 if index is None else index.num_rows
        return PairDelta(np.full(n, NEW, dtype=np.int8), np.zeros(m, dtype=bool))
    m = index.num_rows
    left = pa.table(
        {
            "item_id": current.column("item_id"),
            "epoch": current.column("epoch"),
            "fp": current.column("fp"),
            "i": pa.array(np.arange(n, dtype=np.int64)),
        }
    )
    right = pa.table(
        {
            "item_id": index.column("item_id"),
            "epoch": index.column("epoch"),
            "was": index.column("fp"),
            "j": pa.array(np.arange(m, dtype=np.int64)),
        }
    )
    joined = left.join(right, KEY, join_type="full outer")
    i = joined.column("i")
    j = joined.column("j")
    same = pc.fill_null(pc.equal(joined.column("fp"), joined.column("was")), False)
    state = np.full(n, NEW, dtype=np.int8)
    both = pc.and_(pc.is_valid(i), pc.is_valid(j))
    matched = joined.filter(both)
    rows = matched.column("i").to_numpy().astype(np.int64)
    equal = same.filter(both).to_numpy(zero_copy_only=False)
    state[rows] = np.where(equal, UNCHANGED, CHANGED)
    removed = np.ones(m, dtype=bool)
    kept = joined.filter(pc.and_(both, same)).column("j").to_numpy().astype(np.int64)
    removed[kept] = False
    return PairDelta(state, removed)


def read_index(out: OutputDir, path: str) -> pa.Table:
    location = out.location(path)
    source = location.path if location.is_local else location.open("rb")
    return pq.read_table(source, schema=KEY_INDEX_SCHEMA)


def encode_index(index: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(
        index.select(KEY_INDEX_SCHEMA.names).cast(KEY_INDEX_SCHEMA), sink, compression="zstd"
    )
    return bytes(sink.getvalue().to_pybytes())


def assemble_index(current: pa.Table, parts: pa.Table | None, eee: pa.Table | None) -> pa.Table:
    """The pair's new key index: its rows (`item_id, epoch, dataset, fp`) with their part
    (`item_id, epoch, part`) and Every Eval Ever fields (`EEE_INDEX_SCHEMA`), each by key."""
    table = current.select(["item_id", "epoch", "dataset", "fp"])
    if parts is not None and parts.num_rows:
        table = table.join(parts.select([*KEY, "part"]), KEY, join_type="left outer")
    if eee is not None and eee.num_rows:
        fields = [f.name for f in EEE_INDEX_FIELDS]
        table = table.join(eee.select([*KEY, *fields]), KEY, join_type="left outer")
    n = table.num_rows
    for f in KEY_INDEX_SCHEMA:
        if f.name not in table.column_names:
            table = table.append_column(f, pa.nulls(n, f.type))
    return table.select(KEY_INDEX_SCHEMA.names).cast(KEY_INDEX_SCHEMA)
