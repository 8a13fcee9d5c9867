"""Conclusions the data support: paired comparisons, error bars that fit the design, power.

The map (docs/statistics.md describes each method with its formula):

* `intervals`     one condition's cluster-bootstrap interval (`bootstrap_proportion`)
* `tallies`       per-cluster sums and counts per unit: what the paired statistics read
* `paired`        every pair of a family compared from one shared paired bootstrap: intervals,
                  exact McNemar or a cluster-robust paired t-test, rank intervals, tiers
* `multiplicity`  Holm and Benjamini-Hochberg adjustments, tiers
* `components`    variance components: between-item and within-item shares, effective size
* `power`         items and epochs a paired comparison needs to detect a difference
* `families`      a study's families (graders x metrics x scopes) from its `StudyCells`
* `study`         the same from a plan, `analysis.cluster_by` read from the items
* `tables`        the results as arrow tables (comparisons, rankings, variance components)
* `planning`      `itemeval plan --detect`: the power plan with the calibrated cost

Nothing here imports scipy at import time: the tests that need it import it when they run, so
the commands that never compare (a run) never pay for it.
"""
