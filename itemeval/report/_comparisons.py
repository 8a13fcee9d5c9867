"""The report's section "Which differences are real": text tables and the plot, shared by the
HTML page and the Markdown summary (the numbers come from `ReportData.statistics`)."""

from __future__ import annotations

import math

from itemeval.report import _svg as svg
from itemeval.report._data import ReportData
from itemeval.report._tables import TextTable
from itemeval.statistics import ADJUSTMENTS, MCNEMAR, Family, FamilyKey, p_text, rank_text, verdict

TITLE = "Which differences are real"
#: Conditions beyond which the matrix is left out (the pair list still has every pair).
MAX_MATRIX = 20


def _signed(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:+.3f}"


def _interval(low: float, high: float) -> str:
    if math.isnan(low) or math.isnan(high):
        return "[n/a]"
    return f"[{low:+.3f}, {high:+.3f}]"


def _order(family: Family) -> list[int]:
    return sorted(
        range(len(family.units)),
        key=lambda u: (
            family.tiers[u],
            -(family.estimates[u] if not math.isnan(family.estimates[u]) else -1.0),
        ),
    )


def note(data: ReportData) -> str:
    family = data.headline_family
    if family is None:
        return "Nothing to compare yet: fewer than two conditions with graded answers."
    by = data.statistics.clusters.by if data.statistics and data.statistics.clusters else None
    unit = f"clusters of items sharing {by!r} (analysis.cluster_by)" if by else "items"
    method = ADJUSTMENTS.get(family.adjustment, family.adjustment)
    return (
        f"Each difference is row minus column over the {unit} both conditions graded. 95% "
        f"interval: paired bootstrap over {unit} (one resample drives both conditions; epochs "
        f"stay with their item; {family.resamples:,} resamples, seed {family.seed}). p: exact "
        f"McNemar test with one epoch and a binary score, else a paired t-test on "
        f"{unit} with a cluster-robust standard error; adjusted within each family ({method}). "
        f"A difference is real when its adjusted p < {family.alpha:g}."
    )


def headline_verdict(data: ReportData) -> str | None:
    family = data.headline_family
    return verdict(family) if family is not None else None


def difference_matrix(family: Family) -> TextTable:
    """Row minus column, for every pair (upper triangle, rows in tier order): the difference,
    its interval and the adjusted p-value, `*` when real."""
    order = _order(family)
    if len(order) > MAX_MATRIX:
        return TextTable([], [])
    header = ["condition", *(family.units[u] for u in order[1:])]
    rows = []
    for i, a in enumerate(order[:-1]):
        cells = [family.units[a]]
        for j, b in enumerate(order[1:], start=1):
            if j <= i:
                cells.append("")
                continue
            pair = family.pair(a, b)
            if pair is None:
                cells.append("n/a")
                continue
            sign = 1.0 if pair.first == a else -1.0
            low, high = (pair.low, pair.high) if sign > 0 else (-pair.high, -pair.low)
            mark = "*" if pair.real(family.alpha) else ""
            cells.append(
                f"{_signed(sign * pair.difference)} {_interval(low, high)} "
                f"p={p_text(pair.adjusted)}{mark}"
            )
        rows.append(cells)
    return TextTable(header, rows, set(range(1, len(header))))


def pairs_table(family: Family) -> TextTable:
    """Every pair, the larger estimate first."""
    rows = []
    for pair in sorted(family.pairs, key=lambda p: (-abs(_finite(p.difference)), p.first)):
        a, b, sign = pair.first, pair.second, 1.0
        if _finite(pair.difference) < 0:
            a, b, sign = b, a, -1.0
        low, high = (pair.low, pair.high) if sign > 0 else (-pair.high, -pair.low)
        test = "McNemar (exact)" if pair.test == MCNEMAR else "paired t (clusters)"
        rows.append(
            [
                family.units[a],
                family.units[b],
                _signed(sign * pair.difference),
                _interval(low, high),
                p_text(pair.p_value),
                p_text(pair.adjusted),
                test,
                f"{pair.clusters:,}",
                "real" if pair.real(family.alpha) else "not distinguishable",
            ]
        )
    header = ["better", "worse", "difference", "95% interval", "p", "adjusted p", "test"]
    header += ["items", "verdict"]
    return TextTable(header, rows, {2, 3, 4, 5, 7})


def families_table(data: ReportData) -> TextTable:
    """One row per family: what it compares, how many pairs differ, its tiers."""
    rows = []
    for key, family in data.statistics.families if data.statistics else []:
        rows.append(
            [
                _family_label(key),
                f"{len(family.units)}",
                f"{len(family.real())} of {len(family.pairs)}",
                _tiers_text(family),
            ]
        )
    return TextTable(["family", "units", "pairs that differ", "tiers (rank interval)"], rows, {1})


def components_table(data: ReportData) -> TextTable:
    """The headline grader's variance components per condition."""
    board = data.leaderboard
    if data.statistics is None or board.primary is None:
        return TextTable([], [])
    rows = []
    for grader, metric, c in data.statistics.components:
        if grader.id != board.primary.id or metric != "accuracy":
            continue
        rows.append(
            [
                c.unit,
                f"{c.items:,}",
                f"{c.epochs:.2f}" if not math.isnan(c.epochs) else "n/a",
                _share(c.between_share),
                _share(c.within_share),
                f"{c.effective:,.0f}" if not math.isnan(c.effective) else "n/a",
                f"{c.answers:,}",
            ]
        )
    header = ["condition", "items", "answers per item", "between-item share"]
    header += ["within-item share", "effective independent answers", "answers"]
    return TextTable(header, rows, {1, 2, 3, 4, 5, 6})


COMPONENTS_NOTE = (
    "Between-item share: how much of the variance of single answers comes from items differing "
    "in difficulty (more items help); within-item share: from answers to the same item differing "
    "between epochs (more epochs help). Effective independent answers: how many independent "
    "answers the data are worth (answers / design effect); near the item count, extra epochs add "
    "little. With one epoch the split is not identified (n/a)."
)


def difference_plot(family: Family | None) -> str | None:
    if family is None or not family.pairs:
        return None
    rows = []
    for pair in sorted(family.pairs, key=lambda p: -abs(_finite(p.difference)))[:40]:
        a, b, sign = pair.first, pair.second, 1.0
        if _finite(pair.difference) < 0:
            a, b, sign = b, a, -1.0
        if math.isnan(pair.difference):
            continue
        low, high = (pair.low, pair.high) if sign > 0 else (-pair.high, -pair.low)
        rows.append(
            svg.IntervalRow(
                f"{family.units[a]} - {family.units[b]}",
                sign * pair.difference,
                low,
                high,
                0 if pair.real(family.alpha) else 9,
            )
        )
    if not rows:
        return None
    finite = [r for r in rows if not (math.isnan(r.low) or math.isnan(r.high))]
    low = min([0.0, *(r.low for r in finite)])
    high = max([0.01, *(r.high for r in finite)])
    pad = (high - low) * 0.05
    return svg.difference_chart(
        rows,
        title="Paired differences, 95% intervals (blue: real; grey: not distinguishable)",
        axis_label="difference in accuracy (better minus worse)",
        domain=(low - pad, high + pad),
    )


def _tiers_text(family: Family) -> str:
    parts = []
    for tier in sorted(set(family.tiers)):
        members = [u for u in _order(family) if family.tiers[u] == tier]
        names = ", ".join(f"{family.units[u]} ({rank_text(family, u)})" for u in members)
        parts.append(f"{tier}: {names}")
    return "; ".join(parts)


def _family_label(key: FamilyKey) -> str:
    return key.label


def _share(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.0%}"


def _finite(value: float) -> float:
    return 0.0 if math.isnan(value) else value
