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
        n = len(keys)
        new = np.ones(n, dtype=bool)
        if n == 0:
            return new
        order = np.argsort(keys, kind="stable")  # equal keys keep their order: first is kept
        ordered = keys[order]
        repeat = np.zeros(n, dtype=bool)
        repeat[1:] = ordered[1:] == ordered[:-1]
        new[order[repeat]] = False
        if len(self._sorted):
            at = np.searchsorted(self._sorted, ordered)
            inside = at < len(self._sorted)
            found = np.zeros(n, dtype=bool)
            found[inside] = self._sorted[at[inside]] == ordered[inside]
            new[order[found]] = False
        self._insert(keys[new])
        return new

    def _insert(self, keys: np.ndarray) -> None:
        """Merge unique keys that are not there yet into the sorted array (one copy)."""
        if len(keys) == 0:
            return
        keys = np.sort(keys)
        self._sorted = np.insert(self._sorted, np.searchsorted(self._sorted, keys), keys)

    def _merge(self) -> None:
        if self._recent:
            recent = np.fromiter(self._recent, dtype=np.int64, count=len(self._recent))
            self._recent = set()
            self._insert(recent)
