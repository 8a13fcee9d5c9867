"""Conclusions the data support: paired comparisons, error bars that fit the design, power.

The public names are `__all__` below, imported on first use; the modules are private (the map;
docs/statistics.md describes each method with its formula):

* `_intervals`     one condition's cluster-bootstrap interval (`bootstrap_proportion`)
* `_agreement`     how often two graders agree: the agreement rate and Cohen's kappa
* `_tallies`       per-cluster sums and counts per unit: what the paired statistics read
* `_paired`        every pair of a family compared from one shared paired bootstrap: intervals,
                   exact McNemar or a cluster-robust paired t-test, rank intervals, tiers
* `_multiplicity`  Holm and Benjamini-Hochberg adjustments, tiers
* `_components`    variance components: between-item and within-item shares, effective size
* `_power`         items and epochs a paired comparison needs to detect a difference
* `_families`      a study's families (graders x metrics x scopes) from its `StudyCells`
* `_study`         the same from a plan (its cells from `itemeval.results`, panels included)
* `_tables`        the results as arrow tables (comparisons, rankings, variance components)
* `_planning`      `itemeval plan --detect`: the power plan with the calibrated cost
* `_words`         p-values, ranks and verdicts in words (the report and the viewer)

Nothing here imports scipy at import time: the tests that need it import it when they run, so
the commands that never compare (a run) never pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

_MODULES: dict[str, tuple[str, ...]] = {
    "_agreement": ("Agreement", "agreement", "cohen_kappa"),
    "_families": ("MEAN_SCORE", "FamilyKey", "Options", "StudyStatistics", "study_statistics"),
    "_intervals": (
        "DEFAULT_CONFIDENCE",
        "DEFAULT_RESAMPLES",
        "DEFAULT_SEED",
        "Proportion",
        "bootstrap_proportion",
    ),
    "_paired": ("MCNEMAR", "PAIRED_T", "Family", "compare"),
    "_planning": ("power_plan_of",),
    "_power": ("DesignVariance", "PowerPlan", "items_needed"),
    "_study": ("analysis_options", "plan_statistics"),
    "_tables": ("ComparisonTables", "comparisons_table", "components_table", "rankings_table"),
    "_tallies": ("Tallies",),
    "_words": ("ADJUSTMENTS", "p_text", "rank_text", "verdict"),
}
__all__, __getattr__, __dir__ = lazy_exports(
    __name__, {name: module for module, names in _MODULES.items() for name in names}
)


if TYPE_CHECKING:
    from itemeval.statistics._agreement import Agreement as Agreement
    from itemeval.statistics._agreement import agreement as agreement
    from itemeval.statistics._agreement import cohen_kappa as cohen_kappa
    from itemeval.statistics._families import MEAN_SCORE as MEAN_SCORE
    from itemeval.statistics._families import FamilyKey as FamilyKey
    from itemeval.statistics._families import Options as Options
    from itemeval.statistics._families import StudyStatistics as StudyStatistics
    from itemeval.statistics._families import study_statistics as study_statistics
    from itemeval.statistics._intervals import DEFAULT_CONFIDENCE as DEFAULT_CONFIDENCE
    from itemeval.statistics._intervals import DEFAULT_RESAMPLES as DEFAULT_RESAMPLES
    from itemeval.statistics._intervals import DEFAULT_SEED as DEFAULT_SEED
    from itemeval.statistics._intervals import Proportion as Proportion
    from itemeval.statistics._intervals import bootstrap_proportion as bootstrap_proportion
    from itemeval.statistics._paired import MCNEMAR as MCNEMAR
    from itemeval.statistics._paired import PAIRED_T as PAIRED_T
    from itemeval.statistics._paired import Family as Family
    from itemeval.statistics._paired import compare as compare
    from itemeval.statistics._planning import power_plan_of as power_plan_of
    from itemeval.statistics._power import DesignVariance as DesignVariance
    from itemeval.statistics._power import PowerPlan as PowerPlan
    from itemeval.statistics._power import items_needed as items_needed
    from itemeval.statistics._study import analysis_options as analysis_options
    from itemeval.statistics._study import plan_statistics as plan_statistics
    from itemeval.statistics._tables import ComparisonTables as ComparisonTables
    from itemeval.statistics._tables import comparisons_table as comparisons_table
    from itemeval.statistics._tables import components_table as components_table
    from itemeval.statistics._tables import rankings_table as rankings_table
    from itemeval.statistics._tallies import Tallies as Tallies
    from itemeval.statistics._words import ADJUSTMENTS as ADJUSTMENTS
    from itemeval.statistics._words import p_text as p_text
    from itemeval.statistics._words import rank_text as rank_text
    from itemeval.statistics._words import verdict as verdict
