"""`itemeval plan --detect`: the power plan of a study, from its store's results when it has any.

`pair_variances` learns, for every pair of generate conditions under the headline grader, the
variance of its per-item differences (`power.DesignVariance`, with `analysis.cluster_by`'s design
effect), its observed difference and its discordance (the share of answers to the same item and
epoch on which one is right and the other wrong). `choose_pair` picks the pair the plan is for:
the one the user names (`--pair A B`), the hardest of a family (`--pair 'weak_*'`: every pair of
the conditions it matches; `--pair A 'B*'`: A against each), or by default the hardest realistic
pair: of the pairs whose observed difference is within `REALISTIC` times the difference to
detect (the comparisons that difference is about; a pair 30 points apart is told apart already),
the one whose difference varies most from item to item (the closest pair when none is that
close). `power_plan_of` puts it together with the calibrated cost of one item at one epoch for
every condition (the plan's estimate over its cells), says what it assumed, and flags a plan
beyond the study's budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from itemeval.errors import InputError, Problem
from itemeval.planning import Plan
from itemeval.results import Clusters, StudyCells, primary_grader, read_cells, study_clusters
from itemeval.statistics._power import DesignVariance, PowerPlan, flag_budget, power_plan
from itemeval.store import select_conditions

#: The default plan is for pairs whose observed difference is at most this many times the
#: difference to detect.
REALISTIC = 2.0


@dataclass(frozen=True)
class PairVariance:
    """One pair of generate conditions as the store shows it (slugs, on the items both
    graded)."""

    first: str
    second: str
    items: int
    difference: float  # accuracy of `first` minus that of `second`
    discordance: float  # share of (item, epoch) answers on which exactly one is right
    variance: DesignVariance

    @property
    def one_epoch(self) -> float:
        """Var(d) at one epoch with the design effect: what the items needed scale with."""
        return self.variance.of_difference(1) * self.variance.deff

    def describe(self) -> str:
        return (
            f"{self.first} vs {self.second}: difference {self.difference:+.3f}, discordance "
            f"{self.discordance:.2f} on {self.items:,} items"
        )


@dataclass(frozen=True)
class StoredPairs:
    pairs: list[PairVariance]
    grader: str  # the headline grader's label
    epochs: float  # answers an item has, on average (per condition)


def pair_variances(cells: StudyCells, clusters: Clusters | None = None) -> StoredPairs | None:
    """Every pair of generate conditions under the headline grader (None when too little is
    stored)."""
    grader = primary_grader(cells.facets.grade)
    if grader is None:
        return None
    grades = cells.valid_grades(cells.facets.grade.index(grader))
    k = len(cells.facets.generate)
    if grades.num_rows == 0 or k < 2:
        return None
    items = cells.items.num_rows
    epochs_planned = max(1, cells.facets.epochs)
    gen = grades.column("gen").to_numpy().astype(np.int64)
    item = grades.column("item").to_numpy().astype(np.int64)
    epoch = grades.column("epoch").to_numpy().astype(np.int64)
    value = grades.column("correct").to_numpy(zero_copy_only=False).astype(np.float64)
    flat = gen * items + item
    shape = (k, items)
    sums = np.bincount(flat, weights=value, minlength=k * items).reshape(shape)
    squares = sums  # 0/1 scores: the squares are the values
    counts = np.bincount(flat, minlength=k * items).reshape(shape).astype(np.float64)
    answers = np.full((k, items, epochs_planned), -1, dtype=np.int8)  # -1: not graded
    answers[gen, item, np.minimum(epoch, epochs_planned - 1)] = value.astype(np.int8)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
        within_items = (squares - sums * means) / (counts - 1)  # per item and condition
    answered = counts[counts > 0]
    epochs = float(answered.mean()) if len(answered) else 1.0
    slugs = [g.slug for g in cells.facets.generate]
    where = f"under {grader.label}"
    if clusters is not None:
        where += f", clusters of {clusters.by!r}"
    pairs = []
    for a in range(k):
        for b in range(a + 1, k):
            both = (counts[a] > 0) & (counts[b] > 0)
            if both.sum() < 2:
                continue
            d = means[a, both] - means[b, both]
            several = both & (counts[a] > 1) & (counts[b] > 1)
            within = (
                float(np.nanmean((within_items[a, several] + within_items[b, several]) / 2))
                if several.any()
                else math.nan
            )
            deffs = [_design_effect(d, clusters.codes[both])] if clusters is not None else None
            source = (
                f"the store: {slugs[a]} vs {slugs[b]} {where}, {round(epochs)} epoch(s) an item"
            )
            variance = DesignVariance.from_pairs([d], [within], epochs, deffs, source=source)
            paired = (answers[a] >= 0) & (answers[b] >= 0)
            discordance = float(np.mean(answers[a][paired] != answers[b][paired]))
            difference = float(sums[a, both].sum() / counts[a, both].sum()) - float(
                sums[b, both].sum() / counts[b, both].sum()
            )
            pairs.append(
                PairVariance(slugs[a], slugs[b], int(both.sum()), difference, discordance, variance)
            )
    if not pairs:
        return None
    return StoredPairs(pairs, grader.label, epochs)


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


def named_pairs(known: Sequence[tuple[str, str]], selectors: Sequence[str]) -> set[frozenset[str]]:
    """The pairs of condition slugs `--pair` names: one selector, every pair of the conditions
    it matches (a family); two, each condition the first matches against each the second
    matches. `known`: (id, slug) of the generate conditions."""
    if not 1 <= len(selectors) <= 2:
        raise InputError(
            Problem(
                f"--pair takes one or two conditions, not {len(selectors)}",
                field="--pair",
                hint="--pair A B (a pair), or --pair 'glob*' (every pair of the conditions it "
                "matches)",
            )
        )
    slug_of = dict(known)
    ids = [i for i, _ in known]
    sides = [
        [
            slug_of[i]
            for i in select_conditions(ids, [s], what="generate condition", option="--pair")
        ]
        for s in selectors
    ]
    if len(sides) == 1:
        found = {frozenset((a, b)) for a in sides[0] for b in sides[0] if a != b}
    else:
        found = {frozenset((a, b)) for a in sides[0] for b in sides[1] if a != b}
    if not found:
        raise InputError(
            Problem(
                f"--pair {' '.join(selectors)} names no pair of two different conditions "
                f"(it matches {', '.join(sorted({s for side in sides for s in side}))})",
                field="--pair",
                hint="name two conditions, or a glob that matches two or more",
            )
        )
    return found


def choose_pair(
    stored: StoredPairs, detect: float, named: set[frozenset[str]] | None
) -> tuple[PairVariance | None, list[str]]:
    """The pair to plan for, and what was assumed in words (None: no stored pair is named)."""
    if named is not None:
        candidates = [p for p in stored.pairs if frozenset((p.first, p.second)) in named]
        if not candidates:
            return None, [
                "no pair --pair names has answers graded by both in the store: the "
                "conservative default below"
            ]
        chosen = max(candidates, key=lambda p: p.one_epoch)
        if len(candidates) == 1:
            return chosen, [f"the pair named: {chosen.describe()}"]
        return chosen, [
            f"the hardest of the {len(candidates)} pairs --pair names (the largest variance of "
            f"the per-item difference): {chosen.describe()}"
        ]
    close = [p for p in stored.pairs if abs(p.difference) <= REALISTIC * detect]
    if close:
        chosen = max(close, key=lambda p: p.one_epoch)
        far = len(stored.pairs) - len(close)
        lines = [
            f"the hardest realistic pair: of the {len(close)} pairs whose observed difference "
            f"is within {REALISTIC:g} x {detect:g}, the one whose difference varies most from "
            f"item to item: {chosen.describe()}"
        ]
        if far:
            lines.append(
                f"{far} pair(s) further apart are left out (a larger difference is easier to "
                "see); --pair A B plans for a pair you name"
            )
        return chosen, lines
    chosen = min(stored.pairs, key=lambda p: (abs(p.difference), -p.one_epoch))
    return chosen, [
        f"no pair's observed difference is within {REALISTIC:g} x {detect:g}: the closest "
        f"pair, {chosen.describe()}; --pair A B plans for a pair you name"
    ]


def power_plan_of(
    plan: Plan,
    detect: float,
    power: float = 0.8,
    alpha: float = 0.05,
    pair: Sequence[str] | None = None,
) -> PowerPlan:
    """The power plan of `plan`'s study (see the module doc)."""
    known = [(c.id, c.slug) for c in plan.design.generate]
    named = named_pairs(known, pair) if pair else None
    cells = read_cells(plan)
    stored = pair_variances(cells, study_clusters(plan, cells))
    chosen: PairVariance | None = None
    if stored is None:
        assumed = ["nothing stored to learn from: the conservative default"]
    else:
        chosen, assumed = choose_pair(stored, detect, named)
    variance = chosen.variance if chosen is not None else DesignVariance.default()
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
    result.assumed.extend(assumed)
    budget = plan.study.budget
    flag_budget(
        result, {"budget.max_usd": budget.max_usd, "budget.study_max_usd": budget.study_max_usd}
    )
    pairs = len(plan.design.generate) * (len(plan.design.generate) - 1) // 2
    if pairs > 1:
        result.notes.append(
            f"{pairs} pairs of conditions: Holm compares the smallest p-value with alpha / "
            f"{pairs}; to keep that power for every pair, plan with --alpha "
            f"{alpha / pairs:.2g}."
        )
    return result
