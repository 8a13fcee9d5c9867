"""Simulated studies for the statistics tests: answers drawn from a logistic item model."""

from __future__ import annotations

import numpy as np

from itemeval.statistics.tallies import Tallies


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
