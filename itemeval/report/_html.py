"""The report as one self-contained HTML page: inline CSS, inline SVG plots, no script, nothing
fetched, so it opens from a laptop, an object store or an e-mail attachment alike.

This module gathers what the page shows (`_page`: tables as text cells, plots as SVG, notes);
the Jinja2 templates in `templates/` lay it out (`report.html` and the sections it includes,
`_macros.html` the tables and figures, `report.css` the style).
"""

from __future__ import annotations

import re
from typing import Any

from itemeval.irt import (
    ADAPTIVE_HEADER,
    ADAPTIVE_NOTE,
    ADAPTIVE_NUMERIC,
    FLAGGED_HEADER,
    FLAGGED_NOTE,
    FLAGGED_NUMERIC,
    flagged_rows,
    summary_line,
)
from itemeval.report import _svg as svg
from itemeval.report import _tables as t
from itemeval.report._data import ReportData
from itemeval.report._judge_tables import (
    JUDGE_METHOD,
    corrected_table,
    error_rate_table,
    panel_table,
)
from itemeval.report._pairwise_tables import PAIRWISE_METHOD, pairwise_table
from itemeval.report._summary import FacetTable
from itemeval.report._templates import ENV, render

_CI = re.compile(r"^(\S+) (\[[^\]]*\])$")


def interval_parts(text: str) -> tuple[str, str] | None:
    """`("0.812", "[0.75, 0.86]")` of a cell "0.812 [0.75, 0.86]" (None for any other text): the
    page shows the value bold and the interval muted."""
    match = _CI.match(text)
    return (match.group(1), match.group(2)) if match else None


ENV.globals["interval_parts"] = interval_parts


# -- plots ------------------------------------------------------------------------------------


def leaderboard_plot(data: ReportData) -> svg.Markup | None:
    board = data.leaderboard
    if board.primary is None:
        return None
    models = data.facets.models
    rows = []
    for line in board.conditions:
        value = board.headline(line)
        if value is None or not value.defined or line.generate is None:
            continue
        rows.append(
            svg.IntervalRow(
                line.name,
                value.value,
                value.low,
                value.high,
                models.index(line.generate.model_name),
            )
        )
    if not rows:
        return None
    return svg.interval_chart(
        rows,
        title=f"Accuracy with 95% interval ({board.primary.label})",
        axis_label="accuracy",
    )


def heatmap_plot(table: FacetTable | None, title: str) -> svg.Markup | None:
    if table is None or not table.cells:
        return None
    values = {key: p.value for key, p in table.cells.items() if p.defined}
    return svg.heatmap(table.rows, table.columns, values, title=title)


def cost_plot(data: ReportData) -> svg.Markup | None:
    board = data.leaderboard
    if board.primary is None:
        return None
    accuracy = {
        line.generate.id: board.headline(line) for line in board.conditions if line.generate
    }
    models = data.facets.models
    points = []
    for cost in data.costs:
        value = accuracy.get(cost.generate.id)
        if value is None or not value.defined or cost.per_correct is None:
            continue
        points.append(
            svg.Point(
                cost.generate.slug,
                cost.per_correct,
                value.value,
                models.index(cost.generate.model_name),
            )
        )
    if not points:
        return None
    return svg.scatter(
        points,
        title="Cost per correct answer vs accuracy",
        x_label="USD per correct answer (alone: every call at its price)",
        y_label="accuracy",
        legend=models,
    )


def difficulty_plot(data: ReportData) -> svg.Markup | None:
    series = {d.dataset: d.accuracies for d in data.difficulty if len(d.accuracies)}
    if not series:
        return None
    return svg.histogram(
        series,
        title="Items by observed accuracy (all conditions and epochs pooled)",
        x_label="share of correct answers per item",
    )


def _differences(data: ReportData) -> dict[str, Any]:
    """The section "Which differences are real" (`_comparisons`)."""
    # imported here: a run imports this module and never compares
    from itemeval.report import _comparisons as cmp

    line = cmp.headline_verdict(data)
    family = data.headline_family
    shown = family if line and family is not None else None
    return {
        "title": cmp.TITLE,
        "note": cmp.note(data),
        "verdict": line if shown is not None else None,
        "matrix": cmp.difference_matrix(shown) if shown is not None else None,
        "plot": cmp.difference_plot(shown) if shown is not None else None,
        "pairs": cmp.pairs_table(shown) if shown is not None else None,
        "families": cmp.families_table(data),
        "components": cmp.components_table(data),
        "components_note": cmp.COMPONENTS_NOTE,
    }


def _judges(data: ReportData) -> dict[str, Any] | None:
    analysis = data.judges
    if analysis is None:
        return None
    return {
        "gold": analysis.gold_source or "none (set gold: in the study)",
        "notes": analysis.notes,
        "rates": error_rate_table(analysis),
        "corrected": corrected_table(analysis),
        "panels": panel_table(analysis),
        "method": JUDGE_METHOD,
    }


def _pairwise(data: ReportData) -> dict[str, Any] | None:
    if not data.pairwise:
        return None
    return {
        "analyses": [
            (t.interval_text(a.position_first_wins), pairwise_table(a)) for a in data.pairwise
        ],
        "method": PAIRWISE_METHOD,
    }


def _irt(data: ReportData) -> dict[str, Any] | None:
    """The difficulty section's IRT part: suspicious items next to their text."""
    if data.irt is None:
        return None
    rows = flagged_rows(data.irt, t.shorten)
    return {
        "summary": summary_line(data.irt),
        "note": FLAGGED_NOTE,
        "flagged": t.TextTable(FLAGGED_HEADER, rows, FLAGGED_NUMERIC) if rows else None,
    }


# -- the page ---------------------------------------------------------------------------------

_SECTIONS = [
    ("leaderboard-section", "Leaderboard"),
    ("differences", "Differences"),
    ("prompts", "Prompt sensitivity"),
    ("agreement", "Grader agreement"),
    ("judges", "Judges"),
    ("cost", "Cost"),
    ("errors", "Errors"),
    ("difficulty", "Item difficulty"),
    ("method", "Method"),
]


def _page(data: ReportData) -> dict[str, Any]:
    """What `templates/report.html` shows."""

    def matrix(table: FacetTable | None, column: str) -> t.TextTable | None:
        return None if table is None else t.facet_matrix(table, column)

    overflow = t.unsolved_overflow(data)
    errors, code = data.errors, "error code"
    adaptive = t.TextTable(ADAPTIVE_HEADER, data.adaptive, ADAPTIVE_NUMERIC)
    return {
        "study": data.study,
        "description": " ".join(data.description.split()) if data.description else None,
        "generated_at": data.generated_at,
        "version": data.version,
        "provenance": t.provenance(data),
        "store": data.store,
        "sections": _SECTIONS,
        "cards": t.overview(data),
        "headline_note": t.headline_note(data),
        "imported": data.imported,
        "nothing_graded": None if data.graded else t.NOTHING_GRADED,
        "adaptive": {"note": ADAPTIVE_NOTE, "table": adaptive} if data.adaptive else None,
        "tables": {
            "conditions": t.condition_table(data),
            "models": t.model_table(data),
            "by_prompt": matrix(data.by_prompt, "prompt"),
            "by_config": matrix(data.by_config, "config"),
            "by_dataset": matrix(data.by_dataset, "dataset"),
            "agreement": t.agreement_table(data),
            "cost": t.cost_table(data),
            "coverage": t.coverage_table(data),
            "difficulty": t.difficulty_table(data),
            "hardest": t.hardest_table(data),
            "unsolved": t.unsolved_table(data),
        },
        "plots": {
            "leaderboard": leaderboard_plot(data),
            "by_prompt": heatmap_plot(data.by_prompt, "Model x prompt accuracy"),
            "by_dataset": heatmap_plot(data.by_dataset, "Model x dataset accuracy"),
            "cost": cost_plot(data),
            "difficulty": difficulty_plot(data),
        },
        "error_tables": [
            ("Generation errors", t.code_table(errors.generation, code), "generation-errors"),
            ("Grading errors", t.code_table(errors.grading, code), "grading-errors"),
            (
                "Judge parse failures",
                t.code_table(errors.parse_failures, "parse code"),
                "parse-failures",
            ),
        ],
        "cost_note": t.COST_NOTE,
        "unsolved_overflow": f"{overflow:,}" if overflow else None,
        "differences": _differences(data),
        "judges": _judges(data),
        "pairwise": _pairwise(data),
        "irt": _irt(data),
        "method": t.METHOD,
    }


def report_html(data: ReportData) -> str:
    return str(render("report.html", **_page(data)))
