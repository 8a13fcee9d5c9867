"""The report as one self-contained HTML page: inline CSS, inline SVG plots, no script, nothing
fetched, so it opens from a laptop, an object store or an e-mail attachment alike."""

from __future__ import annotations

import re
from html import escape

from itemeval.irt import _report as irt  # irt writes its own report section
from itemeval.report import _svg as svg
from itemeval.report import _tables as t
from itemeval.report._data import ReportData
from itemeval.report._judge_tables import judges_html
from itemeval.report._pairwise_tables import pairwise_html
from itemeval.report._summary import FacetTable

_CI = re.compile(r"^(\S+) (\[[^\]]*\])$")

CSS = """
:root { --ink:#1f2937; --muted:#6b7280; --line:#e5e7eb; --accent:#1e40af; --bg:#f5f7fb; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
  font:14px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif; }
header.top { background:#0f172a; color:#f8fafc; padding:28px 48px 24px; }
header.top h1 { margin:0 0 4px; font-size:26px; font-weight:650; letter-spacing:-0.01em; }
header.top .sub { color:#cbd5e1; max-width:900px; }
header.top .meta { color:#94a3b8; font-size:12px; margin-top:8px; }
nav.toc { background:#fff; border-bottom:1px solid var(--line); padding:10px 48px;
  position:sticky; top:0; z-index:2; }
nav.toc a { color:var(--accent); text-decoration:none; margin-right:18px; font-size:13px; }
main { max-width:1240px; margin:0 auto; padding:20px 48px 64px; }
.cards { display:grid; grid-template-columns:repeat(auto-fit,minmax(210px,1fr)); gap:12px;
  margin:8px 0 4px; }
.card { background:#fff; border:1px solid var(--line); border-radius:10px; padding:12px 16px; }
.card .k { color:var(--muted); font-size:11px; text-transform:uppercase; letter-spacing:.06em; }
.card .v { font-size:22px; font-weight:650; margin-top:2px; overflow-wrap:anywhere;
  font-variant-numeric:tabular-nums; }
.card .d { color:var(--muted); font-size:12px; margin-top:2px; }
section { background:#fff; border:1px solid var(--line); border-radius:12px;
  padding:20px 26px 10px; margin:18px 0; }
h2 { font-size:19px; margin:0 0 4px; letter-spacing:-0.01em; }
h3 { font-size:15px; margin:20px 0 6px; }
p.note { color:var(--muted); margin:2px 0 12px; max-width:980px; }
.scroll { overflow-x:auto; }
table { border-collapse:collapse; width:100%; margin:6px 0 16px; font-size:13px; }
th, td { padding:6px 10px; border-bottom:1px solid var(--line); text-align:left;
  vertical-align:top; }
th { background:#f1f5f9; color:#334155; font-weight:600; white-space:nowrap; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
tbody tr:nth-child(even) td { background:#fafbfc; }
tbody tr:hover td { background:#eef2ff; }
.ci { color:var(--muted); font-size:12px; }
figure { margin:12px 0 18px; }
figure svg { display:block; }
.grid2 { display:grid; grid-template-columns:repeat(auto-fit,minmax(460px,1fr)); gap:8px 28px; }
.empty { color:var(--muted); font-style:italic; margin:4px 0 14px; }
ul.method { color:#374151; padding-left:20px; max-width:1000px; }
ul.method li { margin:6px 0; }
footer { color:var(--muted); font-size:12px; text-align:center; padding:8px 0 28px; }
"""


def _cell(text: str) -> str:
    match = _CI.match(text)
    if match:
        return f"<b>{escape(match.group(1))}</b> <span class='ci'>{escape(match.group(2))}</span>"
    return escape(text)


def html_table(table: t.TextTable, *, table_id: str | None = None, empty: str = "None.") -> str:
    if not table:
        return f"<p class='empty'>{escape(empty)}</p>"
    head = "".join(
        f"<th class='num'>{escape(h)}</th>" if i in table.numeric else f"<th>{escape(h)}</th>"
        for i, h in enumerate(table.header)
    )
    body = []
    for row in table.rows:
        cells = "".join(
            f"<td class='num'>{_cell(c)}</td>" if i in table.numeric else f"<td>{_cell(c)}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    attr = f" id='{escape(table_id)}'" if table_id else ""
    return (
        f"<div class='scroll'><table{attr}><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _figure(name: str, content: str) -> str:
    return f"<figure data-plot='{escape(name)}'>{content}</figure>"


# -- plots ------------------------------------------------------------------------------------


def leaderboard_plot(data: ReportData) -> str | None:
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


def heatmap_plot(table: FacetTable | None, title: str) -> str | None:
    if table is None or not table.cells:
        return None
    values = {key: p.value for key, p in table.cells.items() if p.defined}
    return svg.heatmap(table.rows, table.columns, values, title=title)


def cost_plot(data: ReportData) -> str | None:
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


def difficulty_plot(data: ReportData) -> str | None:
    series = {d.dataset: d.accuracies for d in data.difficulty if len(d.accuracies)}
    if not series:
        return None
    return svg.histogram(
        series,
        title="Items by observed accuracy (all conditions and epochs pooled)",
        x_label="share of correct answers per item",
    )


def differences_section(data: ReportData) -> str:
    """The section "Which differences are real" (`report.comparisons`)."""
    # imported here: a run imports this module and never compares
    from itemeval.report import _comparisons as cmp

    parts = [f"<section id='differences'><h2>{escape(cmp.TITLE)}</h2>"]
    parts.append(f"<p class='note'>{escape(cmp.note(data))}</p>")
    line = cmp.headline_verdict(data)
    family = data.headline_family
    if line and family is not None:
        parts.append(f"<p><b>{escape(line)}</b></p>")
        matrix = cmp.difference_matrix(family)
        if matrix:
            parts.append("<h3>Paired differences (row minus column)</h3>")
            parts.append(html_table(matrix, table_id="difference-matrix"))
        plot = cmp.difference_plot(family)
        if plot:
            parts.append(_figure("differences", plot))
        parts.append("<h3>Every pair</h3>")
        parts.append(html_table(cmp.pairs_table(family), table_id="pairs"))
    families = cmp.families_table(data)
    if families:
        parts.append("<h3>Every family: graders, metrics, models and datasets</h3>")
        parts.append(html_table(families, table_id="families"))
    components = cmp.components_table(data)
    if components:
        parts.append("<h3>Variance components: more items or more epochs?</h3>")
        parts.append(f"<p class='note'>{escape(cmp.COMPONENTS_NOTE)}</p>")
        parts.append(html_table(components, table_id="variance-components"))
    parts.append("</section>")
    return "".join(parts)


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


def irt_html(data: ReportData) -> str:
    """The difficulty section's IRT part: suspicious items next to their text."""
    if data.irt is None:
        return ""
    out = "<h3>Suspicious items (item response theory)</h3>"
    out += f"<p class='note'>{escape(irt.summary_line(data.irt))}</p>"
    rows = irt.flagged_rows(data.irt, t.shorten)
    if rows:
        out += f"<p class='note'>{escape(irt.NOTE)}</p>"
        out += html_table(t.TextTable(irt.HEADER, rows, irt.NUMERIC), table_id="irt-flagged")
    return out


def report_html(data: ReportData) -> str:
    parts: list[str] = []
    add = parts.append
    add("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>")
    add("<meta name='viewport' content='width=device-width, initial-scale=1'>")
    add(f"<title>itemeval report: {escape(data.study)}</title><style>{CSS}</style></head><body>")
    add("<header class='top'>")
    add(f"<h1>itemeval report: {escape(data.study)}</h1>")
    if data.description:
        add(f"<div class='sub'>{escape(' '.join(data.description.split()))}</div>")
    add(
        f"<div class='meta'>Generated {escape(data.generated_at)} by itemeval "
        f"{escape(data.version)} · {escape(t.provenance(data))}</div>"
    )
    add("</header><nav class='toc'>")
    add("".join(f"<a href='#{s}'>{escape(title)}</a>" for s, title in _SECTIONS))
    add("</nav><main>")
    add("<div class='cards'>")
    for label, value, detail in t.overview(data):
        add(
            f"<div class='card'><div class='k'>{escape(label)}</div>"
            f"<div class='v'>{escape(value)}</div><div class='d'>{escape(detail)}</div></div>"
        )
    add("</div>")

    add("<section id='leaderboard-section'><h2>Leaderboard</h2>")
    add(f"<p class='note'>{escape(t.headline_note(data))}</p>")
    if data.imported:
        items = "".join(f"<li>{escape(note)}</li>" for note in data.imported)
        add(f"<p class='note'>Imported conditions:</p><ul class='note'>{items}</ul>")
    if not data.graded:
        add(f"<p class='empty'>{escape(t.NOTHING_GRADED)}</p>")
    add(html_table(t.condition_table(data), table_id="leaderboard", empty="Nothing graded yet."))
    plot = leaderboard_plot(data)
    if plot:
        add(_figure("leaderboard", plot))
    if data.adaptive:
        add("<h3>Adaptive runs: predicted accuracy</h3>")
        add(f"<p class='note'>{escape(irt.ADAPTIVE_NOTE)}</p>")
        adaptive = t.TextTable(irt.ADAPTIVE_HEADER, data.adaptive, irt.ADAPTIVE_NUMERIC)
        add(html_table(adaptive, table_id="adaptive"))
    add("<h3>By model</h3><p class='note'>Every condition of a model pooled.</p>")
    add(html_table(t.model_table(data), table_id="leaderboard-models"))
    add("</section>")
    add(differences_section(data))

    add("<section id='prompts'><h2>Prompt sensitivity</h2>")
    add(
        "<p class='note'>Accuracy under the headline grader of each model with each prompt; "
        "the spread is the gap between its best and worst prompt.</p>"
    )
    if data.by_prompt is not None:
        add(html_table(t.facet_matrix(data.by_prompt, "prompt"), table_id="model-prompt"))
    plots = [
        heatmap_plot(data.by_prompt, "Model x prompt accuracy"),
        heatmap_plot(data.by_dataset, "Model x dataset accuracy"),
    ]
    add("<div class='grid2'>")
    for name, plot in zip(("model-prompt", "model-dataset"), plots, strict=True):
        if plot:
            add(_figure(name, plot))
    add("</div>")
    if data.by_config is not None:
        add("<h3>Model x model config</h3>")
        add(html_table(t.facet_matrix(data.by_config, "config"), table_id="model-config"))
    if data.by_dataset is not None:
        add("<h3>Model x dataset</h3>")
        add(html_table(t.facet_matrix(data.by_dataset, "dataset"), table_id="model-dataset"))
    add("</section>")

    add("<section id='agreement'><h2>Grader agreement</h2>")
    add(
        "<p class='note'>How often two graders give the same verdict on the same answers, and "
        "Cohen's kappa (agreement beyond chance).</p>"
    )
    add(
        html_table(
            t.agreement_table(data),
            table_id="agreement-table",
            empty="Only one grader: nothing to compare.",
        )
    )
    add("</section>")

    add(judges_html(data.judges))
    add(pairwise_html(data.pairwise))

    add("<section id='cost'><h2>Cost per correct answer</h2>")
    add(f"<p class='note'>{escape(t.COST_NOTE)}</p>")
    add(html_table(t.cost_table(data), table_id="cost-table"))
    plot = cost_plot(data)
    if plot:
        add(_figure("cost", plot))
    add("</section>")

    add("<section id='errors'><h2>Errors and parse failures</h2>")
    add("<h3>Coverage</h3><p class='note'>Cells the design asks for, and where they stand.</p>")
    add(html_table(t.coverage_table(data), table_id="coverage"))
    for title, counts, what, key in (
        ("Generation errors", data.errors.generation, "error code", "generation-errors"),
        ("Grading errors", data.errors.grading, "error code", "grading-errors"),
        ("Judge parse failures", data.errors.parse_failures, "parse code", "parse-failures"),
    ):
        add(f"<h3>{escape(title)}</h3>")
        add(html_table(t.code_table(counts, what), table_id=key))
    add("</section>")

    add("<section id='difficulty'><h2>Item difficulty</h2>")
    add(
        "<p class='note'>Per item, the share of correct answers over every condition and "
        "epoch (headline grader).</p>"
    )
    add(html_table(t.difficulty_table(data), table_id="difficulty-table"))
    plot = difficulty_plot(data)
    if plot:
        add(_figure("difficulty", plot))
    add("<h3>Hardest items</h3>")
    add(html_table(t.hardest_table(data), table_id="hardest"))
    add("<h3>Items no answer got right</h3>")
    add("<p class='note'>Often broken items: a wrong target, an ambiguous question.</p>")
    add(
        html_table(
            t.unsolved_table(data),
            table_id="unsolved",
            empty="None: every item was answered correctly at least once.",
        )
    )
    if t.unsolved_overflow(data):
        add(f"<p class='note'>... and {t.unsolved_overflow(data):,} more (see the long table).</p>")
    add(irt_html(data))
    add("</section>")

    add("<section id='method'><h2>Method</h2><ul class='method'>")
    add("".join(f"<li>{escape(line)}</li>" for line in t.METHOD))
    add("</ul></section></main>")
    add(f"<footer>itemeval {escape(data.version)} · {escape(data.store)}</footer></body></html>")
    return "".join(parts)
