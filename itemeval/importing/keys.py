"""`KeySet`: 64-bit keys of what an import has seen, in bounded memory per record (8 bytes in
a sorted numpy array, plus a small Python set of the latest), checked one at a time or a batch
at a time. Keys are Python `hash()` values of tuples: stable within the one process an import
runs in, which is all they are used for."""

from __future__ import annotations

import numpy as np

#: Keys held in the Python set before they are merged into the sorted array.
RECENT = 65_536


class KeySet:
    def __init__(self) -> None:
        self._sorted = np.empty(0, dtype=np.int64)
        self._recent: set[int] = set()

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, key: int) -> bool:
        if key in self._recent:
            return True
        sorted_keys = self._sorted
        if not len(sorted_keys):
            return False
        at = int(np.searchsorted(sorted_keys, key))
        return at < len(sorted_keys) and bool(sorted_keys[at] == key)

    def add(self, key: int) -> bool:
        """Add `key`; False if it was there already."""
        if key in self._recent:
            return False
        sorted_keys = self._sorted
        if len(sorted_keys):
            at = int(np.searchsorted(sorted_keys, key))
            if at < len(sorted_keys) and sorted_keys[at] == key:
                return False
        self._recent.add(key)
        if len(self._recent) >= RECENT:
            self._merge()
        return True

    def add_many(self, keys: np.ndarray) -> np.ndarray:
        """Add `keys` in order; returns, per key, whether it is new (not seen before, and not
        earlier in `keys`)."""
        self._merge()
        keys = np.asarray(keys, dtype=np.int64)
        new = np.ones(len(keys), dtype=bool)
        if len(keys) == 0:
            return new
        _, first = np.unique(keys, return_index=True)
        repeated = np.ones(len(keys), dtype=bool)
        repeated[first] = False
        new &= ~repeated
        if len(self._sorted):
            at = np.searchsorted(self._sorted, keys)
            inside = at < len(self._sorted)
            found = np.zeros(len(keys), dtype=bool)
            found[inside] = self._sorted[at[inside]] == keys[inside]
            new &= ~found
        self._sorted = np.union1d(self._sorted, keys[new])
        return new

    def _merge(self) -> None:
        if self._recent:
            recent = np.fromiter(self._recent, dtype=np.int64, count=len(self._recent))
            self._sorted = np.union1d(self._sorted, recent)
            self._recent = set()
