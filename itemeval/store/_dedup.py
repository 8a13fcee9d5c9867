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

from itemeval.store._positions import string_hashes
from itemeval.store._schemas import STATUS_OK
from itemeval.store.fragments import FRAGMENT_ORDINAL

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


def deduplicate_unordered(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The same rows as `deduplicate`, in no particular order, for a reader that only sums
    or places them: a row whose key's 64-bit hash no other row shares is its key's only row
    and is kept as it is; only the rows that share a hash go through the sort. A million rows
    with distinct keys cost a few arrays of hashes instead of a sort and a copy of the table
    (its string keys included)."""
    n = table.num_rows
    if n <= 1:
        return table
    hashes = key_hashes(table, keys)
    order = np.argsort(hashes, kind="stable")
    ordered = hashes[order]
    del hashes
    same = ordered[1:] == ordered[:-1]
    shared_sorted = np.zeros(n, dtype=bool)
    shared_sorted[1:] = same
    shared_sorted[:-1] |= same
    shared = np.empty(n, dtype=bool)
    shared[order] = shared_sorted
    if not shared.any():
        return table
    alone = table.filter(pa.array(~shared))
    return pa.concat_tables([alone, deduplicate(table.filter(pa.array(shared)), keys)])


_MIX = np.uint64(0x9E3779B97F4A7C15)


def key_hashes(table: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """A uint64 hash of each row's key (rows with equal keys have equal hashes)."""
    hashes = np.zeros(table.num_rows, dtype=np.uint64)
    for key in keys:
        column = table.column(key)
        if pa.types.is_integer(column.type):
            part = column.to_numpy().astype(np.int64).view(np.uint64) * _MIX
        else:  # strings, dictionaries of strings, anything else: by its text
            part = string_hashes(pc.cast(column, pa.string()))
        hashes = (hashes * _MIX) ^ part
    return hashes


def keys_present(table: pa.Table, among: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """Whether each row's key is also the key of a row of `among` (exact: a hash match is
    confirmed on the key columns, and rows whose hash matched another key are joined).
    A hash join of a million string keys held ~100 MB; this holds a few arrays of hashes."""
    found = np.zeros(table.num_rows, dtype=bool)
    if not table.num_rows or not among.num_rows:
        return found
    theirs = key_hashes(among, keys)
    order = np.argsort(theirs, kind="stable")
    theirs = theirs[order]
    mine = key_hashes(table, keys)
    at = np.minimum(np.searchsorted(theirs, mine), len(theirs) - 1)
    candidates = np.flatnonzero(theirs[at] == mine)
    del theirs, mine
    if not len(candidates):
        return found
    other = pa.array(order[at[candidates]])
    same = np.ones(len(candidates), dtype=bool)
    for key in keys:
        mine_key = table.column(key).take(pa.array(candidates))
        their_key = among.column(key).take(other)
        same &= pc.equal(mine_key, their_key).to_numpy(zero_copy_only=False)
    found[candidates[same]] = True
    unsure = candidates[~same]  # a hash that two keys share: the row found had the other key
    if len(unsure):
        rows = table.select(list(keys)).take(pa.array(unsure))
        rows = rows.append_column("_row", pa.array(unsure))
        among_keys = among.select(list(keys))
        hit = rows.join(among_keys, keys=list(keys), join_type="left semi", use_threads=False)
        found[hit.column("_row").to_numpy()] = True
    return found
