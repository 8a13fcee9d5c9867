"""Judges you can trust: panels, agreement, and calibration against gold.

* `verdicts`     graders' verdicts side by side, answer by answer (numpy over the report's cells)
* `panels`       several judges' stored verdicts combined (majority, mean, median; a tie rule)
* `agreement`    a panel's pairwise agreement, error correlation, effective number of judges
* `calibration`  sensitivity and specificity against gold; accuracy corrected for the judge's
                 errors (Rogan-Gladen) with a cluster-bootstrap interval
* `gold`         human labels files and the stratified sample a person labels
* `pairwise`     pairwise verdicts against a baseline: win rate, position bias, length bias,
                 length-controlled win rate, Bradley-Terry strengths (cluster-robust intervals)
* `analysis`     all of it for every judge and panel of a study (`analyse`)

Nothing here reads the store or calls a model: callers hand it the grades (`export/report/
judges.py` for the report, `export` and `Study.judges()`).
"""

from itemeval.judging.agreement import PanelAgreement, panel_agreement
from itemeval.judging.analysis import Grader, JudgeAnalysis, JudgeResult, PanelResult, analyse
from itemeval.judging.calibration import Calibration, Corrected, ErrorRates, calibrate
from itemeval.judging.pairwise import (
    PairwiseAnalysis,
    PairwiseResult,
    analyse_pairwise,
    parse_pairwise_verdict,
)
from itemeval.judging.panels import PanelRule, combine, panel_grades

__all__ = [
    "Calibration",
    "Corrected",
    "ErrorRates",
    "Grader",
    "JudgeAnalysis",
    "JudgeResult",
    "PairwiseAnalysis",
    "PairwiseResult",
    "PanelAgreement",
    "PanelResult",
    "PanelRule",
    "analyse",
    "analyse_pairwise",
    "calibrate",
    "combine",
    "panel_agreement",
    "panel_grades",
    "parse_pairwise_verdict",
]
