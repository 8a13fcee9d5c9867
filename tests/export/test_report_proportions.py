"""The report's facet tables (`proportions`): per combination of keys, each cluster's correct and
graded answers (a grade without a verdict counted in neither), clusters in increasing order as
the leaderboard's, so the seeded bootstrap draws the same intervals whatever the rows' order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from itemeval.report import _summary as summary
from itemeval.report._summary import Bootstrap, proportions
from itemeval.statistics import Proportion, bootstrap_proportion

Tallied = dict[tuple[int, ...], tuple[list[float], list[float]]]


def counted(grades: pa.Table, keys: list[pa.Array], bootstrap: Bootstrap) -> Tallied:
    """The reference: a loop over the rows."""
    item = grades.column("item").to_numpy()
    cluster = item if bootstrap.clusters is None else bootstrap.clusters[item]
    found: dict[tuple[int, ...], dict[int, tuple[float, float]]] = {}
    columns = [k.to_pylist() for k in keys]
    for row, verdict in enumerate(grades.column("correct").to_pylist()):
        tallies = found.setdefault(tuple(c[row] for c in columns), {})
        right, graded = tallies.get(int(cluster[row]), (0.0, 0.0))
        tallies[int(cluster[row])] = (right + bool(verdict), graded + (verdict is not None))
    return {
        key: (
            [found[key][c][0] for c in sorted(found[key])],
            [found[key][c][1] for c in sorted(found[key])],
        )
        for key in sorted(found)
    }


def intervals(found: Tallied, bootstrap: Bootstrap) -> dict[tuple[int, ...], Proportion]:
    return {
        key: bootstrap_proportion(
            s, t, resamples=bootstrap.resamples, seed=bootstrap.seed, confidence=0.95
        )
        for key, (s, t) in found.items()
    }


@pytest.mark.parametrize("trial", range(40))
def test_proportions_tally_each_combination_by_cluster(
    trial: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(trial)
    gens, items = 5, 300
    rows = int(rng.integers(1, 3000))
    gen = np.sort(rng.integers(0, gens, rows))
    # Grades come by generate condition, then item: a combination of several conditions sees
    # items out of order (the second condition's items after the first's).
    item = np.concatenate([np.sort(rng.integers(0, items, (gen == g).sum())) for g in range(gens)])
    unknown = rng.random(rows) < (0.1 if trial % 2 else 0.0)  # no verdict: not counted
    grades = pa.table(
        {
            "item": pa.array(item, pa.int32()),
            "correct": pa.array(rng.random(rows) < 0.6, mask=unknown),
        }
    )
    first = pa.array(gen % 2, pa.int32())
    second = pa.array(rng.integers(0, 3, rows) if trial % 3 == 0 else gen // 2, pa.int32())
    clusters = rng.integers(0, 40, items) if trial % 4 == 0 else None
    bootstrap = Bootstrap(resamples=200, seed=trial, clusters=clusters)
    expected = counted(grades, [first, second], bootstrap)
    found = proportions(grades, [first, second], bootstrap)
    assert list(found) == list(expected)
    assert found == intervals(expected, bootstrap)
    # What the bootstrap resamples, in order (its draws of few distinct tallies do not show it).
    seen: list[tuple[list[float], list[float]]] = []
    monkeypatch.setattr(
        summary, "bootstrap_proportion", lambda s, t, **_: seen.append((list(s), list(t)))
    )
    proportions(grades, [first, second], bootstrap)
    assert seen == list(expected.values())
