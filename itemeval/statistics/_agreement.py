"""How often two graders agree: counts, the agreement rate and Cohen's kappa, from arrays."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Agreement:
    """Two raters over the same cases: how many, how often they agree, Cohen's kappa.

    `kappa` is NaN when it is undefined: no cases, or both raters gave one and the same label
    to every case (chance agreement is then 1 and kappa is 0/0).
    """

    n: int
    rate: float
    kappa: float
    both_positive: int = 0
    both_negative: int = 0
    only_first: int = 0
    only_second: int = 0


def cohen_kappa(
    first: Sequence[object] | np.ndarray, second: Sequence[object] | np.ndarray
) -> float:
    """Cohen's kappa of two raters' labels for the same cases (any hashable labels).

    kappa = (p_o - p_e) / (1 - p_e), with p_o the observed agreement and p_e the agreement
    expected by chance from each rater's label frequencies. NaN when undefined (see `Agreement`).
    """
    a = np.asarray(first, dtype=object)
    b = np.asarray(second, dtype=object)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("both raters must label the same cases (1-d, same length)")
    n = len(a)
    if n == 0:
        return math.nan
    observed = float(np.mean(a == b))
    labels = set(a.tolist()) | set(b.tolist())
    expected = sum(float(np.mean(a == k)) * float(np.mean(b == k)) for k in labels)
    if math.isclose(expected, 1.0):
        return math.nan
    return (observed - expected) / (1.0 - expected)


def agreement(first: Sequence[bool] | np.ndarray, second: Sequence[bool] | np.ndarray) -> Agreement:
    """Agreement of two binary raters (True = correct): counts, agreement rate, kappa."""
    a = np.asarray(first, dtype=bool)
    b = np.asarray(second, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("both raters must label the same cases (1-d, same length)")
    n = len(a)
    rate = float(np.mean(a == b)) if n else math.nan
    return Agreement(
        n=n,
        rate=rate,
        kappa=cohen_kappa(a, b),
        both_positive=int(np.sum(a & b)),
        both_negative=int(np.sum(~a & ~b)),
        only_first=int(np.sum(a & ~b)),
        only_second=int(np.sum(~a & b)),
    )
