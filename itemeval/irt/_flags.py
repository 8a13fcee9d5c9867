"""Which items look broken: counts (no answer right, every answer right) and a discrimination
significantly below 0.

The test of an item's discrimination is the score test of "a = 0" against "a < 0" in the 2PL
with the abilities held: calibrated at a = 0 whatever the fit's prior on `a` (which pulls a
fitted negative discrimination towards +1), no fit per item, no trouble where a fit separates.
The items' one-sided p-values are adjusted by Benjamini-Hochberg over the items some but not all
answers got right; an item is flagged at `q <= FLAG_Q`. The adjustment is four lines of numpy
(`benjamini_hochberg`, equal to scipy's `false_discovery_control` in tests/irt) rather than
`scipy.stats`, whose import alone takes 2-3 s more than `scipy.special`'s (measured on the 2
shared vCPUs under load).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from itemeval.irt._fit import IrtFit
    from itemeval.irt._patterns import Patterns

#: An item is flagged for negative discrimination when the Benjamini-Hochberg adjusted p-value
#: of "its 2PL discrimination is not below 0" is at most this (over the items tested).
FLAG_Q = 0.05


def negative_discrimination_p(
    theta: np.ndarray, correct: np.ndarray, trials: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per item, the score test of "discrimination 0" against "below 0" in the 2PL with the
    abilities `theta` held: z = sum_c (k_ci - n_ci p_i) theta_c / sqrt(p_i (1 - p_i) sum_c
    n_ci (theta_c - mean_i theta)^2), p_i the item's right share (the intercept's estimate under
    the null), mean_i weighted by n_ci. It is the Cochran-Armitage trend test of the item's right
    answers over the abilities: calibrated at a = 0 whatever the prior, with no fit per item
    and no trouble where a fit separates. Returns (z, one-sided p); NaN where the item has no
    spread (all right, none right, or one condition)."""
    k = np.asarray(correct, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    total = n.sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = k.sum(0) / total
        mean = theta @ n / total
        spread = (theta * theta) @ n - total * mean * mean
        score = theta @ k - share * (theta @ n)
        z = score / np.sqrt(share * (1 - share) * spread)
    z = np.where(np.isfinite(z) & (spread > 1e-12) & (share > 0) & (share < 1), z, np.nan)
    return z, normal_cdf(z)


_ERFC = np.frompyfunc(math.erfc, 1, 1)


def normal_cdf(z: np.ndarray) -> np.ndarray:
    """The standard normal CDF, `erfc(-z / sqrt 2) / 2` (NaN stays NaN). The standard library's
    `erfc` a value at a time rather than `scipy.special.ndtr`: `analyze irt` tests one z per
    distinct column of counts (81 on a 4-condition store), and importing `scipy.special` takes
    1.0-1.1 s (measured on the 2 shared vCPUs); 20,000 values take about 10 ms."""
    values = np.asarray(z, dtype=np.float64)
    return 0.5 * _ERFC(-values / math.sqrt(2.0)).astype(np.float64)


def item_flag(correct: int, trials: int, discrimination_q: float) -> str | None:
    """Why an item looks broken, if it does: no answer right, every answer right, or a 2PL
    discrimination significantly below 0 (`discrimination_q`, adjusted over the items, at most
    `FLAG_Q`)."""
    if trials == 0:
        return None
    if correct == 0:
        return "none right"
    if correct == trials:
        return "all right"
    if discrimination_q <= FLAG_Q:
        return "negative discrimination"
    return None


def benjamini_hochberg(p: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values in the input order: with p sorted, p_(1) <= ... <=
    p_(m), adjusted p_(i) = min over j >= i of min(1, m p_(j) / j). With `counts`, `p[i]` stands
    for `counts[i]` tests of that p-value (the ranks it takes are counted), so the result is that
    of the expanded list, at the cost of the distinct values."""
    values = np.asarray(p, dtype=np.float64)
    weights = np.ones(len(values)) if counts is None else np.asarray(counts, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    ranks = np.cumsum(weights[order])  # the last rank each value takes
    m = ranks[-1] if len(ranks) else 0.0
    scaled = values[order] * (m / np.maximum(ranks, 1.0))
    # Within a run of equal p-values m p / rank falls, so the minimum from the end gives them
    # all the value at their last rank, as it gives tied values of the expanded list.
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(len(values))
    out[order] = np.minimum(adjusted, 1.0)
    return out


def discrimination_q(
    two: IrtFit,
    correct: np.ndarray,
    trials: np.ndarray,
    *,
    patterns: Patterns | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per item, the score test's z of "the 2PL discrimination is below 0" (on the 2PL's
    abilities, `negative_discrimination_p`) and its Benjamini-Hochberg adjusted p-value over the
    items tested (NaN where an item has no spread: it says nothing about its discrimination).
    With the items' `patterns` (`item_patterns` of the same counts) the test and the adjustment
    run once per distinct column of counts: its z depends on nothing else."""
    if patterns is None:
        z, p = negative_discrimination_p(two.theta, correct, trials)
        counts = np.ones(len(p))
    else:
        z, p = negative_discrimination_p(two.theta, patterns.correct, patterns.trials)
        counts = patterns.count
    tested = ~np.isnan(p)
    q = np.full(len(p), np.nan)
    if tested.any():
        q[tested] = benjamini_hochberg(p[tested], counts[tested])
    if patterns is not None:
        z, q = z[patterns.of_item], q[patterns.of_item]
    return z, q
