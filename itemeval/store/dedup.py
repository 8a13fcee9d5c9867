"""Deduplication: one logical row per key, chosen by the store's rule, fully vectorised.

The rule (`docs/architecture.md`, "Row keys and deduplication"): among the physical rows of a
key, `status == "ok"` beats `"error"`, then the later `written_at`, then the later fragment (its
ordinal in name order, which is write order). One sort by key and preference, then a mask of the
first row of each run of equal keys; no Python loop over rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.store.fragments import FRAGMENT_ORDINAL
from itemeval.store.schemas import STATUS_OK

_PREFER_OK = "_prefer_ok"


def best_row_indices(table: pa.Table, keys: Sequence[str]) -> pa.Array:
    """Indices (sorted by key) of the best row of every key of `table`.

    Tie-breaking columns are used when present: `status`, `written_at`, `FRAGMENT_ORDINAL`.
    """
    n = table.num_rows
    if n == 0:
        return pa.array([], type=pa.int64())
    columns: dict[str, pa.ChunkedArray] = {k: table.column(k) for k in keys}
    order: list[tuple[str, str]] = [(k, "ascending") for k in keys]
    if "status" in table.column_names:
        columns[_PREFER_OK] = pc.equal(table.column("status"), STATUS_OK)
        order.append((_PREFER_OK, "descending"))
    for tiebreak in ("written_at", FRAGMENT_ORDINAL):
        if tiebreak in table.column_names:
            columns[tiebreak] = table.column(tiebreak)
            order.append((tiebreak, "descending"))
    work = pa.table(columns)
    indices = pc.sort_indices(work, sort_keys=order)
    if n == 1:
        return indices
    first = np.zeros(n, dtype=bool)
    first[0] = True
    for key in keys:
        ordered = pc.take(work.column(key), indices).combine_chunks()
        first[1:] |= pc.not_equal(ordered.slice(1), ordered.slice(0, n - 1)).to_numpy(
            zero_copy_only=False
        )
    return pc.filter(indices, pa.array(first))


def deduplicate(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """`table` with only the best row of each key (see the module doc), in key order."""
    if table.num_rows <= 1:
        return table
    return table.take(best_row_indices(table, keys))
