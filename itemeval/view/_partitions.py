"""Where the viewer's rows are: a partition's fragments (`Where`), and a grade partition's
logical rows per generate condition, read the way its layout makes cheap."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval.errors import Problem, StoreError
from itemeval.export import FRAG, GRADE_CELL_COLUMNS, POS, GradePartition
from itemeval.planning import Plan
from itemeval.storage import Location
from itemeval.store import GRADES, best_row_indices, conform_older, fill_columns
from itemeval.store.fragments import FRAGMENT_ORDINAL, list_fragments, open_parquet

_CODE = pa.int32()


@dataclass(frozen=True)
class Where:
    """A partition: where it is and its fragment names by ordinal (`FRAG` values)."""

    condition_id: str
    location: Location
    fragments: list[str]


def grades_by_condition(
    plan: Plan, condition_id: str, gen_ids: list[str]
) -> Iterator[tuple[int, Where, pa.Table]]:
    """The logical rows of a grade partition, per generate condition (each once): read one
    condition at a time from the fragments that hold it (a run's fragments hold one), or the
    whole partition at once when it has fewer fragments than conditions (compacted: each file
    holds them all, and reading it per condition would read it once per condition)."""
    partition = GradePartition(plan.store, condition_id)
    if len(partition.fragments) >= len(gen_ids):
        where = Where(condition_id, partition.location, [f.name for f in partition.fragments])
        for gen, gen_id in enumerate(gen_ids):
            yield gen, where, partition.locate(gen_id, extra=GRADE_CELL_COLUMNS).keys
        return
    yield from compacted_grade_rows(plan, condition_id, gen_ids)


def compacted_grade_rows(
    plan: Plan, condition_id: str, gen_ids: list[str]
) -> Iterator[tuple[int, Where, pa.Table]]:
    """A compacted grade partition's logical rows per generate condition, read one row group at
    a time (a row group's rows are split by condition as they are read, so the partition's
    condition ids are never held as strings), then deduplicated per condition by the store's
    rule. A condition is given as soon as no row group left to read can hold it (the footer's
    min and max of `gen_condition_id`; a compacted file is sorted by it), so only the
    conditions of the row groups being read are held, not the partition; each condition is
    given once, not necessarily in `gen_ids` order."""
    location = plan.store.partition(GRADES, condition_id)
    infos = list_fragments(location)
    where = Where(condition_id, location, [f.name for f in infos])
    columns = list(dict.fromkeys([*GRADES.keys, "status", "written_at", *GRADE_CELL_COLUMNS]))
    keys = ["item_id", "epoch"]  # within one generate condition
    keep = [c for c in columns if c != "gen_condition_id"]
    per_gen: list[list[pa.Table]] = [[] for _ in gen_ids]
    value_set = pa.array(gen_ids, pa.string())
    footers = []
    for info in infos:
        fragment = location.join(info.name)
        try:
            if fragment.is_local:
                footers.append(pq.read_metadata(fragment.path))
            else:
                with fragment.open("rb") as handle:
                    footers.append(pq.read_metadata(handle))
        except FileNotFoundError:
            raise _vanished(fragment.url) from None
    last = _last_groups(footers, gen_ids)

    def rows_of(gen: int) -> pa.Table:
        parts, per_gen[gen] = per_gen[gen], []
        if not parts:
            schema = pa.schema(
                [GRADES.schema.field(c) for c in keep]
                + [pa.field(FRAG, _CODE), pa.field(POS, pa.int64())]
            )
            return schema.empty_table()
        table = pa.concat_tables(parts)
        best = best_row_indices(
            table.select([*keys, "status", "written_at", FRAGMENT_ORDINAL]), keys
        )
        located = table.select(keep).append_column(FRAG, table.column(FRAGMENT_ORDINAL))
        return located.append_column(POS, table.column(POS)).take(best)

    for gen in range(len(gen_ids)):
        if last[gen] < 0:  # no row group can hold it
            yield gen, where, rows_of(gen)
    step = 0
    for ordinal, info in enumerate(infos):
        fragment = location.join(info.name)
        try:
            source = fragment.path if fragment.is_local else pa.BufferReader(fragment.read_bytes())
            parquet = open_parquet(source)
        except FileNotFoundError:
            raise _vanished(fragment.url) from None
        fills = conform_older(parquet.schema_arrow, GRADES.schema)
        if fills is None:
            raise StoreError(
                Problem("fragment does not have the store's schema", file=fragment.url)
            )
        present = [c for c in columns if c not in fills]
        offset = 0
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group, columns=present, use_threads=False)
            if fills:
                table = fill_columns(table, GRADES.schema, columns, fills)
            n = table.num_rows
            codes = pc.fill_null(
                pc.index_in(table.column("gen_condition_id"), value_set=value_set), -1
            ).to_numpy(zero_copy_only=False)
            table = table.drop_columns(["gen_condition_id"])
            table = table.append_column(FRAGMENT_ORDINAL, pa.repeat(pa.scalar(ordinal, _CODE), n))
            table = table.append_column(
                POS, pa.array(np.arange(offset, offset + n, dtype=np.int64))
            )
            offset += n
            for gen in np.unique(codes[codes >= 0]).tolist():
                per_gen[gen].append(table.filter(pa.array(codes == gen)))
            del table
            for gen in range(len(gen_ids)):
                if last[gen] == step:
                    yield gen, where, rows_of(gen)
            step += 1


def _vanished(url: str) -> StoreError:
    return StoreError(Problem("a fragment vanished while the viewer read it", file=url))


def _last_groups(footers: list[pq.FileMetaData], gen_ids: list[str]) -> list[int]:
    """For each generate condition, the last row group (counted over `footers` in order) whose
    footer statistics allow it to hold the condition (-1: none). A row group without
    statistics may hold any."""
    last = [-1] * len(gen_ids)
    step = 0
    for meta in footers:
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        column = names.index("gen_condition_id") if "gen_condition_id" in names else None
        for group in range(meta.num_row_groups):
            stats = None if column is None else meta.row_group(group).column(column).statistics
            bounds = (
                (str(stats.min), str(stats.max))
                if stats is not None and stats.has_min_max
                else None
            )
            for gen, gen_id in enumerate(gen_ids):
                if bounds is None or bounds[0] <= gen_id <= bounds[1]:
                    last[gen] = step
            step += 1
    return last
