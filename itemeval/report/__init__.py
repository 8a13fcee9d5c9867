"""`itemeval report`: a study's results as a self-contained HTML page and a Markdown summary,
and the numbers every reader shows (`study_numbers`: the report, `itemeval status`, the viewer).

`write_report(plan)` computes the report once (`_data`), renders it twice (`_html` through the
Jinja2 templates in `templates/`, `_markdown`) and writes `report.html` and `report.md` under
`--out` (default `<store>/exports/`, through `itemeval.export`'s output directories), each file
wholly or not at all. The public names are `__all__` below, imported on first use; the modules
are private:

* `_summary`     leaderboards, facet tables, grader agreement, cost, errors and coverage
* `_costs`       each condition's cost: paid, saved by the response cache, alone, per correct
* `_numbers`     `study_numbers`: the leaderboard, its tiers and the costs, computed in one place
* `_kept_numbers` what `itemeval status` showed, kept beside the store under a key of its inputs
* `_difficulty`  item difficulty as observed: hardest items, items nothing answered right
* `_data`        everything a report shows, computed once; the terminal leaderboard
* `_tables`      the report's tables as text cells (shared by HTML and Markdown)
* `_comparisons` the section "Which differences are real" (numbers from `itemeval.statistics`)
* `_judge_tables`, `_pairwise_tables`  the judges' and the pairwise sections' tables
* `_svg`         the report's plots, drawn as inline SVG
* `_html`, `_markdown`   the two renderings; `_write` the two files
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

if TYPE_CHECKING:
    from itemeval.report._costs import Cost as Cost
    from itemeval.report._costs import costs as costs
    from itemeval.report._data import ReportData as ReportData
    from itemeval.report._data import format_leaderboard as format_leaderboard
    from itemeval.report._data import leaderboard_text as leaderboard_text
    from itemeval.report._data import report_data as report_data
    from itemeval.report._data import text_table as text_table
    from itemeval.report._kept_numbers import keep_numbers as keep_numbers
    from itemeval.report._kept_numbers import kept_numbers as kept_numbers
    from itemeval.report._kept_numbers import numbers_key as numbers_key
    from itemeval.report._numbers import StudyNumbers as StudyNumbers
    from itemeval.report._numbers import study_numbers as study_numbers
    from itemeval.report._summary import Bootstrap as Bootstrap
    from itemeval.report._summary import Errors as Errors
    from itemeval.report._summary import ItemCounts as ItemCounts
    from itemeval.report._summary import Leaderboard as Leaderboard
    from itemeval.report._summary import Ranked as Ranked
    from itemeval.report._summary import errors as errors
    from itemeval.report._summary import fmt_proportion as fmt_proportion
    from itemeval.report._summary import fmt_usd as fmt_usd
    from itemeval.report._write import HTML_FILE as HTML_FILE
    from itemeval.report._write import MARKDOWN_FILE as MARKDOWN_FILE
    from itemeval.report._write import ReportResult as ReportResult
    from itemeval.report._write import write_report as write_report

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _write: HTML_FILE MARKDOWN_FILE ReportResult write_report
    _data: ReportData format_leaderboard leaderboard_text report_data text_table
    _numbers: StudyNumbers study_numbers
    _kept_numbers: keep_numbers kept_numbers numbers_key
    _costs: Cost costs
    _summary: Bootstrap Errors ItemCounts Leaderboard Ranked errors fmt_proportion fmt_usd
    """,
)
