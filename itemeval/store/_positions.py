"""Where stored rows' items are among a run's selected items: `ItemLookup`.

The pending sets place every stored row (a million and more) among the selected items, batch
by batch as the store is streamed. Arrow's `index_in` builds a hash table of its value set on
every call, so placing many batches against a million ids rebuilt that table per batch (and
its peak grew with the ids). A batch that is every item in id order (a partition's cells, sorted
by key, of a study whose cells are all stored) is placed by one comparison with the ids sorted
once. Otherwise `ItemLookup` hashes the ids once and keeps one sorted array of
64-bit words (8 bytes per id): each word is an id's hash with its low bits replaced by the id's
position (20 bits for a million ids), so the sort carries the positions along. A batch is hashed
the same way and binary-searched on the high bits, and every hit is confirmed by comparing the
strings themselves, so the answer is exact whatever the hash. Ids whose high bits two items
share (rare: ~0.03 pairs among a million ids) are placed among those items by `index_in`.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Bytes of an id that are hashed: its first and its last `_HASHED_BYTES` (a hash that misses a
#: difference in the middle of a long id only sends it to the exact fallback).
_HASHED_BYTES = 48
_HASH_SLICE = 1 << 16  # ids hashed at a time
_PLACE_SLICE = 1 << 16  # values placed at a time
_PRIME = np.uint64(0x100000001B3)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def string_hashes(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A uint64 hash of each string of `values` (nulls hash as the empty string)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    hashes = np.zeros(len(values), dtype=np.uint64)
    # A slice at a time: the hashing's temporaries are a few arrays of a slice's length.
    for start in range(0, len(values), _HASH_SLICE):
        piece = values.slice(start, _HASH_SLICE)
        hashes[start : start + len(piece)] = _slice_hashes(piece)
    return hashes


def ids_digest(ids: pa.Array | pa.ChunkedArray) -> str:
    """A sha256 of a sequence of ids (their lengths and bytes, in order): equal for equal
    sequences, whatever their arrays' layout. Of ids sorted and distinct it names a set."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    array = ids.cast(pa.large_string()).fill_null("")
    n = len(array)
    digest = hashlib.sha256(str(n).encode())
    if n:
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[
            array.offset : array.offset + n + 1
        ]
        data = array.buffers()[2]
        digest.update(np.diff(offsets).astype("<i8").tobytes())
        if data is not None:
            digest.update(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
    return digest.hexdigest()


def _slice_hashes(values: pa.Array) -> np.ndarray:
    array = values.cast(pa.large_string()).fill_null("")
    n = len(array)
    if not n:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset : array.offset + n + 1]
    buffer = array.buffers()[2]
    data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(1, np.uint8)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    hashes = lengths.astype(np.uint64) * _MIX_1
    longest = int(lengths.max())
    for k in range(min(longest, _HASHED_BYTES)):
        hashes = _step(hashes, data, starts + k, lengths > k)
    if longest > _HASHED_BYTES:  # and the last bytes of the long ones
        for k in range(_HASHED_BYTES, 0, -1):
            hashes = _step(hashes, data, starts + lengths - k, lengths > _HASHED_BYTES)
    # splitmix64's finaliser: neighbouring ids land far apart
    hashes ^= hashes >> np.uint64(30)
    hashes *= _MIX_1
    hashes ^= hashes >> np.uint64(27)
    hashes *= _MIX_2
    hashes ^= hashes >> np.uint64(31)
    return hashes


def _step(hashes: np.ndarray, data: np.ndarray, at: np.ndarray, where: np.ndarray) -> np.ndarray:
    byte = data[np.where(where, at, 0)].astype(np.uint64) + np.uint64(1)
    return np.where(where, hashes * _PRIME + byte, hashes)


class ItemLookup:
    """Positions of ids among `items` (unique string ids), for any number of batches."""

    def __init__(self, items: pa.Array | pa.ChunkedArray):
        if isinstance(items, pa.ChunkedArray):
            items = items.combine_chunks()
        self.items = items
        self._built = False  # the hashes are made when a first row is placed (often never)
        self._order: np.ndarray | None = None  # the items' positions in id order, when needed
        self._sorted: pa.Array | None = None
        self._digest: str | None = None

    def __len__(self) -> int:
        return len(self.items)

    def _build(self) -> None:
        n = len(self.items)
        self._low = np.uint64((1 << max(1, (n - 1).bit_length())) - 1)  # a position's bits
        self._high = ~self._low
        words = string_hashes(self.items)
        # a slice at a time: no temporary as long as the ids
        for start in range(0, n, _HASH_SLICE):
            stop = min(n, start + _HASH_SLICE)
            words[start:stop] &= self._high
            words[start:stop] |= np.arange(start, stop, dtype=np.uint64)
        words.sort()  # in place
        self._words = words
        repeated = np.zeros(n, dtype=bool)  # the word before has the same high bits
        for start in range(1, n, _HASH_SLICE):
            stop = min(n, start + _HASH_SLICE)
            repeated[start:stop] = (words[start:stop] ^ words[start - 1 : stop - 1]) <= self._low
        #: High bits that two or more items share, and the items that `index_in` places.
        self._shared = np.unique(words[repeated] & self._high)
        # The first item of each run of equal high bits is the one a search lands on (and
        # confirms on the strings); the others are placed by `index_in`.
        self._sharing_items = pa.array((words[repeated] & self._low).astype(np.int64))
        self._built = True

    def positions(self, values: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The position in the items of each of `values` (int64; -1 where it is not an item)."""
        found = np.full(len(values), -1, dtype=np.int64)
        if not len(values) or not len(self.items):
            return found
        in_order = self._in_sorted_order(values)
        if in_order is not None:
            return in_order
        if not self._built:
            self._build()
        # A slice at a time: the confirmation copies the strings it compares (a million rows
        # placed at once took ~60 MB of copies).
        for start in range(0, len(values), _PLACE_SLICE):
            piece = values.slice(start, _PLACE_SLICE)
            if isinstance(piece, pa.ChunkedArray):
                piece = piece.combine_chunks()
            found[start : start + len(piece)] = self._place(piece)
        return found

    def sorted_order(self) -> np.ndarray:
        """The items' positions in id order (computed once)."""
        if self._order is None:
            order = pc.sort_indices(self.items)
            self._order = order.to_numpy().astype(np.int64)
            self._sorted = self.items.take(order)
        return self._order

    def sorted_ids(self) -> pa.Array:
        """The items in id order (computed once, with `sorted_order`)."""
        self.sorted_order()
        assert self._sorted is not None
        return self._sorted

    @property
    def digest(self) -> str:
        """`ids_digest` of the items in id order: what a partition summary's layout names when
        its cells are these items (computed once)."""
        if self._digest is None:
            self.sorted_order()
            assert self._sorted is not None
            self._digest = ids_digest(self._sorted)
        return self._digest

    def _in_sorted_order(self, values: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
        """The positions when `values` are every item in id order, each repeated as often (a
        partition's cells, sorted by item and epoch, when every cell is stored: the common
        case); None otherwise. One comparison of strings instead of a hash and a search each
        (at a million items, 0.1 s against 0.9 s)."""
        n = len(self.items)
        if len(values) % n:
            return None
        times = len(values) // n
        self.sorted_order()
        assert self._sorted is not None and self._order is not None
        if times > 1:
            expected = self._sorted.take(pa.array(np.repeat(np.arange(n), times)))
        else:
            expected = self._sorted
        # A null (a value that is not a string) fails the comparison, as it must.
        same = pc.equal(values, expected)
        if same.null_count or not pc.all(same).as_py():
            return None
        return self._order if times == 1 else np.repeat(self._order, times)

    def _place(self, values: pa.Array) -> np.ndarray:
        found = np.full(len(values), -1, dtype=np.int64)
        hashes = string_hashes(values) & self._high
        # the first word at or above a hash's high bits (its low bits are 0) is the first item
        # with those high bits, if any
        # Searched in sorted order: a binary search of sorted queries walks the words in order
        # (4.5x quicker on a million ids than in the queries' random order).
        order = np.argsort(hashes)
        at = np.empty(len(hashes), dtype=np.int64)
        at[order] = np.searchsorted(self._words, hashes[order])
        at = np.minimum(at, len(self._words) - 1)
        words = self._words[at]
        rows = np.flatnonzero((words & self._high) == hashes)
        candidates = (words[rows] & self._low).astype(np.int64)
        same = pc.equal(values.take(pa.array(rows)), self.items.take(pa.array(candidates)))
        same_rows = same.to_numpy(zero_copy_only=False)
        found[rows[same_rows]] = candidates[same_rows]
        if len(self._shared):
            unsure = rows[~same_rows]
            unsure = unsure[np.isin(hashes[unsure], self._shared)]
            if len(unsure):
                sharing = self.items.take(self._sharing_items)
                index = pc.index_in(values.take(pa.array(unsure)), value_set=sharing)
                hit = index.is_valid().to_numpy(zero_copy_only=False)
                picked = index.drop_null().to_numpy().astype(np.int64)
                found[unsure[hit]] = self._sharing_items.to_numpy()[picked]
        return found
