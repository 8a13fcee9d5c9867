"""Which items look broken: counts (no answer right, every answer right) and a discrimination
significantly below 0.

The test of an item's discrimination is the score test of "a = 0" against "a < 0" in the 2PL
with the abilities held: calibrated at a = 0 whatever the fit's prior on `a` (which pulls a
fitted negative discrimination towards +1), no fit per item, no trouble where a fit separates.
The items' one-sided p-values are adjusted by Benjamini-Hochberg (scipy) over the items some but
not all answers got right; an item is flagged at `q <= FLAG_Q`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from itemeval.irt._fit import IrtFit

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
    from scipy.special import ndtr  # lazy: a run that never flags does not load scipy

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
    return z, ndtr(z)


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


def discrimination_q(
    two: IrtFit, correct: np.ndarray, trials: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per item, the score test's z of "the 2PL discrimination is below 0" (on the 2PL's
    abilities, `negative_discrimination_p`) and its Benjamini-Hochberg adjusted p-value over the
    items tested (NaN where an item has no spread: it says nothing about its discrimination)."""
    from scipy.stats import false_discovery_control  # lazy, as above

    z, p = negative_discrimination_p(two.theta, correct, trials)
    tested = ~np.isnan(p)
    q = np.full(len(p), np.nan)
    if tested.any():
        q[tested] = false_discovery_control(p[tested], method="bh")
    return z, q
