"""A study's families from its cells: scopes, the judge's mean score, variance components, the
tables, and the power plan's variance learned from the store."""

from __future__ import annotations

import numpy as np
import pytest
from simulated import study_cells

from itemeval.statistics import (
    MEAN_SCORE,
    Options,
    comparisons_table,
    components_table,
    rankings_table,
    study_statistics,
)
from itemeval.statistics._planning import pair_variances


def test_families_scopes_metrics_and_tables():
    rng = np.random.default_rng(0)
    items, epochs, k = 300, 2, 4  # two models x two prompts
    quality = rng.uniform(0, 1, items)[:, None, None]
    skill = np.array([0.0, 0.0, -0.25, -0.25])[None, None, :]
    scores = np.clip(quality + skill + rng.normal(0, 0.2, (items, epochs, k)), 0, 1)
    stats = study_statistics(study_cells(scores), Options(resamples=300))
    keys = {(key.metric, key.scope, key.dataset) for key, _ in stats.families}
    assert keys == {
        (metric, scope, dataset)
        for metric in ("accuracy", MEAN_SCORE)
        for scope, dataset in (
            ("conditions", None),
            ("models", None),
            ("dataset", "d0"),
            ("dataset", "d1"),
        )
    }
    _, family = stats.find(metric=MEAN_SCORE)
    assert family.pair(0, 1).test == "paired_t_cluster"  # continuous scores, two epochs
    assert not family.pair(0, 1).real() and family.pair(0, 2).real()
    assert family.tiers == [1, 1, 2, 2]
    assert family.pair(0, 2).difference == pytest.approx(
        scores[..., 0].mean() - scores[..., 2].mean()
    )
    comparisons = comparisons_table(stats)
    assert comparisons.num_rows == 2 * (6 + 1 + 2 * 6)
    rankings = rankings_table(stats).to_pylist()
    assert {r["tier"] for r in rankings if r["scope"] == "models"} == {1, 2}
    components = components_table(stats).to_pylist()
    assert len(components) == 2 * k
    assert all(c["items"] == items and c["answers"] == items * epochs for c in components)
    # the items differ far more than the epochs: most of the variance is between items
    mean_score = [c for c in components if c["metric"] == MEAN_SCORE]
    assert all(c["between_item_share"] > 0.5 for c in mean_score)


def test_a_pairs_variance_matches_its_answers():
    rng = np.random.default_rng(1)
    items, epochs, k = 400, 3, 2
    p = rng.uniform(0.2, 0.9, items)[:, None, None]
    answers = (rng.uniform(size=(items, epochs, k)) < p).astype(np.float64)
    stored = pair_variances(study_cells(answers, judge=False))
    assert stored is not None and len(stored.pairs) == 1
    variance = stored.pairs[0].variance
    assert variance.pairs == 1
    item_means = answers.mean(axis=1)
    observed = np.var(item_means[:, 0] - item_means[:, 1], ddof=1)
    # the same p for both: the per-item difference is all epoch noise, tau^2 near 0
    assert variance.of_difference(epochs) == pytest.approx(observed, rel=0.25)
    assert variance.between < 0.25 * observed
