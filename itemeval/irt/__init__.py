"""Item response theory on the store (docs/irt.md).

The public names are `__all__` below, imported on first use (numpy and the store's readers load
only when a name is used); the modules are private:

* `_fit`       1PL and 2PL models by joint MAP (numpy): abilities, difficulties,
               discriminations, standard errors from the joint information, the model choice
               by K-fold held-out log-likelihood
* `_patterns`  items grouped by their column of counts: a fit costs the distinct columns
* `_flags`     which items look broken: counts, and the score test of a negative
               discrimination with Benjamini-Hochberg over the items
* `_responses` the store's results as a conditions x items binomial matrix (other stores'
               responses matched by dataset, id and content hash), the responses written
* `_items`     every item's parameters and flag as columns (`ItemTable`)
* `_analysis`  `analyze_irt(plan)`: the fits, the model chosen, the flagged items, the files
               under `<store>/analysis/irt/`
* `_report`    the report's IRT section (suspicious items next to their text) and its adaptive
               predictions
* `_adaptive`  the adaptive estimator on a calibrated bank (shards, ability, predicted accuracy)
* `_study_run` adaptive conditions in a study run (rounds of ordinary runs; `run_study` calls it)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _fit: HeldOut IrtFit fit_irt held_out_loglik standardize
    _patterns: Patterns item_patterns
    _flags: FLAG_Q benjamini_hochberg discrimination_q item_flag negative_discrimination_p
    _items: ItemParameters ItemTable
    _responses: ANALYSIS_DIR study_responses
    _analysis: HELD_OUT_ITEMS MIN_CONDITIONS ConditionAbility IrtResult analyze_irt
    _adaptive: FLOOR MIN_CALIBRATION WEIGHT Adaptive Bank Estimate choose
    _report: ADAPTIVE_HEADER ADAPTIVE_NOTE ADAPTIVE_NUMERIC FLAGGED_HEADER FLAGGED_NOTE
             FLAGGED_NUMERIC IrtSection adaptive_rows flagged_rows irt_section q_text summary_line
    _study_run: adaptive_costs read_adaptive render_adaptive_costs run_adaptive
    """,
)


if TYPE_CHECKING:
    from itemeval.irt._adaptive import FLOOR as FLOOR
    from itemeval.irt._adaptive import MIN_CALIBRATION as MIN_CALIBRATION
    from itemeval.irt._adaptive import WEIGHT as WEIGHT
    from itemeval.irt._adaptive import Adaptive as Adaptive
    from itemeval.irt._adaptive import Bank as Bank
    from itemeval.irt._adaptive import Estimate as Estimate
    from itemeval.irt._adaptive import choose as choose
    from itemeval.irt._analysis import HELD_OUT_ITEMS as HELD_OUT_ITEMS
    from itemeval.irt._analysis import MIN_CONDITIONS as MIN_CONDITIONS
    from itemeval.irt._analysis import ConditionAbility as ConditionAbility
    from itemeval.irt._analysis import IrtResult as IrtResult
    from itemeval.irt._analysis import analyze_irt as analyze_irt
    from itemeval.irt._fit import HeldOut as HeldOut
    from itemeval.irt._fit import IrtFit as IrtFit
    from itemeval.irt._fit import fit_irt as fit_irt
    from itemeval.irt._fit import held_out_loglik as held_out_loglik
    from itemeval.irt._fit import standardize as standardize
    from itemeval.irt._flags import FLAG_Q as FLAG_Q
    from itemeval.irt._flags import benjamini_hochberg as benjamini_hochberg
    from itemeval.irt._flags import discrimination_q as discrimination_q
    from itemeval.irt._flags import item_flag as item_flag
    from itemeval.irt._flags import negative_discrimination_p as negative_discrimination_p
    from itemeval.irt._items import ItemParameters as ItemParameters
    from itemeval.irt._items import ItemTable as ItemTable
    from itemeval.irt._patterns import Patterns as Patterns
    from itemeval.irt._patterns import item_patterns as item_patterns
    from itemeval.irt._report import ADAPTIVE_HEADER as ADAPTIVE_HEADER
    from itemeval.irt._report import ADAPTIVE_NOTE as ADAPTIVE_NOTE
    from itemeval.irt._report import ADAPTIVE_NUMERIC as ADAPTIVE_NUMERIC
    from itemeval.irt._report import FLAGGED_HEADER as FLAGGED_HEADER
    from itemeval.irt._report import FLAGGED_NOTE as FLAGGED_NOTE
    from itemeval.irt._report import FLAGGED_NUMERIC as FLAGGED_NUMERIC
    from itemeval.irt._report import IrtSection as IrtSection
    from itemeval.irt._report import adaptive_rows as adaptive_rows
    from itemeval.irt._report import flagged_rows as flagged_rows
    from itemeval.irt._report import irt_section as irt_section
    from itemeval.irt._report import q_text as q_text
    from itemeval.irt._report import summary_line as summary_line
    from itemeval.irt._responses import ANALYSIS_DIR as ANALYSIS_DIR
    from itemeval.irt._responses import study_responses as study_responses
    from itemeval.irt._study_run import adaptive_costs as adaptive_costs
    from itemeval.irt._study_run import read_adaptive as read_adaptive
    from itemeval.irt._study_run import render_adaptive_costs as render_adaptive_costs
    from itemeval.irt._study_run import run_adaptive as run_adaptive
