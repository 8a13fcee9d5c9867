"""`itemeval report`: a study's results as a self-contained HTML page and a Markdown summary.

`write_report(plan)` computes the report once (`data`), renders it twice (`html`, `markdown`)
and writes `report.html` and `report.md` under `--out` (default `<store>/exports/`), each file
wholly or not at all.

* `summary`     leaderboards, facet tables, grader agreement, cost, errors and coverage
* `difficulty`  item difficulty as observed: hardest items, items nothing answered right
* `data`        everything a report shows, computed once; the terminal leaderboard
* `tables`      the report's tables as text cells (shared by HTML and Markdown)
* `comparisons` the section "Which differences are real" (numbers from `itemeval.statistics`)
* `svg`         the report's plots, drawn as inline SVG
* `html`, `markdown`   the two renderings
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from itemeval.export._outputs import OutputDir
from itemeval.export._report.data import ReportData, report_data
from itemeval.export._report.html import report_html
from itemeval.export._report.markdown import report_markdown
from itemeval.export._report.summary import Bootstrap
from itemeval.planning import Plan

HTML_FILE = "report.html"
MARKDOWN_FILE = "report.md"


@dataclass(frozen=True)
class ReportResult:
    html: str  # URL of report.html
    markdown: str  # URL of report.md
    seconds: float
    data: ReportData


def write_report(
    plan: Plan, out: str | None = None, bootstrap: Bootstrap | None = None
) -> ReportResult:
    """Compute the report of `plan`'s store and write `report.html` and `report.md`."""
    started = time.monotonic()
    data = report_data(plan, bootstrap)
    target = OutputDir.for_plan(plan, out)
    html = target.write_bytes(HTML_FILE, report_html(data).encode("utf-8"))
    markdown = target.write_bytes(MARKDOWN_FILE, report_markdown(data).encode("utf-8"))
    return ReportResult(html, markdown, time.monotonic() - started, data)
