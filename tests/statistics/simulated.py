"""Simulated studies for the statistics tests: answers drawn from a logistic item model."""

from __future__ import annotations

import numpy as np

from itemeval.statistics import Tallies


def simulate(abilities, items, epochs, rng, *, slope=8.0, difficulty=None):
    """One study: answers (items x epochs x conditions) drawn from a logistic item model."""
    d = rng.uniform(0, 1, items) if difficulty is None else difficulty
    p = 1 / (1 + np.exp(-slope * (np.asarray(abilities)[None, :] - d[:, None])))
    answers = rng.uniform(size=(items, epochs, len(abilities))) < p[:, None, :]
    return answers.astype(np.float64), p


def tallies_of(answers, cluster_of_item=None, names=None):
    items, epochs, k = answers.shape
    item = np.repeat(np.arange(items), epochs * k)
    unit = np.tile(np.arange(k), items * epochs)
    cluster = item if cluster_of_item is None else np.asarray(cluster_of_item)[item]
    return Tallies.from_rows(
        names or [f"c{j}" for j in range(k)],
        unit,
        cluster,
        answers.ravel(),
        binary=True,
        item_clusters=cluster_of_item is None,
    )


def study_cells(scores: np.ndarray, *, judge: bool = True, datasets: int = 2):
    """`StudyCells` of one grader over `scores` (items x epochs x conditions): conditions are
    models m0.. x prompts p0, p1; the grader a judge with those scores (correct: score >= 0.5)
    or a scorer. What the report computes its statistics from, without a run."""
    import pyarrow as pa

    from itemeval.results import DesignFacets, GenerateFacets, GradeFacets, StudyCells

    items, epochs, k = scores.shape
    generate = tuple(
        GenerateFacets(f"m{c // 2}_p{c % 2}--{c:012d}", f"m{c // 2}_p{c % 2}", f"sim/m{c // 2}",
                       f"m{c // 2}", f"p{c % 2}", "default", "{}", "sim")
        for c in range(k)
    )  # fmt: skip
    kind = "judge" if judge else "scorer"
    grader = GradeFacets("g--000000000000", "g", kind, "g", "sim/judge" if judge else None,
                         "builtin:graded" if judge else None, 0.5, 1.0)  # fmt: skip
    gen = np.repeat(np.arange(k), items * epochs).astype(np.int32)
    item = np.tile(np.repeat(np.arange(items), epochs), k).astype(np.int32)
    epoch = np.tile(np.arange(epochs), items * k).astype(np.int32)
    value = scores.transpose(2, 0, 1).ravel()
    n = len(gen)
    grades = pa.table(
        {
            "grade": pa.array(np.zeros(n, dtype=np.int32)),
            "gen": pa.array(gen),
            "item": pa.array(item),
            "dataset": pa.array((item % datasets).astype(np.int32)),
            "epoch": pa.array(epoch),
            "score": pa.array(value),
            "correct": pa.array(value >= 0.5),
            "valid": pa.array(np.ones(n, dtype=bool)),
        }
    )
    names = [f"d{d}" for d in range(datasets)]
    item_table = pa.table(
        {
            "item_id": [f"i{i}" for i in range(items)],
            "dataset": [names[i % datasets] for i in range(items)],
        }
    )
    facets = DesignFacets(generate=generate, grade=(grader,), epochs=epochs)
    return StudyCells(
        facets, grades, pa.table({"gen": pa.array([], pa.int32())}), item_table, names
    )
