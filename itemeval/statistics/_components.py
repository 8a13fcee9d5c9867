"""Variance components of one unit's scores: would more items or more epochs help?

From each item's answers (its epochs), with k_i answers, mean y_i and sum of squares Q_i:

* within-item variance (answers to one item differ from epoch to epoch):
  s2_within = sum_i (Q_i - k_i y_i^2) / sum_i (k_i - 1), pooled over the items with k_i >= 2
  (not identified with one epoch: NaN);
* between-item variance (items differ in how hard they are):
  s2_between = max(0, var_i(y_i) - s2_within * mean_i(1 / k_i)) (method of moments: the
  spread of item means minus what the epochs' own noise adds to it);
* shares: s2_between / (s2_between + s2_within) and its complement;
* the effective number of independent answers: s2_total / Var(mean), where Var(mean) is the
  cluster-robust variance of the unit's mean (clusters are items, or the groups of
  `analysis.cluster_by`) and s2_total the variance of single answers. It is items x epochs when
  every answer were independent, and falls to the number of items (or of clusters) when an
  item's epochs (or a cluster's items) all say the same: more epochs then buy nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Components:
    unit: str
    mean: float
    items: int
    clusters: int
    answers: int
    between: float
    within: float  # NaN with one answer per item
    effective: float  # effective number of independent answers

    @property
    def between_share(self) -> float:
        if math.isnan(self.within):
            return math.nan
        total = self.between + self.within
        return self.between / total if total > 0 else math.nan

    @property
    def within_share(self) -> float:
        share = self.between_share
        return 1.0 - share if not math.isnan(share) else math.nan

    @property
    def epochs(self) -> float:
        return self.answers / self.items if self.items else math.nan


def components(
    unit: str,
    sums: np.ndarray,
    squares: np.ndarray,
    counts: np.ndarray,
    cluster_of_item: np.ndarray | None = None,
) -> Components:
    """The components of one unit from per-item tallies (one entry per item; items without
    answers are ignored). `cluster_of_item` groups items into clusters (default: each its own)."""
    keep = counts > 0
    s, q, k = sums[keep], squares[keep], counts[keep]
    items = int(keep.sum())
    answers = int(k.sum())
    nan = math.nan
    if items == 0:
        return Components(unit, nan, 0, 0, 0, nan, nan, nan)
    mean = float(s.sum() / answers)
    y = s / k
    dof = float((k - 1).sum())
    within = float(np.sum(q - s * y) / dof) if dof > 0 else nan
    spread = float(np.var(y, ddof=1)) if items > 1 else nan
    noise = (within if not math.isnan(within) else 0.0) * float(np.mean(1.0 / k))
    between = max(0.0, spread - noise) if not math.isnan(spread) else nan
    total = float(q.sum() / answers - mean * mean) * answers / max(1, answers - 1)
    if cluster_of_item is not None:
        codes = np.unique(np.asarray(cluster_of_item)[keep], return_inverse=True)[1]
        cs = np.bincount(codes, weights=s)
        ck = np.bincount(codes, weights=k)
    else:
        cs, ck = s, k
    g = len(ck)
    if g > 1:
        z = (cs - mean * ck) / (answers / g)
        variance = float(np.sum(z * z)) / (g * (g - 1))
        effective = total / variance if variance > 0 else float(answers)
    else:
        effective = nan
    return Components(unit, mean, items, g, answers, between, within, min(effective, answers))
