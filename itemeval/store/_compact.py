"""Compaction: rewrite a partition's fragments into one deduplicated fragment.

Safe while writers and readers run, because of the order of operations:

1. list the partition and read exactly the fragments listed (F);
2. write the best row of each key of F as one new fragment (C), wholly or not at all;
3. rewrite the partition's `_compaction` marker;
4. delete exactly F, never a fragment written meanwhile.

A reader listing between 2 and 4 sees F and C and deduplicates the overlap; a reader whose
fragment of F vanishes re-lists and finds C; a reader whose listing overlapped the deletes (a
listing is not a snapshot: it may miss C and a deleted fragment of F) sees the marker change
and reads the partition again (`fragments.read_partitions`). A crash between 2 and 4 leaves
duplicates that reads deduplicate and the next compaction removes. Rows keep their
`written_at`, so the dedup order of a key across C and newer fragments is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from itemeval.errors import Problem, StoreError
from itemeval.storage import Location
from itemeval.store._dedup import deduplicate
from itemeval.store._layout import STAGES, Stage, StudyStore
from itemeval.store._selection import select_conditions
from itemeval.store.fragments import (
    FRAGMENT_ORDINAL,
    FragmentInfo,
    list_fragments,
    mark_compaction,
    read_fragments,
    write_fragment,
)

_MAX_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What compacting one partition did."""

    stage: str
    condition_id: str
    fragments_read: int
    rows_read: int
    rows_written: int
    fragment_written: str | None  # None when the partition was already compact

    @property
    def duplicates_dropped(self) -> int:
        return self.rows_read - self.rows_written


def compact_partition(store: StudyStore, stage: Stage | str, condition_id: str) -> CompactionResult:
    """Compact one partition (nothing happens when it has fewer than two fragments)."""
    stage = store.stage(stage)
    partition = store.partition(stage, condition_id)
    for _ in range(_MAX_ATTEMPTS):
        listed = list_fragments(partition)
        if len(listed) < 2:
            rows = _row_count(listed, partition, stage)
            return CompactionResult(stage.name, condition_id, len(listed), rows, rows, None)
        tables = read_fragments(partition, listed, stage.schema)
        if any(t is None for t in tables):
            continue  # another compaction removed some of them: start from a fresh listing
        parts = [
            t.append_column(FRAGMENT_ORDINAL, pa.repeat(pa.scalar(i, pa.int32()), t.num_rows))
            for i, t in enumerate(tables)
            if t is not None
        ]
        merged = pa.concat_tables(parts)
        best = deduplicate(merged, stage.keys).drop_columns([FRAGMENT_ORDINAL])
        name = write_fragment(partition, best)
        mark_compaction(partition)  # readers that overlap the deletes read again
        _remove(partition, listed)
        return CompactionResult(
            stage.name, condition_id, len(listed), merged.num_rows, best.num_rows, name
        )
    raise StoreError(
        Problem(
            "fragments kept disappearing during compaction (another compaction running?)",
            file=partition.url,
        )
    )


def compact(
    store: StudyStore,
    stages: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
) -> list[CompactionResult]:
    """Compact every partition of `stages` (default: solutions and grades), or those that the
    `conditions` selections (ids, prefixes, slugs, globs) name."""
    chosen = [store.stage(name) for name in stages or list(STAGES)]
    known = {stage.name: store.condition_ids(stage) for stage in chosen}
    # One selection may name a generate or a grade condition: resolve against both.
    every = [cid for stage in chosen for cid in known[stage.name]]
    selected = set(select_conditions(every, conditions)) if conditions else set(every)
    return [
        compact_partition(store, stage, cid)
        for stage in chosen
        for cid in known[stage.name]
        if cid in selected
    ]


def _row_count(listed: list[FragmentInfo], partition: Location, stage: Stage) -> int:
    tables = read_fragments(partition, listed, stage.schema, list(stage.keys[:1]))
    return sum(t.num_rows for t in tables if t is not None)


def _remove(partition: Location, fragments: list[FragmentInfo]) -> None:
    if partition.is_local:
        for info in fragments:
            partition.join(info.name).delete(missing_ok=True)
    else:
        # s3fs deletes in bulk requests of up to 1000 keys; a missing key is not an error.
        partition.fs.rm([info.path for info in fragments])
        partition.invalidate()
