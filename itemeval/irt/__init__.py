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
