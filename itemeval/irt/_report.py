"""The report's IRT part: items an item response model finds suspicious, next to their text.

`irt_section(plan)` fits the study's own store (nothing written; `analyze_irt` refuses fewer
than `MIN_CONDITIONS` conditions with graded answers, and the section says so), and returns an
`IrtSection` the report's difficulty section renders with `flagged_rows`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from itemeval.errors import InputError
from itemeval.irt._analysis import analyze_irt
from itemeval.irt._flags import FLAG_Q
from itemeval.irt._items import NEGATIVE, ItemParameters
from itemeval.planning import Plan

if TYPE_CHECKING:
    from itemeval.results import StudyCells

#: Flagged items listed in the report (the rest are counted).
MAX_LISTED = 30
FLAG_ORDER = ("negative discrimination", "none right", "all right")

FLAGGED_HEADER = [
    "dataset",
    "item",
    "flag",
    "right / answers",
    "discrimination (SE)",
    "q",
    "intercept (SE)",
    "input",
    "target",
]
FLAGGED_NUMERIC = {3, 4, 5, 6}
FLAGGED_NOTE = (
    "A 2PL item response model fitted to the headline grader's results (docs/irt.md). "
    "Negative discrimination: weaker conditions get the item right more often than stronger "
    "ones, beyond chance (the discrimination is below 0 by a one-sided test on its standard "
    f"error, Benjamini-Hochberg adjusted over the items: q <= {FLAG_Q}); often a wrong target "
    "or an ambiguous question. The intercept is the log-odds of a right answer at ability 0. "
    "Items every answer got right, or none, tell conditions apart not at all."
)


@dataclass(frozen=True)
class IrtSection:
    conditions: int
    items: int
    counts: dict[str, int]  # flag -> items
    flagged: list[ItemParameters]  # the listed ones, worst first
    note: str | None = None  # why nothing was fitted


def irt_section(plan: Plan, cells: StudyCells | None = None) -> IrtSection:
    """The flagged items of the plan's store (see the module doc); `cells` the report read."""
    try:
        result = analyze_irt(plan, write=False, held_out=False, cells=cells)
    except InputError as exc:
        return IrtSection(0, 0, {}, [], note=str(exc.problems[0].message))
    counts = result.items.flag_counts()
    return IrtSection(
        conditions=len(result.conditions),
        items=len(result.items),
        counts={f: counts[f] for f in FLAG_ORDER if f in counts},
        flagged=result.items.suspicious(MAX_LISTED, flags=[NEGATIVE]),
    )


ADAPTIVE_HEADER = [
    "condition",
    "items answered",
    "predicted full accuracy",
    "95% interval",
    "method",
    "ability (SE)",
]
ADAPTIVE_NUMERIC = {1, 2, 3, 5}
ADAPTIVE_NOTE = (
    "Adaptive runs (docs/irt.md): the accuracy each condition is predicted to reach on every "
    "item, from the items it answered. A prediction, not a measurement: the leaderboard above "
    "counts only the items answered so far; `itemeval run --no-adaptive` measures the rest."
)


def adaptive_rows(plan: Plan) -> list[list[str]]:
    """The stored adaptive results (`<store>/analysis/irt/adaptive.json`) as rows under
    `ADAPTIVE_HEADER`; empty when the study ran nothing adaptively."""
    from itemeval.irt._study_run import read_adaptive

    rows = []
    for r in read_adaptive(plan):
        method = "IRT" if r["method"] == "irt" else f"stratified sample: {r['note']}"
        ability = "n/a" if r["ability"] is None else _se(r["ability"], r["ability_se"])
        rows.append(
            [
                r["slug"],
                f"{r['answered']:,} of {r['items']:,} ({r['share']:.0%})",
                f"{r['predicted']:.1%}",
                f"{r['low']:.1%} - {r['high']:.1%}",
                method,
                ability,
            ]
        )
    return rows


def _se(value: float, se: float) -> str:
    if not math.isfinite(value):
        return "n/a"
    return f"{value:.2f} ({se:.2f})" if math.isfinite(se) else f"{value:.2f}"


def q_text(q: float) -> str:
    """An adjusted p-value as the flags table prints it."""
    if not math.isfinite(q):
        return "n/a"
    return "<0.0001" if q < 1e-4 else f"{q:.4f}"


def flagged_rows(section: IrtSection, shorten: object) -> list[list[str]]:
    """Rows under `FLAGGED_HEADER` (`shorten(text, limit)` trims the item's text)."""
    cut = shorten  # the report's own trimming
    return [
        [
            i.dataset,
            i.item_id,
            i.flag or "",
            f"{i.correct:,} / {i.trials:,}",
            _se(i.discrimination, i.discrimination_se),
            q_text(i.discrimination_q),
            _se(i.intercept, i.intercept_se),
            cut(i.input),  # type: ignore[operator]
            cut(i.target, 60),  # type: ignore[operator]
        ]
        for i in section.flagged
    ]


def summary_line(section: IrtSection) -> str:
    if section.note:
        return f"Item response theory: not fitted ({section.note})."
    if not section.counts:
        return (
            f"Item response theory ({section.conditions} conditions x {section.items:,} items): "
            "no suspicious item."
        )
    parts = ", ".join(f"{v:,} {k}" for k, v in section.counts.items())
    return (
        f"Item response theory ({section.conditions} conditions x {section.items:,} items) "
        f"flags: {parts}."
    )
