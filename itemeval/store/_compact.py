"""Compaction: merge a partition's small fragments into one deduplicated fragment per unit, and
keep the partition's summary (`_summary.py`) up to date.

A **unit** is what one compacted fragment holds: the whole partition for solutions, one generate
condition for grades (a grades partition holds the grades of every generate condition; a unit
each keeps a compaction's memory to one condition's rows). Which fragments a compaction merges:

* every fragment the summary does not cover (written since, or never summarised), and every
  covered fragment of fewer than `SMALL_ROWS` rows;
* every fragment of a unit, when that unit would otherwise keep more than `MAX_LARGE` large
  fragments, or with `full=True`, or when the partition has no usable summary.

So a run's thousands of small fragments become one, and a large compacted fragment is not
rewritten for each small addition (a resumed run's 1% costs 1% to compact).

Safe while writers and readers run, because of the order of operations:

1. list the partition and read the summary's footer (a summary naming a fragment no longer
   listed is ignored);
2. read exactly the fragments chosen (F) and write the best row of each key of F as one new
   fragment per unit (C), wholly or not at all, with what F's dropped rows cost in its metadata
   (a unit at a time, in bounded memory: `_compact_merge.py`);
3. write the summary covering C and the fragments not merged (its cells a generate condition
   at a time);
4. rewrite the partition's `_compaction` marker;
5. delete exactly F, never a fragment written meanwhile.

A reader listing between 2 and 5 sees F and C and deduplicates the overlap; a reader whose
fragment of F vanishes re-lists and finds C; a reader whose listing overlapped the deletes sees
the marker change and reads the partition again (`fragments.read_partitions`); a reader of the
summary that finds a fragment it names gone reads the newer summary. A crash between any two
steps leaves duplicates that reads deduplicate and the next compaction removes, or fragments the
summary does not cover, which readers read in full. Rows keep their `written_at`. A compaction
that fails or is asked to stop (`stop`) before 3 removes the fragments it wrote in 2 (none is
named by a summary yet): the partition is as it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from itemeval.errors import Problem, StoreError
from itemeval.storage import Location
from itemeval.store._cells import FragmentCost, add_spent, paid_spent, replaces_any
from itemeval.store._compact_merge import MergedUnit, Stopped, Vanished, merge_unit
from itemeval.store._compact_summary import write_summary_streamed
from itemeval.store._layout import GRADES, STAGES, Stage, StudyStore
from itemeval.store._selection import select_conditions
from itemeval.store._summary import summarise_partition
from itemeval.store._summary_file import SUMMARY_FILE, PartitionSummary, read_summary
from itemeval.store._summary_file import write_summary as write_summary_of
from itemeval.store.fragments import (
    FragmentInfo,
    list_fragments,
    mark_compaction,
)

_MAX_ATTEMPTS = 5
#: A covered fragment with fewer rows is merged by the next compaction.
SMALL_ROWS = 100_000
#: A unit keeping more large fragments than this is compacted whole.
MAX_LARGE = 4


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What compacting one partition did."""

    stage: str
    condition_id: str
    fragments_read: int
    rows_read: int
    rows_written: int
    fragment_written: str | None  # the first new fragment; None when nothing was merged
    fragments_written: tuple[str, ...] = field(default=())
    summary_written: bool = False
    stopped: bool = False  # asked to stop: nothing changed (what it had written was removed)

    @property
    def duplicates_dropped(self) -> int:
        return self.rows_read - self.rows_written


def compact_partition(
    store: StudyStore,
    stage: Stage | str,
    condition_id: str,
    *,
    full: bool = False,
    stop: Callable[[], bool] | None = None,
) -> CompactionResult:
    """Compact one partition (see the module doc) and write its summary. `stop()` is asked
    between batches of fragments: once it is true the compaction removes what it wrote and
    returns with `stopped` (the partition as it was)."""
    stage = store.stage(stage)
    partition = store.partition(stage, condition_id)
    for _ in range(_MAX_ATTEMPTS):
        listed = list_fragments(partition)
        if not listed:
            return CompactionResult(stage.name, condition_id, 0, 0, 0, None)
        names = {info.name for info in listed}
        summary = read_summary(partition, stage, [])  # what it covers; cells read per condition
        if summary is not None and not set(summary.fragments) <= names:
            summary = None  # names a fragment another compaction removed: start afresh
        try:
            done = _compact_once(
                stage, partition, listed, summary, full=full or summary is None, stop=stop
            )
        except Stopped:
            return CompactionResult(stage.name, condition_id, 0, 0, 0, None, stopped=True)
        if done is not None:
            return CompactionResult(stage.name, condition_id, *done)
    raise StoreError(
        Problem(
            "fragments kept disappearing during compaction (another compaction running?)",
            file=partition.url,
        )
    )


class _Restart(Exception):
    """A fragment chosen merged a covered one: compact from every row."""


def _compact_once(
    stage: Stage,
    partition: Location,
    listed: list[FragmentInfo],
    summary: PartitionSummary | None,
    *,
    full: bool,
    stop: Callable[[], bool] | None = None,
) -> tuple[int, int, int, str | None, tuple[str, ...], bool] | None:
    covered = summary.fragments if summary is not None else {}
    units = _units(stage, partition, listed, summary)
    if units is None:
        return None  # a fragment vanished while its footer was read
    chosen: dict[str, list[FragmentInfo]] = {}
    for unit, infos in units.items():
        small = [i for i in infos if i.name not in covered or covered[i.name] < SMALL_ROWS]
        large = len(infos) - len(small)
        pick = infos if full or large > MAX_LARGE else small
        if len(pick) >= 2 or any(i.name not in covered for i in pick):
            chosen[unit] = pick
    if not chosen:
        return 0, 0, 0, None, (), False
    merged_names = frozenset(i.name for infos in chosen.values() for i in infos)
    if summary is not None:
        spent = summary.spent
        fragments = {n: r for n, r in summary.fragments.items() if n not in merged_names}
    else:
        spent = add_spent()
        fragments = {}

    def check(costs: dict[str, FragmentCost]) -> None:
        # A compaction died after writing one of these and before its summary: the summary's
        # cost counts rows this fragment holds again. Start from every row.
        if replaces_any(costs, covered):
            raise _Restart

    done: list[MergedUnit] = []
    try:
        for infos in chosen.values():  # 2: the new fragments, each wholly or not at all
            unit = merge_unit(stage, partition, infos, stop, check=check)
            partition.join(unit.name).write_atomic(unit.payload)
            unit.payload = b""
            done.append(unit)
            fragments[unit.name] = unit.rows_written
            # What covered fragments cost is in `summary.spent` already.
            uncovered = {n: c for n, c in unit.costs.items() if n not in covered}
            spent = add_spent(spent, paid_spent(uncovered))
        # 3: the summary of what stays, then 4 and 5
        payload = write_summary_streamed(
            stage, partition, summary, merged_names, done, fragments, spent, stop
        )
        write_summary(partition, payload)
    except Vanished:
        _remove_written(partition, done)
        return None
    except _Restart:
        _remove_written(partition, done)
        return _compact_once(stage, partition, listed, None, full=True, stop=stop)
    except BaseException:
        _remove_written(partition, done)  # stopped, or failed: as if it had not started
        raise
    merged = [i for infos in chosen.values() for i in infos]
    mark_compaction(partition)
    _remove(partition, merged)
    names = tuple(unit.name for unit in done)
    rows_read = sum(unit.rows_read for unit in done)
    rows_written = sum(unit.rows_written for unit in done)
    return len(merged), rows_read, rows_written, names[0] if names else None, names, True


def write_summary(partition: Location, payload: bytes) -> None:
    """Step 3: the partition's summary (`write_summary_streamed`'s bytes), atomically."""
    partition.join(SUMMARY_FILE).write_atomic(payload)


def _remove_written(partition: Location, units: list[MergedUnit]) -> None:
    """Remove the fragments an abandoned compaction wrote (no summary names them; a reader
    that listed one finds it gone and lists again). What cannot be removed stays: a duplicate
    of rows that reads resolve and the next compaction merges."""
    for unit in units:
        with contextlib.suppress(Exception):
            partition.join(unit.name).delete(missing_ok=True)


def _units(
    stage: Stage,
    partition: Location,
    listed: list[FragmentInfo],
    summary: PartitionSummary | None,
) -> dict[str, list[FragmentInfo]] | None:
    """The partition's fragments by unit (see the module doc); None if one vanished."""
    if stage.name != GRADES.name:
        return {"": listed}
    # The generate conditions of each fragment, from its footer's statistics (a run's
    # fragment holds one); fragments spanning several join their conditions into one unit.
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    spans: list[tuple[FragmentInfo, str, str]] = []
    for info in listed:
        span = _gen_span(partition, info)
        if span is None:
            return None
        low, high = span
        spans.append((info, low, high))
        if low != high:
            parent[find(high)] = find(low)
    units: dict[str, list[FragmentInfo]] = {}
    for _, low, high in spans:
        if low != high:  # every condition between
            for other in {s[1] for s in spans} | {s[2] for s in spans}:
                if low <= other <= high:
                    parent[find(other)] = find(low)
    for info, low, _ in spans:
        units.setdefault(find(low), []).append(info)
    return units


def _gen_span(partition: Location, info: FragmentInfo) -> tuple[str, str] | None:
    """The least and greatest `gen_condition_id` of a grades fragment, from its footer."""
    try:
        if partition.is_local:
            meta = pq.read_metadata(info.path)
        else:
            with partition.fs.open(info.path, "rb") as handle:
                meta = pq.read_metadata(handle)
    except FileNotFoundError:
        return None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise StoreError(
            Problem(f"not a readable store fragment ({exc})", file=partition.url + "/" + info.name)
        ) from exc
    column = meta.schema.to_arrow_schema().get_field_index("gen_condition_id")
    low = high = None
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max:
            return "", "\U0010ffff"  # unknown: it may hold any condition
        lo, hi = str(stats.min), str(stats.max)
        low = lo if low is None or lo < low else low
        high = hi if high is None or hi > high else high
    return (low or "", high or "")


def compact(
    store: StudyStore,
    stages: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
    *,
    full: bool = False,
    stop: Callable[[], bool] | None = None,
) -> list[CompactionResult]:
    """Compact every partition of `stages` (default: solutions and grades), or those that the
    `conditions` selections (ids, prefixes, slugs, globs) name. `stop()`: see
    `compact_partition`; the partitions after a stopped one are left as they are."""
    results = []
    for stage, cid in _partitions(store, stages, conditions):
        if stop is not None and stop():
            break
        results.append(compact_partition(store, stage, cid, full=full, stop=stop))
    return results


def rebuild_summaries(
    store: StudyStore,
    stages: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None,
) -> list[tuple[str, str, int]]:
    """Write every chosen partition's summary again from its rows (`compact
    --rebuild-summaries`): `(stage, condition id, cells)` per partition."""
    out = []
    for stage, cid in _partitions(store, stages, conditions):
        partition = store.partition(stage, cid)
        summary = summarise_partition(stage, partition)
        write_summary_of(partition, summary)
        out.append((stage.name, cid, summary.cells.num_rows))
    return out


def _partitions(
    store: StudyStore, stages: Sequence[str] | None, conditions: Sequence[str] | None
) -> list[tuple[Stage, str]]:
    chosen = [store.stage(name) for name in stages or list(STAGES)]
    known = {stage.name: store.condition_ids(stage) for stage in chosen}
    # One selection may name a generate or a grade condition: resolve against both.
    every = [cid for stage in chosen for cid in known[stage.name]]
    selected = set(select_conditions(every, conditions)) if conditions else set(every)
    return [(stage, cid) for stage in chosen for cid in known[stage.name] if cid in selected]


def _remove(partition: Location, fragments: list[FragmentInfo]) -> None:
    if not fragments:
        return
    if partition.is_local:
        for info in fragments:
            partition.join(info.name).delete(missing_ok=True)
    else:
        # s3fs deletes in bulk requests of up to 1000 keys; a missing key is not an error.
        partition.fs.rm([info.path for info in fragments])
        partition.invalidate()
