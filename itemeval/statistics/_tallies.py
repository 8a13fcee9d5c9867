"""Per-cluster tallies: the only input the paired statistics need.

A family of comparisons (several conditions, or several models, under one grader and one
metric) reduces to three matrices with a row per cluster and a column per unit:

* `sums[c, u]`    the sum of the unit's scores on the cluster's answers (correct = 1);
* `squares[c, u]` the sum of their squares (the within-cluster spread of continuous scores);
* `counts[c, u]`  how many graded answers the unit has there (epochs, pooled conditions).

A cluster is an item, or a group of items that share something (`analysis.cluster_by`): every
interval and test resamples or sums whole clusters, so the answers inside one are never taken as
independent. `from_rows` builds the matrices from one row per graded answer with one
`np.bincount` per matrix (no Python loop over rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tallies:
    """See the module doc. `binary` says every score is 0 or 1 (accuracy); `item_clusters` that
    each cluster is one item (no `cluster_by`), which the exact McNemar test needs."""

    units: list[str]
    sums: np.ndarray  # (clusters, units) float64
    squares: np.ndarray
    counts: np.ndarray
    binary: bool = True
    item_clusters: bool = True

    @property
    def clusters(self) -> int:
        return int(self.sums.shape[0])

    @property
    def graded(self) -> np.ndarray:
        """(clusters, units) bool: the unit has at least one graded answer in the cluster."""
        return self.counts > 0

    def estimates(self) -> np.ndarray:
        """Per unit: sum of scores / graded answers over its clusters (NaN without any)."""
        totals = self.counts.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(totals > 0, self.sums.sum(axis=0) / np.maximum(totals, 1), np.nan)

    @classmethod
    def from_rows(
        cls,
        units: Sequence[str],
        unit: np.ndarray,
        cluster: np.ndarray,
        values: np.ndarray,
        *,
        binary: bool,
        item_clusters: bool = True,
    ) -> Tallies:
        """One row per graded answer: its unit code (0 .. len(units)-1), its cluster code (any
        integers: only the clusters present get a row, in increasing code order) and its score."""
        unit = np.asarray(unit, dtype=np.int64)
        cluster = np.asarray(cluster)
        if cluster.dtype.kind not in "iu":  # integer codes are used as they are (no copy)
            cluster = cluster.astype(np.int64)
        values = np.asarray(values, dtype=np.float64)
        k = len(units)
        if len(unit) == 0:
            empty = np.zeros((0, k))
            return cls(list(units), empty, empty, empty, binary, item_clusters)
        present, flat = _dense_codes(cluster)
        del cluster
        flat *= k  # in place: each row's (cluster, unit) cell; a copy of the rows each is 40 MB
        flat += unit
        size = len(present) * k
        shape = (len(present), k)
        sums = np.bincount(flat, weights=values, minlength=size).reshape(shape)
        # 0/1 scores are their own squares (exactly): no second pass over the rows.
        squares = (
            sums
            if binary
            else np.bincount(flat, weights=values * values, minlength=size).reshape(shape)
        )
        counts = np.bincount(flat, minlength=size).reshape(shape).astype(np.float64)
        return cls(list(units), sums, squares, counts, binary, item_clusters)


def _dense_codes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(codes, return_inverse=True)` (the codes present, increasing, and each code's
    place among them). Codes that are small non-negative integers (item codes: a study's items)
    are placed by a table as long as the largest code instead of a sort: at 5M grades the sort
    took 200 MB more at the peak of `status` (measured)."""
    low, high = int(codes.min()), int(codes.max())
    if low < 0 or high > 4 * len(codes) + 1024:
        present, dense = np.unique(codes, return_inverse=True)
        return present, dense.astype(np.int64).reshape(-1)
    seen = np.zeros(high + 1, dtype=bool)
    seen[codes] = True
    place = np.cumsum(seen, dtype=np.int64) - 1
    return np.flatnonzero(seen), place[codes]
