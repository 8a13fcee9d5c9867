"""`write_report`: the report computed once, rendered twice, written as two files."""

from __future__ import annotations

import time
from dataclasses import dataclass

from itemeval.export import OutputDir
from itemeval.planning import Plan
from itemeval.report._data import ReportData, report_data
from itemeval.report._html import report_html
from itemeval.report._markdown import report_markdown
from itemeval.report._summary import Bootstrap

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
