"""Items grouped by their column of counts, so that a fit costs the distinct columns, not the
items.

An item's part of the joint posterior depends on its data only through its column of counts:
the right answers and the graded answers of each condition. Two items whose columns agree have
the same likelihood terms and the same prior, so at the joint MAP (each item's parameters are a
strictly concave logistic regression given the abilities) they have the same parameters. With
binary grades, few conditions and few epochs there are few distinct columns: at most
`((epochs + 1)(epochs + 2) / 2) ^ conditions` (a count of right answers and of graded ones per
cell), 81 for 4 conditions of one epoch whatever the number of items. The fit runs over the
columns, each weighted by how many items share it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Bits of a column's key when the counts are small whole numbers (else the raw bytes are used).
KEY_BITS = 62


@dataclass(frozen=True)
class Patterns:
    """The distinct columns of a conditions x items pair of count matrices."""

    correct: np.ndarray  # conditions x patterns
    trials: np.ndarray  # conditions x patterns
    count: np.ndarray  # items per pattern (float64, the fit's weights)
    of_item: np.ndarray  # each item's pattern
    first: np.ndarray  # an item of each pattern (its representative)


def item_patterns(correct: np.ndarray, trials: np.ndarray) -> Patterns:
    """Group the items (columns) by their counts: each column's key is one integer where the
    counts are small whole numbers (the usual case: a sort of one int64 per item), else its
    bytes."""
    k = np.asarray(correct, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    items = k.shape[1]
    keys = _integer_keys(k, n)
    if keys is None:
        rows = np.ascontiguousarray(np.concatenate([k, n]).T)
        keys = rows.view(np.dtype((np.void, rows.itemsize * rows.shape[1]))).ravel()
    if items == 0:
        of_item = np.zeros(0, dtype=np.int64)
        count = np.zeros(0)
    else:
        _, of_item, counts = np.unique(keys, return_inverse=True, return_counts=True)
        of_item = of_item.reshape(-1).astype(np.int64)
        count = counts.astype(np.float64)
    first = np.empty(len(count), dtype=np.int64)
    # Reversed, so that each pattern's earliest item is written last and kept.
    first[of_item[::-1]] = np.arange(items - 1, -1, -1, dtype=np.int64)
    return Patterns(
        correct=k[:, first], trials=n[:, first], count=count, of_item=of_item, first=first
    )


def _integer_keys(k: np.ndarray, n: np.ndarray) -> np.ndarray | None:
    """Each column's counts as one integer in mixed radix (a cell's code `n (N + 1) + k`, `N`
    the largest count), or None when they are not small whole numbers. A condition at a time,
    so that no copy of the whole matrices is made."""
    if k.size == 0:
        return np.zeros(k.shape[1], dtype=np.int64)
    largest = float(n.max())
    if largest < 0 or float(k.min()) < 0 or float(k.max()) > largest:
        return None
    base = int(largest) + 1
    radix = base * base
    if int(k.shape[0]) * float(np.log2(radix)) > KEY_BITS:
        return None
    keys = np.zeros(k.shape[1], dtype=np.int64)
    for right, graded in zip(k, n, strict=True):
        right_int, graded_int = right.astype(np.int64), graded.astype(np.int64)
        if not (np.array_equal(right_int, right) and np.array_equal(graded_int, graded)):
            return None
        keys *= radix
        graded_int *= base
        keys += graded_int
        keys += right_int
    return keys
