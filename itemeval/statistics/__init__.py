"""Conclusions the data support: paired comparisons, error bars that fit the design, power.

The public names are `__all__` below, imported on first use; the modules are private (the map;
docs/statistics.md describes each method with its formula):

* `_intervals`     one condition's cluster-bootstrap interval (`bootstrap_proportion`)
* `_tallies`       per-cluster sums and counts per unit: what the paired statistics read
* `_paired`        every pair of a family compared from one shared paired bootstrap: intervals,
                   exact McNemar or a cluster-robust paired t-test, rank intervals, tiers
* `_multiplicity`  Holm and Benjamini-Hochberg adjustments, tiers
* `_components`    variance components: between-item and within-item shares, effective size
* `_power`         items and epochs a paired comparison needs to detect a difference
* `_families`      a study's families (graders x metrics x scopes) from its `StudyCells`
* `_study`         the same from a plan, `analysis.cluster_by` read from the items
* `_tables`        the results as arrow tables (comparisons, rankings, variance components)
* `_planning`      `itemeval plan --detect`: the power plan with the calibrated cost
* `_words`         p-values, ranks and verdicts in words (the report and the viewer)

Nothing here imports scipy at import time: the tests that need it import it when they run, so
the commands that never compare (a run) never pay for it.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_NAMES = {
    "MEAN_SCORE": "itemeval.statistics._families",
    "FamilyKey": "itemeval.statistics._families",
    "Options": "itemeval.statistics._families",
    "StudyStatistics": "itemeval.statistics._families",
    "study_statistics": "itemeval.statistics._families",
    "DEFAULT_CONFIDENCE": "itemeval.statistics._intervals",
    "DEFAULT_RESAMPLES": "itemeval.statistics._intervals",
    "DEFAULT_SEED": "itemeval.statistics._intervals",
    "Proportion": "itemeval.statistics._intervals",
    "bootstrap_proportion": "itemeval.statistics._intervals",
    "MCNEMAR": "itemeval.statistics._paired",
    "PAIRED_T": "itemeval.statistics._paired",
    "Family": "itemeval.statistics._paired",
    "compare": "itemeval.statistics._paired",
    "power_plan_of": "itemeval.statistics._planning",
    "tell_apart": "itemeval.statistics._planning",
    "DesignVariance": "itemeval.statistics._power",
    "PowerPlan": "itemeval.statistics._power",
    "items_needed": "itemeval.statistics._power",
    "analysis_options": "itemeval.statistics._study",
    "item_clusters": "itemeval.statistics._study",
    "plan_statistics": "itemeval.statistics._study",
    "ComparisonTables": "itemeval.statistics._tables",
    "comparisons_table": "itemeval.statistics._tables",
    "components_table": "itemeval.statistics._tables",
    "rankings_table": "itemeval.statistics._tables",
    "Tallies": "itemeval.statistics._tallies",
    "ADJUSTMENTS": "itemeval.statistics._words",
    "p_text": "itemeval.statistics._words",
    "rank_text": "itemeval.statistics._words",
    "verdict": "itemeval.statistics._words",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'itemeval.statistics' has no attribute {name!r}")
    return getattr(import_module(module), name)
