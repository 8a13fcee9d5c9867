"""A study's comparisons: the families a report shows, computed from its `StudyCells`.

A family is every pair of units under one grader, one metric and one scope:

* scope `conditions`: the generate conditions, every dataset pooled;
* scope `models`: the models, each with all its conditions pooled (shown with 2+ models);
* scope `dataset`: the generate conditions on one dataset's items (shown with 2+ datasets).

Metrics: `accuracy` (correct answers / graded answers) under every grader, and `mean_score`
(the judge's score, on the rubric's scale) under judges. The p-values of each family are
adjusted together (`analysis.adjust`). Variance components come per generate condition under
every grader and metric.

A unit's own accuracy interval is the leaderboard's (`bootstrap_proportion` over the unit's
cluster tallies, the same resamples, seed and confidence), so the rankings table, the report,
the viewer and the Every Eval Ever records give one interval for one accuracy; the rank
intervals and tiers come from the paired bootstrap.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.results import Clusters, GradeFacets, StudyCells, primary_grader
from itemeval.statistics._components import Components, components
from itemeval.statistics._intervals import bootstrap_proportion
from itemeval.statistics._paired import (
    DEFAULT_ALPHA,
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Family,
    compare,
)
from itemeval.statistics._tallies import Tallies

ACCURACY = "accuracy"
MEAN_SCORE = "mean_score"
SCOPES = ("conditions", "models", "dataset")


@dataclass(frozen=True)
class Options:
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    confidence: float = DEFAULT_CONFIDENCE
    adjustment: str = "holm"
    alpha: float = DEFAULT_ALPHA


@dataclass(frozen=True)
class FamilyKey:
    grader: GradeFacets
    metric: str
    scope: str  # one of SCOPES
    dataset: str | None = None
    unit_ids: tuple[str, ...] = ()  # condition ids (conditions, dataset) or model names

    @property
    def label(self) -> str:
        where = {"conditions": "conditions", "models": "models"}.get(self.scope)
        where = where or f"conditions on {self.dataset}"
        return f"{self.metric.replace('_', ' ')} by {self.grader.label}, {where}"


@dataclass
class StudyStatistics:
    families: list[tuple[FamilyKey, Family]]
    components: list[tuple[GradeFacets, str, Components]] = field(default_factory=list)
    options: Options = Options()
    clusters: Clusters | None = None

    def find(
        self,
        grader: str | None = None,
        metric: str = ACCURACY,
        scope: str = "conditions",
        dataset: str | None = None,
    ) -> tuple[FamilyKey, Family] | None:
        for key, family in self.families:
            if (
                (grader is None or key.grader.id == grader)
                and key.metric == metric
                and key.scope == scope
                and key.dataset == dataset
            ):
                return key, family
        return None


def _values(grades: pa.Table, metric: str) -> tuple[pa.Table, np.ndarray]:
    if metric == ACCURACY:
        return grades, pc.cast(grades.column("correct"), pa.float64()).to_numpy()
    scored = grades.filter(pc.is_valid(grades.column("score")))
    return scored, scored.column("score").to_numpy(zero_copy_only=False).astype(np.float64)


def _tallies(
    rows: pa.Table,
    values: np.ndarray,
    units: list[str],
    unit_of: np.ndarray,
    metric: str,
    clusters: Clusters | None,
) -> Tallies:
    item = rows.column("item").to_numpy()
    cluster = clusters.codes[item] if clusters is not None else item
    return Tallies.from_rows(
        units,
        unit_of,
        cluster,
        values,
        binary=metric == ACCURACY,
        item_clusters=clusters is None,
    )


def study_statistics(
    cells: StudyCells,
    options: Options | None = None,
    *,
    clusters: Clusters | None = None,
    scopes: tuple[str, ...] = SCOPES,
    headline_only: bool = False,
    with_components: bool = True,
) -> StudyStatistics:
    """Every family of the study (see the module doc); `headline_only`: only the headline
    grader's accuracy over conditions (what the leaderboard and `status` need)."""
    options = options or Options()
    f = cells.facets
    out = StudyStatistics([], [], options, clusters)
    primary = primary_grader(f.grade)
    graders = [primary] if headline_only and primary is not None else list(f.grade)
    slugs = [g.slug for g in f.generate]
    models = f.models
    model_of = np.array([models.index(g.model_name) for g in f.generate], dtype=np.int64)
    for grader in graders:
        if grader is None:
            continue
        code = f.grade.index(grader)
        grades = cells.valid_grades(code)
        metrics = [ACCURACY] if headline_only or grader.kind != "judge" else [ACCURACY, MEAN_SCORE]
        for metric in metrics:
            rows, values = _values(grades, metric)
            if rows.num_rows == 0 or (metric == MEAN_SCORE and _same_as_accuracy(rows, values)):
                continue
            gen = rows.column("gen").to_numpy().astype(np.int64)

            def run(key: FamilyKey, tallies: Tallies) -> None:
                if len(tallies.units) >= 2 and tallies.clusters:
                    out.families.append((key, _compare(tallies, options)))

            ids = tuple(g.id for g in f.generate)
            if "conditions" in scopes:
                tallies = _tallies(rows, values, slugs, gen, metric, clusters)
                run(FamilyKey(grader, metric, "conditions", None, ids), tallies)
                del tallies  # compared: its matrices are not kept while the components count
                if with_components and not headline_only:
                    out.components += _components(
                        cells, rows, values, gen, grader, metric, clusters
                    )
            if headline_only:
                continue
            if "models" in scopes and len(models) > 1 and len(models) < len(slugs):
                tallies = _tallies(rows, values, models, model_of[gen], metric, clusters)
                run(FamilyKey(grader, metric, "models", None, tuple(models)), tallies)
            if "dataset" in scopes and len(cells.datasets) > 1:
                dataset = rows.column("dataset").to_numpy()
                for d, name in enumerate(cells.datasets):
                    mask = dataset == d
                    if not mask.any():
                        continue
                    subset = rows.filter(pa.array(mask))
                    tallies = _tallies(subset, values[mask], slugs, gen[mask], metric, clusters)
                    run(FamilyKey(grader, metric, "dataset", name, ids), tallies)
    return out


def _same_as_accuracy(rows: pa.Table, values: np.ndarray) -> bool:
    """A judge whose scores are its verdicts (0 or 1): its mean score is its accuracy."""
    correct = pc.cast(rows.column("correct"), pa.float64()).to_numpy()
    return bool(np.array_equal(values, correct))


def _compare(tallies: Tallies, options: Options) -> Family:
    family = compare(
        tallies,
        resamples=options.resamples,
        seed=options.seed,
        confidence=options.confidence,
        adjustment=options.adjustment,
        alpha=options.alpha,
    )
    if not tallies.binary:
        return family
    # Accuracy: each unit's interval is the leaderboard's (see the module doc).
    intervals = [
        bootstrap_proportion(
            tallies.sums[:, u],
            tallies.counts[:, u],
            resamples=options.resamples,
            seed=options.seed,
            confidence=options.confidence,
        )
        for u in range(len(tallies.units))
    ]
    return replace(
        family,
        lows=np.array([p.low for p in intervals]),
        highs=np.array([p.high for p in intervals]),
    )


def _components(
    cells: StudyCells,
    rows: pa.Table,
    values: np.ndarray,
    gen: np.ndarray,
    grader: GradeFacets,
    metric: str,
    clusters: Clusters | None,
) -> list[tuple[GradeFacets, str, Components]]:
    """Per generate condition: its variance components from per-item tallies."""
    items = cells.items.num_rows
    f = cells.facets
    item = rows.column("item").to_numpy().astype(np.int64)
    flat = gen * items
    flat += item  # in place: a copy of the rows is 40 MB at 5M grades
    size = len(f.generate) * items
    shape = (len(f.generate), items)
    sums = np.bincount(flat, weights=values, minlength=size).reshape(shape)
    # 0/1 scores are their own squares: the same numbers, without two more arrays of the rows.
    squares = (
        sums
        if metric == ACCURACY
        else np.bincount(flat, weights=values * values, minlength=size).reshape(shape)
    )
    graded = np.bincount(flat, minlength=size).reshape(shape)
    del flat
    counts = graded.astype(np.float64)
    del graded
    codes = clusters.codes if clusters is not None else None
    return [
        (grader, metric, components(g.slug, sums[c], squares[c], counts[c], codes))
        for c, g in enumerate(f.generate)
    ]
