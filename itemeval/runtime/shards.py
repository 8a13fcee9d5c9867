"""Shards: the unit of work a driver hands to a worker, and the summary a worker hands back.

A shard is a batch of cells of one condition whose items all sit in one items-snapshot part, so
a worker reads one small parquet part (and caches it) instead of the whole dataset, and writes
one fragment. Grade shards also name the solutions fragment(s) their solutions are in.
Shards are ordered part by part and, within a part, condition by condition: consecutive shards
share their items part (worker caches stay warm) and interleave the models (endpoints share
the load).

Everything here is plain data (dataclasses and small arrow tables) that pickles cheaply, which
is what crosses the Ray boundary.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

Stage = Literal["generate", "grade"]

#: A scorer shard costs no calls, so it can be much larger than a call shard.
SCORER_SHARD_FACTOR = 16


@dataclass(frozen=True, slots=True)
class Shard:
    """Cells of one condition, all in one items part.

    `cells` columns: generate `item_id, epoch`; grade `item_id, epoch, solution_hash,
    fragment` (the solutions fragment of `gen_condition_id` holding the solution).
    """

    shard_id: int
    stage: Stage
    condition_id: str
    dataset: str
    fingerprint: str
    part: int
    cells: pa.Table
    est_usd: float = 0.0
    gen_condition_id: str | None = None
    attempt: int = 0

    @property
    def size(self) -> int:
        return self.cells.num_rows

    def retry(self) -> Shard:
        return replace(self, attempt=self.attempt + 1)


@dataclass(slots=True)
class ShardSummary:
    """What a worker reports for a shard: small, whatever the shard's size."""

    shard_id: int
    stage: Stage
    condition_id: str
    cells: int = 0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # error code -> cells
    parse_failures: Counter[str] = field(default_factory=Counter)  # parse code -> cells
    cached: int = 0
    calls: int = 0  # provider calls made (cache hits and scorers make none)
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    latency_ms: float = 0.0  # summed over calls
    seconds: float = 0.0
    fragment: str | None = None
    interrupted: bool = False
    skipped: int = 0  # cells whose solution changed or vanished since planning

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


def _with_location(cells: pa.Table, items: pa.Table) -> pa.Table:
    """`cells` joined with the items index (`item_id -> dataset, fingerprint, part`)."""
    joined = cells.join(items, "item_id", join_type="inner", use_threads=False)
    if joined.num_rows != cells.num_rows:
        missing = cells.num_rows - joined.num_rows
        raise ValueError(f"{missing} cells name items that are not in this run's selection")
    return joined


def _groups(table: pa.Table, keys: list[str]) -> Iterator[tuple[dict[str, object], pa.Table]]:
    """Rows of `table` per distinct value of `keys`, in sorted key order (vectorised).

    Dictionary-encoded key columns (dataset names, fingerprints) are grouped by their indices
    and decoded only once per group."""
    if table.num_rows == 0:
        return
    dictionaries: dict[str, pa.Array] = {}
    for key in keys:
        column = table.column(key)
        if pa.types.is_dictionary(column.type):
            encoded = (
                column.unify_dictionaries().combine_chunks()
                if column.num_chunks > 1
                else column.combine_chunks()
            )
            dictionaries[key] = encoded.dictionary
            table = table.set_column(table.schema.get_field_index(key), key, encoded.indices)
    order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys])
    table = table.take(order)
    columns = [table.column(k).combine_chunks() for k in keys]
    change = None
    for column in columns:
        diff = pc.not_equal(column.slice(1), column.slice(0, len(column) - 1))
        change = diff if change is None else pc.or_(change, diff)
    starts = [0]
    if change is not None and len(change):
        starts += [int(i) + 1 for i in pc.indices_nonzero(change).to_pylist()]
    bounds = [*starts, table.num_rows]
    for start, stop in itertools.pairwise(bounds):
        group = table.slice(start, stop - start)
        values = {}
        for key in keys:
            value = group.column(key)[0].as_py()
            values[key] = dictionaries[key][value].as_py() if key in dictionaries else value
        yield values, group


def make_generate_shards(
    pending: pa.Table,
    items: pa.Table,
    *,
    shard_size: int,
    usd_per_cell: dict[str, float],
    first_id: int = 0,
) -> list[Shard]:
    """Shards of pending generate cells (`condition_id, item_id, epoch`)."""
    located = _with_location(pending, items)
    shards: list[tuple[tuple, Shard]] = []
    for key, group in _groups(located, ["part", "dataset", "fingerprint", "condition_id"]):
        cells = group.select(["item_id", "epoch"])
        cid = str(key["condition_id"])
        for chunk_index, offset in enumerate(range(0, cells.num_rows, shard_size)):
            chunk = cells.slice(offset, shard_size)
            order = (key["part"], key["dataset"], chunk_index, cid)
            shards.append(
                (
                    order,
                    Shard(
                        shard_id=0,
                        stage="generate",
                        condition_id=cid,
                        dataset=str(key["dataset"]),
                        fingerprint=str(key["fingerprint"]),
                        part=int(key["part"]),  # type: ignore[arg-type]
                        cells=chunk,
                        est_usd=usd_per_cell.get(cid, 0.0) * chunk.num_rows,
                    ),
                )
            )
    return _numbered(shards, first_id)


def _numbered(keyed: list[tuple[tuple, Shard]], first_id: int) -> list[Shard]:
    """Shards in dispatch order (part by part, conditions interleaved chunk by chunk), with
    their ids."""
    keyed.sort(key=lambda pair: pair[0])
    return [replace(shard, shard_id=first_id + i) for i, (_, shard) in enumerate(keyed)]


def make_grade_shards(
    pending: pa.Table,
    items: pa.Table,
    *,
    shard_size: int,
    usd_per_cell: dict[str, float],
    scorers: set[str],
    first_id: int = 0,
) -> list[Shard]:
    """Shards of pending grade cells (`grade_condition_id, gen_condition_id, item_id, epoch,
    solution_hash, fragment`); scorer shards are `SCORER_SHARD_FACTOR` times larger."""
    located = _with_location(pending, items)
    shards: list[tuple[tuple, Shard]] = []
    keys = ["part", "dataset", "fingerprint", "gen_condition_id", "grade_condition_id"]
    for key, group in _groups(located, keys):
        gid = str(key["grade_condition_id"])
        size = shard_size * (SCORER_SHARD_FACTOR if gid in scorers else 1)
        cells = group.select(["item_id", "epoch", "solution_hash", "fragment"])
        for chunk_index, offset in enumerate(range(0, cells.num_rows, size)):
            chunk = cells.slice(offset, size)
            order = (key["part"], key["dataset"], chunk_index, key["gen_condition_id"], gid)
            shards.append(
                (
                    order,
                    Shard(
                        shard_id=0,
                        stage="grade",
                        condition_id=gid,
                        dataset=str(key["dataset"]),
                        fingerprint=str(key["fingerprint"]),
                        part=int(key["part"]),  # type: ignore[arg-type]
                        cells=chunk,
                        est_usd=usd_per_cell.get(gid, 0.0) * chunk.num_rows,
                        gen_condition_id=str(key["gen_condition_id"]),
                    ),
                )
            )
    return _numbered(shards, first_id)
