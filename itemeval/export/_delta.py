"""What changed in a condition pair since the last export: its state against the key index.

The key index of a pair (`_export/<grade>/<generate>/keys-*.arrow`, one per export that
changed the pair) is the pair's state (`_table.pairs.STATE_SCHEMA`: every key of its grades and
solutions, where each logical row was and its fingerprint) as that export saw it, and what the
export made of each key: its dataset (null: not selected) and the row's fingerprint (null: no
row), the long-table part that holds the row, and what the Every Eval Ever writer needs
(`_eee.writer.EEE_INDEX_FIELDS`).

`compare` lines the pair's state now up with the index by key: a row now is **new** (no row
then), **changed** (another fingerprint) or unchanged; a row then is **removed** when it
changed or is no row now (its item left the selection).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from itemeval.export._eee.writer import EEE_INDEX_FIELDS
from itemeval.export._outputs import OutputDir
from itemeval.results import STATE_SCHEMA, Selection, key_strings, row_words, words

KEY_INDEX_SCHEMA = pa.schema(
    [
        *STATE_SCHEMA,
        pa.field("dataset", pa.string()),  # null: not selected
        pa.field("dataset_word", pa.uint64()),
        pa.field("fp", pa.uint64()),  # null: no long-table row
        pa.field("part", pa.int32()),  # null: no table format exported
        *EEE_INDEX_FIELDS,  # null: Every Eval Ever not exported
    ]
)


@dataclass
class PairChanges:
    """A pair's keys now (`state`, with `dataset`, `dataset_word`, `fp`, `graded`, `stale`
    per key) lined up with its index (`earlier`: each key's row there, -1 for none)."""

    state: pa.Table
    dataset: pa.Array
    dataset_word: np.ndarray
    fp: np.ndarray
    row: np.ndarray  # a long-table row now
    graded: np.ndarray
    stale: np.ndarray
    earlier: np.ndarray
    new: np.ndarray  # a row now that is not the same row then (new or changed)
    removed: np.ndarray  # per index row: a row then that is not the same row now

    @property
    def any(self) -> bool:
        return bool(self.new.any() or self.removed.any())


def compare(
    state: pa.Table,
    index: pa.Table | None,
    selection: Selection,
    *,
    include_ungraded: bool,
    earlier: np.ndarray | None = None,
    touched: np.ndarray | None = None,
) -> PairChanges:
    """Line `state` up with `index` (see the module doc). `earlier` and `touched` (from
    `pairs.advance_state`: each key's row in the index, and the keys whose state moved) spare
    the lookup; with `touched`, the other keys keep their dataset and fingerprint (the selection
    must be the one the index was made with)."""
    n = state.num_rows
    m = 0 if index is None else index.num_rows
    if earlier is None:
        earlier = np.full(n, -1, dtype=np.int64)
        if m:
            assert index is not None
            where = pc.index_in(key_strings(state), value_set=key_strings(index))
            earlier = pc.fill_null(where, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    dataset, dataset_word = _place(state, index, selection, earlier, touched)
    graded, stale, fp = row_words(state, dataset_word)
    selected = pc.is_valid(dataset).to_numpy(zero_copy_only=False)
    has_solution = pc.is_valid(state.column("s_frag")).to_numpy(zero_copy_only=False)
    row = selected & (graded | (has_solution & include_ungraded))
    same = np.zeros(n, dtype=bool)
    kept = np.zeros(m, dtype=bool)
    if m:
        assert index is not None
        before_fp = index.column("fp")
        before_row = pc.is_valid(before_fp).to_numpy(zero_copy_only=False)
        before = words(before_fp)
        matched = earlier >= 0
        at = earlier[matched]
        same[matched] = before_row[at] & (before[at] == fp[matched])
        same &= row
        kept[earlier[same]] = True
        removed = before_row & ~kept
    else:
        removed = np.zeros(0, dtype=bool)
    return PairChanges(
        state=state,
        dataset=dataset,
        dataset_word=dataset_word,
        fp=fp,
        row=row,
        graded=graded,
        stale=stale,
        earlier=earlier,
        new=row & ~same,
        removed=removed,
    )


def _place(
    state: pa.Table,
    index: pa.Table | None,
    selection: Selection,
    earlier: np.ndarray,
    touched: np.ndarray | None,
) -> tuple[pa.Array, np.ndarray]:
    """Each key's dataset and dataset word: looked up for every key, or (`touched` given)
    for the touched keys only, the others as the index has them."""
    if touched is None or index is None:
        return selection.place(state)
    n = state.num_rows
    dataset = index.column("dataset").take(pa.array(np.where(earlier >= 0, earlier, 0)))
    word = words(index.column("dataset_word"))[np.where(earlier >= 0, earlier, 0)]
    if not touched.any():
        return dataset.combine_chunks(), word
    chosen = np.flatnonzero(touched)
    fresh_dataset, fresh_word = selection.place(state.take(pa.array(chosen)))
    word = word.copy()
    word[chosen] = fresh_word
    source = np.arange(n, dtype=np.int64)
    source[chosen] = n + np.arange(len(chosen), dtype=np.int64)
    both = pa.concat_arrays([dataset.combine_chunks().cast(pa.string()), fresh_dataset])
    return both.take(pa.array(source)), word


#: A key index is an Arrow IPC file (LZ4): read and written whole by every export that changes
#: its pair, where parquet's encoding cost 3-7x the time for the same rows (earlier exports
#: wrote parquet, still read).
INDEX_SUFFIX = ".arrow"


def read_index(out: OutputDir, path: str) -> pa.Table | None:
    """A pair's key index; None when it cannot be read as one (the pair is then made again)."""
    location = out.location(path)
    try:
        if path.endswith(".parquet"):
            source = location.path if location.is_local else location.open("rb")
            table = pq.read_table(source)
        elif location.is_local:
            with pa.memory_map(location.path) as source:
                table = ipc.open_file(source).read_all()
        else:
            with location.open("rb") as handle:
                table = ipc.open_file(pa.py_buffer(handle.read())).read_all()
        return table.select(KEY_INDEX_SCHEMA.names).cast(KEY_INDEX_SCHEMA)
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return None


def encode_index(index: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    table = index.select(KEY_INDEX_SCHEMA.names).cast(KEY_INDEX_SCHEMA)
    options = ipc.IpcWriteOptions(compression="lz4")
    with ipc.new_file(sink, KEY_INDEX_SCHEMA, options=options) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())
