"""The study store: where everything lives under a study root, and `StudyStore`, its facade.

```
items/<dataset>/<fingerprint16>/part-00000.parquet ...   items snapshot (ITEM_SCHEMA)
items/<dataset>/<fingerprint16>/_complete.json            written last
solutions/condition_id=<gen condition id>/<fragment>.parquet
grades/grade_condition_id=<grade condition id>/<fragment>.parquet
manifests/<run_id>.json
dataset_locks.json                                        owned by itemeval.datasets._locks
```

A `Stage` binds a directory to its partition column, key columns and schema. `StudyStore`
writes checked fragments and reads partitions back, deduplicated by key, reading only the
partitions and columns it is asked for. Every byte goes through `itemeval.storage.Location`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from itemeval.errors import Problem, StoreError
from itemeval.storage import Location, resolve
from itemeval.store._dedup import deduplicate, deduplicate_unordered
from itemeval.store._schemas import GRADE_SCHEMA, SOLUTION_SCHEMA, build_table, check_table
from itemeval.store.fragments import (
    FRAGMENT_NAME,
    FragmentInfo,
    FragmentReducer,
    list_fragments,
    read_partitions,
    scan_partition,
    write_fragment,
)

# Partition values become directory names: keep them to characters every tool leaves alone.
# (no `+`, `~`, `%` or `=`: hive readers URL-decode partition values).
_PARTITION_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")


@dataclass(frozen=True, slots=True)
class Stage:
    """One hive-partitioned table of the store."""

    name: str  # directory under the root
    partition: str  # the hive partition column (not stored in fragments)
    keys: tuple[str, ...]  # key columns inside a partition; the full key adds `partition`
    schema: pa.Schema

    @property
    def full_key(self) -> tuple[str, ...]:
        return (self.partition, *self.keys)


SOLUTIONS = Stage("solutions", "condition_id", ("item_id", "epoch"), SOLUTION_SCHEMA)
GRADES = Stage(
    "grades", "grade_condition_id", ("gen_condition_id", "item_id", "epoch"), GRADE_SCHEMA
)
STAGES: dict[str, Stage] = {SOLUTIONS.name: SOLUTIONS, GRADES.name: GRADES}

#: Columns dedup needs besides the keys.
_DEDUP_COLUMNS = ("status", "written_at")


def check_partition_value(value: str, *, field: str = "condition_id") -> str:
    """`value` if it can name a partition directory, else a `StoreError` saying why not."""
    if not isinstance(value, str) or not _PARTITION_VALUE.match(value):
        raise StoreError(
            Problem(
                f"{value!r} cannot name a partition",
                field=field,
                hint="condition ids use letters, digits and . _ - (and do not start with . or _)",
            )
        )
    return value


def partition_dir(stage: Stage, value: str) -> str:
    """The hive directory name of one partition, e.g. `condition_id=gpt-4o--3fa9c2d1e0b4`."""
    return f"{stage.partition}={check_partition_value(value, field=stage.partition)}"


class StudyStore:
    """The store of one study at any fsspec URL (see the module doc for the layout)."""

    def __init__(self, root: Location):
        self.root = root

    @classmethod
    def open(
        cls, url: str | os.PathLike[str], storage_options: dict[str, Any] | None = None
    ) -> StudyStore:
        """The store at `url` (created lazily: nothing is written until something is stored)."""
        return cls(resolve(url, storage_options))

    def __repr__(self) -> str:
        return f"StudyStore({self.root.url!r})"

    # -- locations -----------------------------------------------------------------------
    @property
    def items(self) -> Location:
        return self.root.join("items")

    @property
    def solutions(self) -> Location:
        return self.root.join(SOLUTIONS.name)

    @property
    def grades(self) -> Location:
        return self.root.join(GRADES.name)

    @property
    def manifests(self) -> Location:
        return self.root.join("manifests")

    @property
    def dataset_locks(self) -> Location:
        """`dataset_locks.json` (read and written by `itemeval.datasets._locks`)."""
        return self.root.join("dataset_locks.json")

    @staticmethod
    def stage(stage: Stage | str) -> Stage:
        if isinstance(stage, Stage):
            return stage
        try:
            return STAGES[stage]
        except KeyError:
            raise StoreError(
                Problem(f"unknown stage {stage!r}", hint=f"one of {sorted(STAGES)}")
            ) from None

    def partition(self, stage: Stage | str, condition_id: str) -> Location:
        stage = self.stage(stage)
        return self.root.join(stage.name, partition_dir(stage, condition_id))

    def condition_ids(self, stage: Stage | str) -> list[str]:
        """The ids of the partitions present under a stage directory, sorted."""
        stage = self.stage(stage)
        directory = self.root.join(stage.name)
        directory.invalidate()
        prefix = stage.partition + "="
        return [n[len(prefix) :] for n in directory.listdir() if n.startswith(prefix)]

    def fragments(self, stage: Stage | str, condition_id: str) -> list[FragmentInfo]:
        return list_fragments(self.partition(stage, condition_id))

    # -- writing -------------------------------------------------------------------------
    def write(
        self,
        stage: Stage | str,
        condition_id: str,
        rows: pa.Table | Iterable[Mapping[str, Any]],
    ) -> str | None:
        """Store `rows` as one new fragment of a partition; returns its name (None if empty).

        `rows` is a table with exactly the stage's schema or row dicts (`build_table` fills
        defaults). A table of another schema is a `StoreError`; nothing is written then.
        """
        stage = self.stage(stage)
        partition = self.partition(stage, condition_id)
        if isinstance(rows, pa.Table):
            table = check_table(rows, stage.schema, what=partition.url)
        else:
            table = build_table(stage.schema, rows)
        if table.num_rows == 0:
            return None
        return write_fragment(partition, table)

    def write_solutions(
        self, condition_id: str, rows: pa.Table | Iterable[Mapping[str, Any]]
    ) -> str | None:
        return self.write(SOLUTIONS, condition_id, rows)

    def write_grades(
        self, grade_condition_id: str, rows: pa.Table | Iterable[Mapping[str, Any]]
    ) -> str | None:
        return self.write(GRADES, grade_condition_id, rows)

    # -- reading -------------------------------------------------------------------------
    def read_by_condition(
        self,
        stage: Stage | str,
        condition_ids: Sequence[str],
        columns: Sequence[str] | None = None,
        *,
        dedup: bool = True,
        ordered: bool = True,
        fragment_names: bool = False,
        reduce: FragmentReducer | None = None,
    ) -> dict[str, pa.Table]:
        """One table per condition id (without the partition column), read in parallel.

        With `dedup`, each table holds the best row of each key; the key and status columns
        are read for that even when `columns` leaves them out, and dropped again. With
        `fragment_names`, a last column `_fragment_name` says which fragment each row is in.
        `ordered=False`: deduplicated rows in no particular order (`deduplicate_unordered`:
        much less memory than the sort into key order, for a reader that sums or places them).
        `reduce` is applied to each fragment as it is read (`fragments.read_partitions`); the
        result holds the `columns` it kept. With `dedup` it must keep the key columns, and may
        drop rows only where the rule would not have chosen them (e.g. error rows of a reader
        that wants `ok` rows).
        """
        stage = self.stage(stage)
        wanted = list(columns) if columns is not None else list(stage.schema.names)
        to_read = list(wanted)
        if dedup:
            for name in (*stage.keys, *_DEDUP_COLUMNS):
                if name not in to_read:
                    to_read.append(name)
        partitions = {cid: self.partition(stage, cid) for cid in dict.fromkeys(condition_ids)}
        tables = read_partitions(
            partitions, stage.schema, to_read, fragment_names=fragment_names, reduce=reduce
        )
        keep = [*wanted, FRAGMENT_NAME] if fragment_names else wanted
        out: dict[str, pa.Table] = {}
        for cid, table in tables.items():
            if dedup:
                dedup_rows = deduplicate if ordered else deduplicate_unordered
                table = dedup_rows(table, stage.keys)
            kept = keep if reduce is None else [c for c in keep if c in table.column_names]
            out[cid] = table.select(kept)
        return out

    def scan(
        self,
        stage: Stage | str,
        condition_id: str,
        columns: Sequence[str],
        *,
        reduce: FragmentReducer | None = None,
        batch_rows: int | None = None,
        fragment_names: list[str] | None = None,
        skip: Container[str] = (),
    ) -> Iterator[pa.Table]:
        """One condition's rows, `columns` only and not deduplicated, as a stream of tables
        (`fragments.scan_partition`: memory bounded by a batch; a row may come twice when the
        partition is compacted meanwhile; `fragment_names` and `skip` as there)."""
        stage = self.stage(stage)
        partition = self.partition(stage, condition_id)
        return scan_partition(
            partition,
            stage.schema,
            columns,
            reduce=reduce,
            batch_rows=batch_rows,
            fragment_names=fragment_names,
            skip=skip,
        )

    def read(
        self,
        stage: Stage | str,
        condition_ids: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
        *,
        dedup: bool = True,
    ) -> pa.Table:
        """Rows of the given partitions (all present ones if None), partition column first."""
        stage = self.stage(stage)
        if condition_ids is None:
            condition_ids = self.condition_ids(stage)
        tables = self.read_by_condition(stage, condition_ids, columns, dedup=dedup)
        wanted = list(columns) if columns is not None else list(stage.schema.names)
        parts = [
            table.add_column(0, stage.partition, pa.repeat(cid, table.num_rows))
            for cid, table in tables.items()
            if table.num_rows
        ]
        if not parts:
            fields = [pa.field(stage.partition, pa.string())]
            fields += [stage.schema.field(c) for c in wanted]
            return pa.schema(fields).empty_table()
        return pa.concat_tables(parts)

    def read_solutions(
        self,
        condition_ids: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
        *,
        dedup: bool = True,
    ) -> pa.Table:
        return self.read(SOLUTIONS, condition_ids, columns, dedup=dedup)

    def read_grades(
        self,
        grade_condition_ids: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
        *,
        dedup: bool = True,
    ) -> pa.Table:
        return self.read(GRADES, grade_condition_ids, columns, dedup=dedup)
