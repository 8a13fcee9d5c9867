"""The judges section of the report as tables, for the HTML page and the Markdown summary
(`JUDGE_METHOD` says what each number is)."""

from __future__ import annotations

from itemeval.judging import JudgeAnalysis
from itemeval.report._tables import TextTable, interval_text


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def error_rate_table(analysis: JudgeAnalysis) -> TextTable:
    rows = []
    for judge in analysis.judges:
        c = judge.calibration
        if c is None:
            continue
        rows.append(
            [
                judge.grader.label,
                f"{c.rates.agreement.n:,}",
                interval_text(c.rates.sensitivity),
                interval_text(c.rates.specificity),
                _p(c.rates.false_pass),
                _p(c.rates.false_fail),
            ]
        )
    header = [
        "judge",
        "answers with gold",
        "sensitivity",
        "specificity",
        "false pass",
        "false fail",
    ]
    return TextTable(header, rows, {1, 2, 3, 4, 5})


def corrected_table(analysis: JudgeAnalysis) -> TextTable:
    rows = []
    for judge in analysis.judges:
        c = judge.calibration
        if c is None:
            continue
        for line in c.groups:
            name = "all answers" if line.group is None else analysis.groups[line.group]
            rows.append(
                [
                    judge.grader.label,
                    name,
                    f"{line.judged:,}",
                    interval_text(line.raw),
                    interval_text(line.corrected),
                    interval_text(line.bias, "+"),
                    interval_text(line.gold) if line.gold.n else "n/a",
                ]
            )
    header = [
        "judge",
        "condition",
        "judged",
        "raw judged accuracy",
        "corrected accuracy",
        "raw - corrected",
        "gold accuracy (answers with gold)",
    ]
    return TextTable(header, rows, {2, 3, 4, 5, 6})


def panel_table(analysis: JudgeAnalysis) -> TextTable:
    rows = []
    for panel in analysis.panels:
        a = panel.agreement
        for pair in a.pairs:
            rows.append(
                [
                    panel.grader.label,
                    f"{panel.member_labels[pair.first]} / {panel.member_labels[pair.second]}",
                    f"{pair.answers:,}",
                    _p(pair.agreement),
                    _p(pair.kappa),
                    _p(pair.error_correlation),
                ]
            )
        effective = (
            "n/a (needs gold)"
            if a.effective_judges is None
            else (f"{a.effective_judges:.2f} of {a.members}")
        )
        rows.append(
            [
                panel.grader.label,
                "effective independent judges",
                "",
                "",
                "",
                f"mean r {_p(a.mean_error_correlation)}; {effective}",
            ]
        )
    header = ["panel", "members", "answers", "agreement", "kappa", "error correlation"]
    return TextTable(header, rows, {2, 3, 4})


JUDGE_METHOD = [
    "Gold: the verdicts of the study's gold scorer and/or its labels file (labels win where "
    "both give one); every number below is on the answers that have a gold verdict, except the "
    "raw and corrected accuracies, which are on every answer the judge graded.",
    "Sensitivity: the share of gold passes the judge passed; specificity: the share of gold "
    "fails it failed. False pass = 1 - specificity, false fail = 1 - sensitivity. Their 95% "
    "intervals are Wilson intervals at the effective number of answers that the cluster "
    "bootstrap below finds (an item's answers, which often share their text and the judge's "
    "verdict, count as what they are worth, not as independent answers).",
    "Corrected accuracy (Rogan-Gladen): (raw + specificity - 1) / (sensitivity + specificity - "
    "1), clipped to [0, 1]; its 95% interval is a cluster bootstrap over items (or the clusters "
    "of analysis.cluster_by) that redraws the gold answers too, so it carries the uncertainty of "
    "the error rates. Raw - corrected: how far the judge's own figure is off.",
    "Panels: verdicts combined from the members' stored grades (no model calls); an answer a "
    "member failed to parse has no panel verdict and counts as the panel's parse failure. Error "
    "correlation: Pearson correlation of two members' error indicators on answers with gold; "
    "effective independent judges: m / (1 + (m - 1) r) with r the mean error correlation.",
]


def judges_markdown(analysis: JudgeAnalysis | None) -> list[str]:
    """The Markdown lines of the judges section (empty without judges)."""
    from itemeval.report._markdown import md_table

    if analysis is None:
        return []
    out = ["", "## Judges", ""]
    out += [f"Gold: {analysis.gold_source or 'none (set `gold:` in the study)'}.", ""]
    out += [f"- {note}" for note in analysis.notes]
    rates = error_rate_table(analysis)
    if rates:
        out += ["### Error rates against gold", "", md_table(rates), ""]
        out += ["### Accuracy corrected for the judge's errors", ""]
        out += [md_table(corrected_table(analysis)), ""]
    panels = panel_table(analysis)
    if panels:
        out += ["### Panels", "", md_table(panels), ""]
    out += [f"- {line}" for line in JUDGE_METHOD]
    return out
