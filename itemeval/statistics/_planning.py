"""`itemeval plan --detect`: the power plan of a study, from its store's results when it has any.

`store_variance` learns the variance of per-item differences from the headline grader's stored
grades (every pair of generate conditions on the items both graded; `power.DesignVariance`),
with `analysis.cluster_by`'s design effect; `power_plan_of` puts it together with the calibrated
cost of one item at one epoch for every condition (the plan's estimate over its cells).
`tell_apart` is `status`'s answer: can the data already tell the conditions apart?
"""

from __future__ import annotations

import math

import numpy as np

from itemeval.export._table.cells import StudyCells, read_cells
from itemeval.export._table.conditions import primary_grader
from itemeval.planning import Plan
from itemeval.statistics._families import Clusters
from itemeval.statistics._power import DesignVariance, PowerPlan, power_plan
from itemeval.statistics._study import item_clusters, plan_statistics
from itemeval.statistics._words import verdict


def store_variance(cells: StudyCells, clusters: Clusters | None = None) -> DesignVariance | None:
    """The design's variance learned from stored grades (None when too little is stored)."""
    grader = primary_grader(cells.facets.grade)
    if grader is None:
        return None
    grades = cells.valid_grades(cells.facets.grade.index(grader))
    k = len(cells.facets.generate)
    if grades.num_rows == 0 or k < 2:
        return None
    items = cells.items.num_rows
    gen = grades.column("gen").to_numpy().astype(np.int64)
    item = grades.column("item").to_numpy().astype(np.int64)
    value = grades.column("correct").to_numpy(zero_copy_only=False).astype(np.float64)
    flat = gen * items + item
    shape = (k, items)
    sums = np.bincount(flat, weights=value, minlength=k * items).reshape(shape)
    squares = sums  # 0/1 scores: the squares are the values
    counts = np.bincount(flat, minlength=k * items).reshape(shape).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
        within_items = (squares - sums * means) / (counts - 1)  # per item and condition
    differences, withins, deffs = [], [], []
    for a in range(k):
        for b in range(a + 1, k):
            both = (counts[a] > 0) & (counts[b] > 0)
            if both.sum() < 2:
                continue
            d = means[a, both] - means[b, both]
            differences.append(d)
            several = both & (counts[a] > 1) & (counts[b] > 1)
            withins.append(
                float(np.nanmean((within_items[a, several] + within_items[b, several]) / 2))
                if several.any()
                else math.nan
            )
            if clusters is not None:
                deffs.append(_design_effect(d, clusters.codes[both]))
    if not differences:
        return None
    answered = counts[counts > 0]
    epochs = float(answered.mean()) if len(answered) else 1.0
    where = f"under {grader.label}"
    if clusters is not None:
        where += f", clusters of {clusters.by!r}"
    source = (
        f"the store: {len(differences)} pairs of conditions {where} (median over pairs), "
        f"{round(epochs)} epoch(s) an item"
    )
    return DesignVariance.from_pairs(differences, withins, epochs, deffs or None, source=source)


def _design_effect(d: np.ndarray, codes: np.ndarray) -> float:
    """Var(mean d) with clusters / Var(mean d) with independent items."""
    n = len(d)
    groups = np.unique(codes, return_inverse=True)[1]
    g = int(groups.max()) + 1 if n else 0
    iid = float(np.var(d, ddof=1)) / n if n > 1 else 0.0
    if g < 2 or iid <= 0:
        return 1.0
    z = np.bincount(groups, weights=d - d.mean())
    clustered = float(np.sum(z * z)) / (n * n) * g / (g - 1)
    return clustered / iid


def power_plan_of(plan: Plan, detect: float, power: float = 0.8, alpha: float = 0.05) -> PowerPlan:
    """The power plan of `plan`'s study (see the module doc)."""
    cells = read_cells(plan)
    by = plan.study.analysis.cluster_by
    clusters = item_clusters(plan, by) if by and cells.grades.num_rows else None
    variance = store_variance(cells, clusters) or DesignVariance.default()
    cells_planned = plan.item_count * plan.design.epochs
    per_item_epoch = plan.estimate.total_usd / cells_planned if cells_planned else None
    available = sum(d.items for d in plan.datasets)
    result = power_plan(
        detect,
        variance,
        power=power,
        alpha=alpha,
        available_items=available,
        usd_per_item_epoch=per_item_epoch,
    )
    pairs = len(plan.design.generate) * (len(plan.design.generate) - 1) // 2
    if pairs > 1:
        result.notes.append(
            f"{pairs} pairs of conditions: Holm compares the smallest p-value with alpha / "
            f"{pairs}; to keep that power for every pair, plan with --alpha "
            f"{alpha / pairs:.2g}."
        )
    return result


def tell_apart(plan: Plan) -> str | None:
    """`status`'s line: what the headline grader's paired comparisons say now (None when
    nothing is graded or the study has one condition)."""
    if len(plan.design.generate) < 2:
        return None
    statistics = plan_statistics(plan, headline_only=True)
    found = statistics.find()
    if found is None:
        return None
    key, family = found
    return f"{verdict(family)} ({key.grader.label})"
