"""`analysis.cluster_by`: a cluster code per selected item, read from the items snapshot.

`study_clusters` is the one place `analysis.cluster_by` is read; `item_clusters` reads the field:
an item attribute (`difficulty`, `modality`, `grading_scheme`, `task_prompt`, `dataset`) or a
key of the item's metadata. Items without the field are each a cluster of their own (and
counted). Every interval of the statistics and the judges' analyses resamples these clusters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.errors import ConfigError, Problem
from itemeval.planning import CLUSTER_ATTRIBUTES, Plan
from itemeval.results._cells import StudyCells
from itemeval.results._fetch import ItemFetcher

ATTRIBUTES = CLUSTER_ATTRIBUTES


@dataclass(frozen=True)
class Clusters:
    """`analysis.cluster_by`: a cluster code per selected item (plan order)."""

    by: str
    codes: np.ndarray  # int64, one per selected item
    count: int
    missing: int = 0  # items without the field (each its own cluster)


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
