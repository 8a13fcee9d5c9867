"""Where each cell's current solution is: `solution_index`, for the grade shards.

A grade shard names, per cell, the current `ok` solution's `text_hash` and the solutions
fragment that holds it, so a worker reads one fragment, not the partition. Both come from the
partition's cells (its summary and the fragments it does not cover: the best row of each key,
with its 64-bit text key and its fragment), a few bytes per cell. A `text_hash` is rebuilt from
its key, exactly: the store's own hashes are 16 lowercase hex digits (`check_table` refuses any
other), and the key is their value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from itemeval.store._content_keys import key_texts
from itemeval.store._layout import SOLUTIONS, StudyStore
from itemeval.store._pending import cell_positions
from itemeval.store._positions import ItemLookup
from itemeval.store._summary import read_cells


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
    store's rule (an `ok` row first, then the later `written_at`, then the later fragment)."""
    lookup = item_ids if isinstance(item_ids, ItemLookup) else ItemLookup(item_ids)
    columns = ["item_id", "epoch", "ok", "text_hash"]
    if fragment_names:
        columns.append("fragment")
    partition = store.partition(SOLUTIONS, gen_condition_id)
    read = read_cells(SOLUTIONS, partition, columns, items=lookup)
    mask = read.cells.column("ok").combine_chunks().to_numpy(zero_copy_only=False)
    ok = read.cells.filter(pa.array(mask))
    item = None if read.item_positions is None else read.item_positions[mask]
    rows, positions = cell_positions(ok, lookup, epochs, item)
    order = np.argsort(positions, kind="stable")
    take = pa.array(rows[order])
    fragments = None
    if fragment_names:
        # dictionary-encoded: a name per fragment and 4 bytes per row; a shard casts its slice
        fragments = ok.column("fragment").take(take).combine_chunks().dictionary_encode()
    keys = ok.column("text_hash").take(take).to_numpy()
    return SolutionIndex(positions[order], key_texts(keys), fragments)
