"""`StudyStatistics` as arrow tables: what `export` writes and the Python API returns.

* `comparisons`: one row per pair of units, grader, metric and scope (the difference, its
  interval, the raw and adjusted p-values, the test, how many items and answers it rests on);
* `rankings`: one row per unit of each family (its estimate and interval, rank interval, tier);
* `variance_components`: one row per generate condition, grader and metric.
"""

from __future__ import annotations

import math

import pyarrow as pa

from itemeval.statistics._families import FamilyKey, StudyStatistics

_F = pa.float64()
_S = pa.string()
_I = pa.int64()

COMPARISONS_SCHEMA = pa.schema(
    [
        ("grade_condition_id", _S),
        ("grader", _S),
        ("metric", _S),
        ("scope", _S),
        ("dataset", _S),
        ("first", _S),
        ("second", _S),
        ("first_id", _S),
        ("second_id", _S),
        ("first_value", _F),
        ("second_value", _F),
        ("difference", _F),
        ("ci_low", _F),
        ("ci_high", _F),
        ("confidence", _F),
        ("se", _F),
        ("p_value", _F),
        ("p_adjusted", _F),
        ("adjustment", _S),
        ("significant", pa.bool_()),
        ("test", _S),
        ("items", _I),
        ("clusters", _I),
        ("first_answers", _I),
        ("second_answers", _I),
        ("family_pairs", _I),
        ("cluster_by", _S),
        ("resamples", _I),
        ("seed", _I),
    ]
)
RANKINGS_SCHEMA = pa.schema(
    [
        ("grade_condition_id", _S),
        ("grader", _S),
        ("metric", _S),
        ("scope", _S),
        ("dataset", _S),
        ("unit", _S),
        ("unit_id", _S),
        ("value", _F),
        ("ci_low", _F),
        ("ci_high", _F),
        ("rank", _I),
        ("rank_low", _I),
        ("rank_high", _I),
        ("tier", _I),
        ("items", _I),
        ("answers", _I),
    ]
)
COMPONENTS_SCHEMA = pa.schema(
    [
        ("grade_condition_id", _S),
        ("grader", _S),
        ("metric", _S),
        ("condition", _S),
        ("mean", _F),
        ("items", _I),
        ("clusters", _I),
        ("answers", _I),
        ("between_item_variance", _F),
        ("within_item_variance", _F),
        ("between_item_share", _F),
        ("within_item_share", _F),
        ("effective_independent_answers", _F),
    ]
)


def _nan_none(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _family_columns(key: FamilyKey) -> dict[str, object]:
    """The columns naming a family (grader, metric, scope, dataset): both tables open with them."""
    return {
        "grade_condition_id": key.grader.id,
        "grader": key.grader.label,
        "metric": key.metric,
        "scope": key.scope,
        "dataset": key.dataset,
    }


def comparisons_table(stats: StudyStatistics) -> pa.Table:
    rows: list[dict[str, object]] = []
    by = stats.clusters.by if stats.clusters is not None else None
    for key, family in stats.families:
        ids = key.unit_ids or tuple(family.units)
        for p in family.pairs:
            rows.append(
                {
                    **_family_columns(key),
                    "first": family.units[p.first],
                    "second": family.units[p.second],
                    "first_id": ids[p.first],
                    "second_id": ids[p.second],
                    "first_value": _nan_none(p.first_value),
                    "second_value": _nan_none(p.second_value),
                    "difference": _nan_none(p.difference),
                    "ci_low": _nan_none(p.low),
                    "ci_high": _nan_none(p.high),
                    "confidence": family.confidence,
                    "se": _nan_none(p.se),
                    "p_value": _nan_none(p.p_value),
                    "p_adjusted": _nan_none(p.adjusted),
                    "adjustment": family.adjustment,
                    "significant": p.real(family.alpha),
                    "test": p.test,
                    "items": p.clusters if stats.clusters is None else None,
                    "clusters": p.clusters,
                    "first_answers": p.first_answers,
                    "second_answers": p.second_answers,
                    "family_pairs": len(family.pairs),
                    "cluster_by": by,
                    "resamples": family.resamples,
                    "seed": family.seed,
                }
            )
    return pa.Table.from_pylist(rows, schema=COMPARISONS_SCHEMA)


def rankings_table(stats: StudyStatistics) -> pa.Table:
    rows: list[dict[str, object]] = []
    for key, family in stats.families:
        ids = key.unit_ids or tuple(family.units)
        order = sorted(
            range(len(family.units)),
            key=lambda u: (family.tiers[u], -_finite(float(family.estimates[u])), family.units[u]),
        )
        for rank, u in enumerate(order, start=1):
            rows.append(
                {
                    **_family_columns(key),
                    "unit": family.units[u],
                    "unit_id": ids[u],
                    "value": _nan_none(family.estimates[u]),
                    "ci_low": _nan_none(family.lows[u]),
                    "ci_high": _nan_none(family.highs[u]),
                    "rank": rank,
                    "rank_low": int(family.rank_low[u]),
                    "rank_high": int(family.rank_high[u]),
                    "tier": family.tiers[u],
                    "items": int(family.clusters[u]),
                    "answers": int(family.answers[u]),
                }
            )
    return pa.Table.from_pylist(rows, schema=RANKINGS_SCHEMA)


def components_table(stats: StudyStatistics) -> pa.Table:
    rows = [
        {
            "grade_condition_id": grader.id,
            "grader": grader.label,
            "metric": metric,
            "condition": c.unit,
            "mean": _nan_none(c.mean),
            "items": c.items,
            "clusters": c.clusters,
            "answers": c.answers,
            "between_item_variance": _nan_none(c.between),
            "within_item_variance": _nan_none(c.within),
            "between_item_share": _nan_none(c.between_share),
            "within_item_share": _nan_none(c.within_share),
            "effective_independent_answers": _nan_none(c.effective),
        }
        for grader, metric, c in stats.components
    ]
    return pa.Table.from_pylist(rows, schema=COMPONENTS_SCHEMA)


def _finite(value: float) -> float:
    return -math.inf if math.isnan(value) else float(value)


class ComparisonTables:
    """What `Study.comparisons()` returns: the three tables `export` writes, and the families
    they come from (`statistics`)."""

    def __init__(self, statistics: StudyStatistics):
        self.statistics = statistics
        self.comparisons = comparisons_table(statistics)
        self.rankings = rankings_table(statistics)
        self.variance_components = components_table(statistics)

    def __repr__(self) -> str:
        return (
            f"ComparisonTables({self.comparisons.num_rows} comparisons, "
            f"{self.rankings.num_rows} rankings, {self.variance_components.num_rows} components)"
        )
