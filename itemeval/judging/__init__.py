"""Judges you can trust: panels, agreement, and calibration against gold.

The public names are the ones below; the modules are private:

* `_verdicts`     graders' verdicts side by side, answer by answer (numpy over the report's cells)
* `_panels`       several judges' stored verdicts combined (majority, mean, median; a tie rule)
* `_agreement`    a panel's pairwise agreement, error correlation, effective number of judges
* `_calibration`  sensitivity and specificity against gold; accuracy corrected for the judge's
                  errors (Rogan-Gladen) with a cluster-bootstrap interval
* `_gold`         human labels files and the stratified sample a person labels
* `_pairwise`     pairwise verdicts against a baseline: win rate, position bias, length bias,
                  length-controlled win rate, Bradley-Terry strengths (cluster-robust intervals)
* `_analysis`     all of it for every judge and panel of a study (`analyse`)
* `_study`        a study's cells with its panels as graders (`study_cells`), and every judge
                  and panel against gold from its store (`study_judges`)
* `_study_pairwise`  a study's pairwise verdicts from its store (`study_pairwise`)

Nothing here calls a model; only `_study` and `_study_pairwise` read the store, through
`itemeval.results`. The rest takes the grades from its callers.
"""

from itemeval.judging._agreement import PanelAgreement, panel_agreement
from itemeval.judging._analysis import Grader, JudgeAnalysis, JudgeResult, PanelResult, analyse
from itemeval.judging._calibration import (
    Calibration,
    Corrected,
    ErrorRates,
    Estimate,
    Rate,
    calibrate,
)
from itemeval.judging._gold import (
    Labels,
    read_label_rows,
    resolve_labels,
    sample_rows,
    write_labels_file,
)
from itemeval.judging._pairwise import (
    OUTCOME,
    PAIRWISE_SCHEMA,
    Interval,
    PairwiseAnalysis,
    PairwiseResult,
    analyse_pairwise,
    parse_pairwise_verdict,
)
from itemeval.judging._panels import PanelRule, combine, panel_grades
from itemeval.judging._study import judge_analysis, study_cells, study_judges, with_panels
from itemeval.judging._study_pairwise import study_pairwise
from itemeval.judging._verdicts import Shape, column, merge_gold

__all__ = [
    "OUTCOME",
    "PAIRWISE_SCHEMA",
    "Calibration",
    "Corrected",
    "ErrorRates",
    "Estimate",
    "Grader",
    "Interval",
    "JudgeAnalysis",
    "JudgeResult",
    "Labels",
    "PairwiseAnalysis",
    "PairwiseResult",
    "PanelAgreement",
    "PanelResult",
    "PanelRule",
    "Rate",
    "Shape",
    "analyse",
    "analyse_pairwise",
    "calibrate",
    "column",
    "combine",
    "judge_analysis",
    "merge_gold",
    "panel_agreement",
    "panel_grades",
    "parse_pairwise_verdict",
    "read_label_rows",
    "resolve_labels",
    "sample_rows",
    "study_cells",
    "study_judges",
    "study_pairwise",
    "with_panels",
    "write_labels_file",
]
