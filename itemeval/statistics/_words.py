"""What a family of comparisons says, in words: the leaderboard's line, `status`'s answer."""

from __future__ import annotations

import math

from itemeval.statistics._paired import Family

MAX_LISTED = 6
ADJUSTMENTS = {"holm": "Holm", "bh": "Benjamini-Hochberg"}


def rank_text(family: Family, unit: int) -> str:
    """`1` or `1-2`: the unit's rank interval."""
    low, high = int(family.rank_low[unit]), int(family.rank_high[unit])
    return str(low) if low == high else f"{low}-{high}"


def p_text(p: float) -> str:
    if p is None or math.isnan(p):
        return "n/a"
    if p < 0.0001:
        return "<0.0001"
    return f"{p:.4f}" if p < 0.01 else f"{p:.3f}"


def verdict(family: Family, short_names: dict[str, str] | None = None) -> str:
    """One line: how many pairs differ, and which cannot be told apart."""
    names = short_names or {}
    total = len(family.pairs)
    real = family.real()
    method = ADJUSTMENTS.get(family.adjustment, family.adjustment)
    level = f"paired tests, {method}-adjusted p < {family.alpha:g}"
    if total == 0:
        if int((family.answers > 0).sum()) >= 2:  # graded, but never on the same items
            return "Nothing to compare: no two units share an item (each on other items)."
        return "Nothing to compare: fewer than two units with graded answers."
    if len(real) == total:
        return f"Which differences are real ({level}): all {total} pairs differ."
    unclear = sorted(
        (p for p in family.pairs if not p.real(family.alpha)),
        key=lambda p: abs(p.difference) if not math.isnan(p.difference) else 0.0,
    )
    listed = [
        f"{names.get(family.units[p.first], family.units[p.first])} ~ "
        f"{names.get(family.units[p.second], family.units[p.second])}"
        for p in unclear[:MAX_LISTED]
    ]
    more = f" and {len(unclear) - MAX_LISTED} more" if len(unclear) > MAX_LISTED else ""
    head = (
        f"Which differences are real ({level}): {len(real)} of {total} pairs differ; "
        if real
        else f"Which differences are real ({level}): none of {total} pairs differs yet; "
    )
    return head + "not distinguishable: " + ", ".join(listed) + more + "."
