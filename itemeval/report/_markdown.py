"""The report as Markdown: the same sections and numbers as the HTML page, without the plots.

Text from outside the report's own code (items' text and ids, answers, names other tools gave)
must never act as markup in a viewer that renders the HTML Markdown allows: every table cell
and every line of such text has `&`, `<` and `>` written as entities (`md_html`), and the cells
of item and answer columns (`OUTSIDE_COLUMNS`) have Markdown's inline marks escaped too
(`md_text`), so a `<script>`, an `<img onerror>`, a link or an image in them is shown as text.
"""

from __future__ import annotations

import html
import re

import itemeval.irt as irt  # irt writes its own report section's rows and notes
from itemeval.report import _tables as t
from itemeval.report._data import ReportData
from itemeval.report._judge_tables import judges_markdown
from itemeval.report._pairwise_tables import pairwise_markdown


def irt_markdown(data: ReportData) -> list[str]:
    """The difficulty section's IRT part: suspicious items next to their text."""
    if data.irt is None:
        return []
    out = ["", "### Suspicious items (item response theory)", "", irt.summary_line(data.irt)]
    rows = irt.flagged_rows(data.irt, t.shorten)
    if rows:
        flagged = t.TextTable(irt.FLAGGED_HEADER, rows, irt.FLAGGED_NUMERIC)
        out += ["", irt.FLAGGED_NOTE, "", md_table(flagged)]
    return out


#: Table columns whose cells are items' or answers' own text: Markdown escaped as well as HTML.
OUTSIDE_COLUMNS = frozenset({"item", "input", "target", "answer", "response"})
_INLINE_MARKS = re.compile(r"([\\`*_\[\]~])")


def md_html(text: str) -> str:
    """`text` with `&`, `<` and `>` as entities: shown as written, never parsed as HTML."""
    return html.escape(text, quote=False)


def md_text(text: str) -> str:
    """Outside text for a Markdown line or cell: HTML escaped (`md_html`) and Markdown's inline
    marks (emphasis, code, links and images, strike-through, the backslash) escaped."""
    return md_html(_INLINE_MARKS.sub(r"\\\1", text))


def md_table(table: t.TextTable) -> str:
    outside = {i for i, h in enumerate(table.header) if h in OUTSIDE_COLUMNS}

    def cell(text: str, column: int = -1) -> str:
        text = md_text(text) if column in outside else md_html(text)
        return text.replace("|", "\\|").replace("\n", " ")

    align = ["---:" if i in table.numeric else "---" for i in range(len(table.header))]
    lines = [
        "| " + " | ".join(cell(h) for h in table.header) + " |",
        "| " + " | ".join(align) + " |",
    ]
    lines += ["| " + " | ".join(cell(c, i) for i, c in enumerate(row)) + " |" for row in table.rows]
    return "\n".join(lines)


def differences_markdown(data: ReportData) -> list[str]:
    """The section "Which differences are real" (`report.comparisons`)."""
    # imported here: a run imports this module and never compares
    from itemeval.report import _comparisons as cmp

    out = ["", f"## {cmp.TITLE}", "", cmp.note(data), ""]
    line = cmp.headline_verdict(data)
    family = data.headline_family
    if line and family is not None:
        out += [f"**{line}**", ""]
        matrix = cmp.difference_matrix(family)
        if matrix:
            out += ["### Paired differences (row minus column)", "", md_table(matrix), ""]
        out += ["### Every pair", "", md_table(cmp.pairs_table(family)), ""]
    families = cmp.families_table(data)
    if families:
        out += ["### Every family: graders, metrics, models and datasets", ""]
        out += [md_table(families), ""]
    components = cmp.components_table(data)
    if components:
        out += ["### Variance components: more items or more epochs?", ""]
        out += [cmp.COMPONENTS_NOTE, "", md_table(components)]
    return out


def report_markdown(data: ReportData) -> str:
    out: list[str] = [f"# itemeval report: {data.study}", ""]
    if data.description:
        out += [md_html(" ".join(data.description.split())), ""]
    out += [f"Generated {data.generated_at} by itemeval {data.version}. {t.provenance(data)}.", ""]
    out += ["| | | |", "| --- | --- | --- |"]
    out += [
        f"| {label} | {md_html(value.replace('|', '/'))} | {md_html(detail.replace('|', '/'))} |"
        for label, value, detail in t.overview(data)
    ]

    out += ["", "## Leaderboard", "", t.headline_note(data), ""]
    if data.imported:
        out += ["Imported conditions:", ""] + [f"- {md_html(n)}" for n in data.imported] + [""]
    if not data.graded:
        out += [t.NOTHING_GRADED, ""]
    out += [md_table(t.condition_table(data))]
    if data.adaptive:
        table = t.TextTable(irt.ADAPTIVE_HEADER, data.adaptive, irt.ADAPTIVE_NUMERIC)
        out += ["", "### Adaptive runs: predicted accuracy", "", irt.ADAPTIVE_NOTE, ""]
        out += [md_table(table)]
    out += ["", "### By model", ""]
    out += ["Every condition of a model pooled (all its prompts and configs).", ""]
    out += [md_table(t.model_table(data))]
    out += differences_markdown(data)

    if data.by_prompt is not None:
        out += ["", "## Prompt sensitivity", ""]
        out += ["Accuracy (headline grader) of each model under each prompt.", ""]
        out += [md_table(t.facet_matrix(data.by_prompt, "prompt"))]
    if data.by_config is not None:
        out += [
            "",
            "### Model x model config",
            "",
            md_table(t.facet_matrix(data.by_config, "config")),
        ]
    if data.by_dataset is not None:
        out += ["", "### Model x dataset", "", md_table(t.facet_matrix(data.by_dataset, "dataset"))]

    out += ["", "## Grader agreement", ""]
    agreement = t.agreement_table(data)
    out += [md_table(agreement) if agreement else "Only one grader: nothing to compare."]

    out += judges_markdown(data.judges)
    out += pairwise_markdown(data.pairwise)

    out += ["", "## Cost per correct answer", "", t.COST_NOTE, "", md_table(t.cost_table(data))]

    out += ["", "## Errors and parse failures", "", "### Coverage", ""]
    out += [md_table(t.coverage_table(data))]
    for title, counts, what in (
        ("Generation errors", data.errors.generation, "error code"),
        ("Grading errors", data.errors.grading, "error code"),
        ("Judge parse failures", data.errors.parse_failures, "parse code"),
    ):
        out += ["", f"### {title}", ""]
        out += [md_table(t.code_table(counts, what)) if counts else "None."]

    out += ["", "## Item difficulty", "", md_table(t.difficulty_table(data))]
    out += ["", "### Hardest items", "", md_table(t.hardest_table(data))]
    out += ["", "### Items no answer got right", ""]
    unsolved = t.unsolved_table(data)
    out += [
        md_table(unsolved) if unsolved else "None: every item was answered correctly at least once."
    ]
    if t.unsolved_overflow(data):
        out += ["", f"... and {t.unsolved_overflow(data):,} more (see the long table)."]

    out += irt_markdown(data)

    out += ["", "## Method", ""] + [f"- {line}" for line in t.METHOD]
    return "\n".join(out) + "\n"
