"""The report's pairwise section as tables, for the HTML page and the Markdown summary
(`PAIRWISE_METHOD` says what each number is)."""

from __future__ import annotations

from itemeval.judging import Interval, PairwiseAnalysis
from itemeval.report._tables import TextTable, interval_text

PAIRWISE_METHOD = [
    "Pairwise: each condition's answer against the baseline's to the same item and epoch, "
    "asked in both orders; a win counts 1, a tie 0.5. Intervals are 95%, items as clusters.",
    "Position bias: of the verdicts that pick a side, the share won by the answer shown first "
    "(50% for an unbiased judge).",
    "Length-controlled win rate: a logistic regression of the outcome on the length "
    "difference (tanh-scaled) and the order, predicted at no length difference (like "
    "AlpacaEval's LC); length slope: its log-odds per unit. Bradley-Terry: log-odds strengths, "
    "the baseline at 0. See docs/judges.md.",
]


def pairwise_table(analysis: PairwiseAnalysis) -> TextTable:
    strengths = {s.condition: s for s in analysis.strengths}
    rows = []
    for r in analysis.results:
        s = strengths.get(r.condition)
        bt = "n/a" if s is None else interval_text(Interval(s.value, s.low, s.high, 0))
        rows.append(
            [
                r.condition,
                str(r.verdicts),
                interval_text(r.win_rate),
                interval_text(r.length_controlled),
                interval_text(r.position_first_wins),
                interval_text(r.length_slope),
                bt,
            ]
        )
    header = [
        f"condition vs {analysis.baseline}",
        "verdicts",
        "win rate",
        "length-controlled",
        "first shown wins",
        "length slope",
        "Bradley-Terry",
    ]
    return TextTable(header, rows, numeric={1, 2, 3, 4, 5, 6})


def pairwise_markdown(analyses: list[PairwiseAnalysis]) -> list[str]:
    from itemeval.report._markdown import md_table

    if not analyses:
        return []
    out = ["", "## Pairwise", ""]
    for analysis in analyses:
        out += [
            f"Judge position bias over every pair: first shown wins "
            f"{interval_text(analysis.position_first_wins)}.",
            "",
            md_table(pairwise_table(analysis)),
            "",
        ]
    out += [f"- {line}" for line in PAIRWISE_METHOD]
    return out
