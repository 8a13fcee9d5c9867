"""Many comparisons at once: adjusted p-values and tiers.

* `adjust(p, "holm")`: Holm's step-down adjustment, which keeps the family-wise error rate (the
  chance of calling at least one true null difference real) at most alpha for any dependence
  between the tests. With p-values sorted p_(1) <= ... <= p_(m):
  adjusted p_(i) = max over j <= i of min(1, (m - j + 1) p_(j)).
* `adjust(p, "bh")`: Benjamini-Hochberg (scipy's `false_discovery_control`), which keeps the
  expected share of false discoveries among the differences called real at most alpha:
  adjusted p_(i) = min over j >= i of min(1, m p_(j) / j).
* `tiers`: tier 1 is the best unit and every unit that cannot be told apart from it (adjusted
  p >= alpha); the best of the rest starts tier 2, and so on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

METHODS = ("holm", "bh")


def holm(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values, in the input order (NaN stays NaN and does not count)."""
    values = np.asarray(p, dtype=np.float64)
    out = np.full(values.shape, np.nan)
    keep = np.flatnonzero(~np.isnan(values))
    m = len(keep)
    if m == 0:
        return out
    order = keep[np.argsort(values[keep], kind="stable")]
    scaled = (m - np.arange(m)) * values[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out


def benjamini_hochberg(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (scipy), in the input order; NaN stays NaN."""
    from scipy.stats import false_discovery_control  # lazy: scipy costs a second to import

    values = np.asarray(p, dtype=np.float64)
    out = np.full(values.shape, np.nan)
    keep = ~np.isnan(values)
    if keep.any():
        out[keep] = false_discovery_control(values[keep], method="bh")
    return out


def adjust(p: Sequence[float] | np.ndarray, method: str = "holm") -> np.ndarray:
    if method == "holm":
        return holm(p)
    if method == "bh":
        return benjamini_hochberg(p)
    raise ValueError(f"unknown adjustment {method!r}: one of {', '.join(METHODS)}")


def tiers(
    estimates: Sequence[float] | np.ndarray,
    adjusted: Mapping[tuple[int, int], float],
    alpha: float = 0.05,
) -> list[int]:
    """Tier of each unit (1 = best). `adjusted[(i, j)]` (either order) is the adjusted p-value
    of the difference between units i and j; a pair without one counts as not told apart. Units
    without an estimate (NaN) come last, in a tier of their own."""
    values = np.asarray(estimates, dtype=np.float64)
    ranked = sorted(
        range(len(values)),
        key=lambda u: (math.isnan(values[u]), -values[u] if not math.isnan(values[u]) else 0, u),
    )
    result = [0] * len(values)
    tier = 0
    remaining = ranked
    while remaining:
        tier += 1
        top = remaining[0]
        if math.isnan(values[top]):
            members = remaining
        else:
            members = [
                u
                for u in remaining
                if u == top
                or (
                    not math.isnan(values[u])
                    and not _apart(adjusted.get((top, u), adjusted.get((u, top))), alpha)
                )
            ]
        chosen = set(members)
        for u in members:
            result[u] = tier
        remaining = [u for u in remaining if u not in chosen]
    return result


def _apart(p: float | None, alpha: float) -> bool:
    return p is not None and not math.isnan(p) and p < alpha
