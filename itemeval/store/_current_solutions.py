"""Where each cell's current solution is: `solution_index`, for the grade shards.

A grade shard names, per cell, the current `ok` solution's `text_hash` and the solutions
fragment that holds it, so a worker reads one fragment, not the partition. The index is folded
from a stream of the partition (`StudyStore.scan`), like the pending sets: per cell the current
row's `written_at`, 64-bit key and fragment, 20 bytes, instead of the partition's rows read and
deduplicated whole (at a million solutions that read took the driver ~+180 MB, the grade stage's
peak). A `text_hash` is rebuilt from its key, which is exact for the store's own hashes (16
lowercase hex digits); a partition holding any other text is read whole as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from itemeval.store._content_keys import are_key_texts, hash_keys, key_texts
from itemeval.store._layout import SOLUTIONS, StudyStore
from itemeval.store._pending import CurrentFold, cell_positions, ok_rows
from itemeval.store._positions import ItemLookup
from itemeval.store.fragments import FRAGMENT_NAME, FRAGMENT_ORDINAL


@dataclass
class SolutionIndex:
    """One generate condition's `ok` solutions among the selected items, by cell position."""

    positions: np.ndarray  # sorted cell positions (item index * epochs + epoch)
    hashes: pa.Array  # text_hash of each, aligned with `positions`
    fragments: pa.Array | None  # the fragment holding each (dictionary), when asked for

    def rows_between(self, low: int, high: int) -> slice:
        """The rows whose positions lie in `[low, high)`."""
        start, stop = np.searchsorted(self.positions, [low, high])
        return slice(int(start), int(stop))


def solution_index(
    store: StudyStore,
    gen_condition_id: str,
    item_ids: pa.Array | ItemLookup,
    epochs: int,
    *,
    fragment_names: bool = False,
) -> SolutionIndex:
    """Where the `ok` solutions of one generate condition are, for the selected items: the
    store's rule among `ok` rows (the later `written_at`, then the later fragment)."""
    lookup = item_ids if isinstance(item_ids, ItemLookup) else ItemLookup(item_ids)
    index = _folded(store, gen_condition_id, lookup, epochs, fragment_names)
    if index is None:
        index = _read_whole(store, gen_condition_id, lookup, epochs, fragment_names)
    return index


def _folded(
    store: StudyStore, gen_condition_id: str, lookup: ItemLookup, epochs: int, names: bool
) -> SolutionIndex | None:
    """The index folded from a stream; None if a `text_hash` could not be rebuilt from a key."""
    listed: list[str] = []
    present = np.zeros(len(lookup) * epochs, dtype=bool)
    current = CurrentFold(len(present))
    columns = ["item_id", "epoch", "status", "text_hash", "written_at"]
    for ok in store.scan(
        SOLUTIONS, gen_condition_id, columns, reduce=ok_rows, fragment_names=listed
    ):
        rows, positions = cell_positions(ok, lookup, epochs)
        if not len(rows):
            continue
        texts = ok.column("text_hash").take(pa.array(rows)).combine_chunks()
        if not are_key_texts(texts):
            return None
        present[positions] = True
        current.add(
            positions,
            ok.column("written_at").cast(pa.int64()).to_numpy()[rows],
            hash_keys(texts),
            ok.column(FRAGMENT_ORDINAL).to_numpy()[rows],
        )
    at = np.flatnonzero(present)
    fragments = None
    if names:
        fragments = pa.DictionaryArray.from_arrays(
            pa.array(current.fragments[at] if len(at) else [], pa.int32()),
            pa.array(listed, pa.string()),
        )
    return SolutionIndex(at, key_texts(current.keys[at]), fragments)


def _read_whole(
    store: StudyStore, gen_condition_id: str, lookup: ItemLookup, epochs: int, names: bool
) -> SolutionIndex:
    # Only `ok` rows are read into memory: among a key's rows the store's rule prefers an `ok`
    # row, so deduplicating the `ok` rows alone picks the same row.
    ok = store.read_by_condition(
        SOLUTIONS,
        [gen_condition_id],
        ["item_id", "epoch", "status", "text_hash"],
        ordered=False,  # placed by cell position below
        fragment_names=names,
        reduce=ok_rows,
    )[gen_condition_id]
    rows, positions = cell_positions(ok, lookup, epochs)
    order = np.argsort(positions, kind="stable")
    take = pa.array(rows[order])
    fragments = None
    if names:
        # dictionary-encoded: a name per fragment and 4 bytes per row (a million solutions'
        # names as strings took ~50 MB); a shard casts its own slice
        fragments = ok.column(FRAGMENT_NAME).take(take).combine_chunks()
    return SolutionIndex(
        positions=positions[order],
        hashes=ok.column("text_hash").take(take).combine_chunks(),
        fragments=fragments,
    )
