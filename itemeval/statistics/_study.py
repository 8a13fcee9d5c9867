"""A plan's statistics: its cells read once, `analysis:` applied (clusters, adjustment, level).

`plan_statistics(plan)` is what the report, `export`, `status` and the Python API call (through
`export.study_numbers` for the leaderboard, its tiers and costs); its cells hold the study's
panels as grade conditions, as the report's do. `analysis_options` and `study_clusters` are the
one place the options and `analysis.cluster_by` are read; `item_clusters` reads the field from
the items snapshot: an item attribute (`difficulty`, `modality`, `grading_scheme`,
`task_prompt`, `dataset`) or a key of the item's metadata. Items without the field are each a
cluster of their own (and counted).
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.errors import ConfigError, Problem
from itemeval.export._table.cells import StudyCells, read_cells
from itemeval.export._table.conditions import DesignFacets, primary_grader
from itemeval.export._table.fetch import ItemFetcher
from itemeval.planning import CLUSTER_ATTRIBUTES, Plan
from itemeval.statistics._families import Clusters, Options, StudyStatistics, study_statistics

ATTRIBUTES = CLUSTER_ATTRIBUTES


def analysis_options(
    plan: Plan,
    resamples: int | None = None,
    seed: int | None = None,
    confidence: float | None = None,
) -> Options:
    """The study's `analysis:` (adjustment, level) with the bootstrap's resamples, seed and
    confidence (the defaults unless given)."""
    analysis = plan.study.analysis
    options = Options(adjustment=analysis.adjust, alpha=analysis.alpha)
    if resamples is not None:
        options = replace(options, resamples=resamples)
    if seed is not None:
        options = replace(options, seed=seed)
    if confidence is not None:
        options = replace(options, confidence=confidence)
    return options


def study_clusters(plan: Plan, cells: StudyCells) -> Clusters | None:
    """`analysis.cluster_by`'s cluster of every selected item (None without it, or before
    anything is graded)."""
    by = plan.study.analysis.cluster_by
    return item_clusters(plan, by) if by and cells.grades.num_rows else None


def item_clusters(plan: Plan, by: str) -> Clusters:
    """A cluster code per selected item (plan order) from the attribute or metadata key `by`."""
    snapshots = {d.name: d.snapshot for d in plan.datasets if d.snapshot is not None}
    column = by if by in ATTRIBUTES else "metadata"
    ids = plan.items.column("item_id")
    if column == "dataset":
        values: list[object] = plan.items.column("dataset").to_pylist()
    else:
        fetched = ItemFetcher(plan.items, snapshots, [column]).take(ids)
        raw = fetched.column(column).to_pylist()
        if column == "metadata":
            values = [json.loads(text).get(by) if text else None for text in raw]
        else:
            values = raw
    keys = [None if v is None else json.dumps(v, sort_keys=True) for v in values]
    missing = sum(1 for k in keys if k is None)
    if missing == len(keys) and keys:
        raise ConfigError(
            Problem(
                f"no item has {by!r} (an item attribute or a metadata key)",
                file=str(plan.study.path) if plan.study.path else None,
                field="analysis.cluster_by",
                hint=f"one of {', '.join(ATTRIBUTES)}, or a key of the items' metadata (items "
                "without it are each a cluster of their own)",
            )
        )
    encoded = pc.dictionary_encode(pa.array(keys, type=pa.string()))
    codes = np.asarray(pc.fill_null(encoded.indices, -1).to_numpy(), dtype=np.int64)
    found = len(encoded.dictionary)
    lonely = np.flatnonzero(codes < 0)
    codes[lonely] = found + np.arange(len(lonely), dtype=np.int64)
    return Clusters(by=by, codes=codes, count=found + len(lonely), missing=missing)


def plan_statistics(
    plan: Plan,
    options: Options | None = None,
    *,
    cells: StudyCells | None = None,
    headline_only: bool = False,
) -> StudyStatistics:
    """The study's families and variance components (`families.study_statistics`), from the
    plan's cells with its panels (read here unless given)."""
    options = options or analysis_options(plan)
    if cells is None and headline_only:  # the headline grader's grades are all it reads
        primary = primary_grader(DesignFacets.of(plan.design).grade)
        only = [primary.id] if primary is not None else []
        cells = read_cells(plan, graders=only, count_solutions=False)
    if cells is None:
        from itemeval.export import study_cells  # the report's cells: panels as graders

        cells = study_cells(plan)
    clusters = study_clusters(plan, cells)
    return study_statistics(cells, options, clusters=clusters, headline_only=headline_only)
