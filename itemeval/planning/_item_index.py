"""The plan's item index: one row per selected item, and where its items-snapshot part is.

The index is what a run dispatches from: shards are cut from it part by part (`PartRun`), and
the pending sets are boolean masks aligned with its rows. Only its ids are read from the
items; a dataset's selection is its first `selected` items in order, so the dataset,
fingerprint and part of each row follow from the datasets' counts.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.store import ITEMS_PER_PART

#: Columns of `Plan.items`: one row per selected item, where its snapshot part is.
ITEM_INDEX_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("dataset", pa.dictionary(pa.int32(), pa.string()), nullable=False),
        pa.field("fingerprint", pa.dictionary(pa.int32(), pa.string()), nullable=False),
        pa.field("part", pa.int32(), nullable=False),
    ]
)


@dataclass(frozen=True, slots=True)
class SelectedItems:
    """How many items of one dataset (of one fingerprint) a plan selected: its first ones."""

    dataset: str
    fingerprint: str
    count: int


def build_item_index(
    selections: Sequence[SelectedItems],
    id_chunks: list[pa.Array],
) -> pa.Table:
    """The index (`ITEM_INDEX_SCHEMA`) of the selected items, datasets in order: the ids as
    read (`id_chunks`, emptied as they are merged: not twice in memory), the rest from the
    counts."""
    ids = pa.concat_arrays(id_chunks) if id_chunks else pa.array([], pa.string())
    id_chunks.clear()
    counts = [s.count for s in selections]
    fingerprints = list(dict.fromkeys(s.fingerprint for s in selections))
    fingerprint_codes = [fingerprints.index(s.fingerprint) for s in selections]
    parts = [np.arange(n, dtype=np.int32) // ITEMS_PER_PART for n in counts]
    return pa.table(
        [
            ids,
            pa.DictionaryArray.from_arrays(
                pa.array(np.repeat(np.arange(len(selections), dtype=np.int32), counts)),
                pa.array([s.dataset for s in selections], pa.string()),
            ),
            pa.DictionaryArray.from_arrays(
                pa.array(np.repeat(np.array(fingerprint_codes, dtype=np.int32), counts)),
                pa.array(fingerprints, pa.string()),
            ),
            pa.array(np.concatenate(parts) if parts else np.zeros(0, np.int32), pa.int32()),
        ],
        schema=ITEM_INDEX_SCHEMA,
    )


@dataclass(frozen=True, slots=True)
class PartRun:
    """Consecutive selected items (rows `start:stop` of the plan's item index) that sit in one
    items-snapshot part."""

    dataset: str
    fingerprint: str
    part: int
    start: int
    stop: int


def part_runs(items: pa.Table) -> list[PartRun]:
    """The item index (`ITEM_INDEX_SCHEMA`, in selection order) cut where the part changes."""
    if items.num_rows == 0:
        return []
    datasets = items.column("dataset").combine_chunks()
    fingerprints = items.column("fingerprint").combine_chunks()
    parts = items.column("part").to_numpy()
    dataset_codes = _codes(datasets)
    change = np.flatnonzero((parts[1:] != parts[:-1]) | (dataset_codes[1:] != dataset_codes[:-1]))
    bounds = [0, *(change + 1).tolist(), items.num_rows]
    return [
        PartRun(
            dataset=str(datasets[start].as_py()),
            fingerprint=str(fingerprints[start].as_py()),
            part=int(parts[start]),
            start=start,
            stop=stop,
        )
        for start, stop in itertools.pairwise(bounds)
    ]


def _codes(column: pa.Array) -> np.ndarray:
    if pa.types.is_dictionary(column.type):
        return column.indices.to_numpy(zero_copy_only=False)
    return pc.dictionary_encode(column).indices.to_numpy(zero_copy_only=False)
