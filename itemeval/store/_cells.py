"""Cells: a partition's logical rows reduced to what the re-run commands read.

A cell is one key of a partition (`item_id, epoch`; for grades `gen_condition_id` first) and
its best row by the store's rule, reduced to small columns: status as `ok`, codes, score,
tokens, dollars, the answer's text hash as a 64-bit key, and where the row lives (`fragment`,
`position`). Cells are what a partition's summary holds (`_summary.py`); they are made from
rows (`rows_to_cells`), merged (`merge_cells`), and counted (`cell_groups`). What physical rows
cost (superseded rows included) is kept apart, per model (`spent_of`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.store._content_keys import hash_keys
from itemeval.store._dedup import keys_present
from itemeval.store._layout import GRADES, Stage
from itemeval.store._schemas import STATUS_OK, TIER_BATCH, TIMESTAMP
from itemeval.store.fragments import FRAGMENT_ORDINAL

#: The metadata key of a compacted fragment's superseded rows' cost.
SUPERSEDED_KEY = b"itemeval.superseded"
#: ... and the names of the fragments it merged.
MERGED_KEY = b"itemeval.merged"

_HASH = pa.uint64()
#: The cells' columns after the keys, both stages.
_TAIL = [
    ("ok", pa.bool_()),
    ("error_code", pa.string()),
    ("cached", pa.bool_()),
    ("batch", pa.bool_()),
    ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("cached_input_tokens", pa.int64()),
    ("reasoning_tokens", pa.int64()),
    ("usd", pa.float64()),
    ("latency_ms", pa.float64()),
    ("attempts", pa.int32()),
    ("written_at", TIMESTAMP),
    ("fragment", pa.string()),
    ("position", pa.int64()),
]
SOLUTION_CELLS = pa.schema(
    [
        ("item_id", pa.string()),
        ("epoch", pa.int32()),
        ("model", pa.string()),
        ("text_hash", _HASH),
        *_TAIL,
    ]
)
GRADE_CELLS = pa.schema(
    [
        ("gen_condition_id", pa.string()),
        ("item_id", pa.string()),
        ("epoch", pa.int32()),
        ("grader", pa.string()),
        ("score", pa.float64()),
        ("correct", pa.bool_()),
        ("parse_ok", pa.bool_()),
        ("parse_code", pa.string()),
        ("solution_hash", _HASH),
        *_TAIL,
    ]
)
#: What physical rows cost, per model (or grader): every row, and the paid rows' prompt-cache
#: reads and batch-tier dollars (the inputs of status's savings).
SPENT_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("usd", pa.float64()),
        ("paid_cached_input_tokens", pa.int64()),
        ("paid_batch_usd", pa.float64()),
    ]
)
#: Columns that decide which row of a key is the logical one, besides the key.
RULE_COLUMNS = ("ok", "written_at", "fragment")


def cells_schema(stage: Stage) -> pa.Schema:
    return GRADE_CELLS if stage.name == GRADES.name else SOLUTION_CELLS


def model_column(stage: Stage) -> str:
    return "grader" if stage.name == GRADES.name else "model"


def _hash_column(stage: Stage) -> str:
    return "solution_hash" if stage.name == GRADES.name else "text_hash"


def row_columns(stage: Stage) -> list[str]:
    """The stored columns the cells are made of."""
    extra = ["score", "correct", "parse_ok", "parse_code"] if stage.name == GRADES.name else []
    return [
        *stage.keys,
        model_column(stage),
        *extra,
        _hash_column(stage),
        "status",
        "error_code",
        "cached",
        "tier",
        "input_tokens",
        "output_tokens",
        "cached_input_tokens",
        "reasoning_tokens",
        "usd",
        "latency_ms",
        "attempts",
        "written_at",
    ]


# -- rows -> cells -----------------------------------------------------------------------------


#: A column a reader that keeps only some rows of each fragment adds before it filters: each
#: row's place in its fragment (`rows_to_cells` takes it as the `position`).
ROW_IN_FRAGMENT = "_row_in_fragment"


def rows_to_cells(stage: Stage, rows: pa.Table, fragment: pa.Array | str) -> pa.Table:
    """Physical rows (the `row_columns`, in a fragment's order) as cells rows, not yet
    deduplicated: `fragment` names each row's fragment (one name for all, or an array), and a
    row's `position` is its place in that fragment (rows of one fragment must come in order,
    starting at its first), or its `ROW_IN_FRAGMENT` when the rows carry one (a reader kept
    only some of them)."""
    n = rows.num_rows
    names: pa.Array | pa.ChunkedArray
    if ROW_IN_FRAGMENT in rows.column_names:
        names = pa.array([fragment] * n, pa.string()) if isinstance(fragment, str) else fragment
        positions = rows.column(ROW_IN_FRAGMENT).to_numpy().astype(np.int64)
    elif isinstance(fragment, str):
        names = pa.array([fragment] * n, pa.string()) if n else pa.array([], pa.string())
        positions = np.arange(n, dtype=np.int64)
    else:
        names = fragment
        positions = _positions_within(fragment)
    schema = cells_schema(stage)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name in schema.names:
        if name == "ok":
            columns[name] = pc.equal(rows.column("status"), STATUS_OK)
        elif name == "batch":
            columns[name] = pc.equal(rows.column("tier"), TIER_BATCH)
        elif name in ("text_hash", "solution_hash"):
            columns[name] = pa.array(hash_keys(rows.column(name)), _HASH)
        elif name == "fragment":
            columns[name] = names
        elif name == "position":
            columns[name] = pa.array(positions, pa.int64())
        else:
            columns[name] = rows.column(name)
    return pa.table(columns).cast(schema)


def _positions_within(fragment: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each row's place among the rows of its fragment that come before it (rows of a fragment
    are contiguous and in order)."""
    if isinstance(fragment, pa.ChunkedArray):
        fragment = fragment.combine_chunks()
    n = len(fragment)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    codes = pc.dictionary_encode(fragment).indices.to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
    run_start = np.repeat(starts, np.diff(np.append(starts, n)))
    return np.arange(n, dtype=np.int64) - run_start


def best_cells(stage: Stage, cells: pa.Table) -> pa.Table:
    """One row per key by the store's rule (`ok` first, then the later `written_at`, then the
    later fragment), sorted by key."""
    n = cells.num_rows
    if n <= 1:
        return cells
    keys = list(stage.keys)
    names = cells.column("fragment")
    ranks = pc.rank(names, sort_keys="ascending", tiebreaker="dense")
    work = pa.table(
        {
            **{k: cells.column(k) for k in keys},
            "ok": cells.column("ok"),
            "written_at": cells.column("written_at"),
            FRAGMENT_ORDINAL: ranks,
        }
    )
    order = [(k, "ascending") for k in keys]
    order += [("ok", "descending"), ("written_at", "descending"), (FRAGMENT_ORDINAL, "descending")]
    indices = pc.sort_indices(work, sort_keys=order)
    first = np.zeros(n, dtype=bool)
    first[0] = True
    for key in keys:
        ordered = pc.take(work.column(key), indices).combine_chunks()
        first[1:] |= pc.not_equal(ordered.slice(1), ordered.slice(0, n - 1)).to_numpy(
            zero_copy_only=False
        )
    return cells.take(pc.filter(indices, pa.array(first)))


def merge_cells(stage: Stage, base: pa.Table, newer: pa.Table) -> pa.Table:
    """`base` (cells, one row per key) with the rows of `newer` (cells rows, any number per
    key) merged in by the store's rule. Only the keys `newer` holds are compared: the rest of
    `base` is kept as it is (in its order); the merged keys follow, sorted by key."""
    if newer.num_rows == 0:
        return base
    newer = newer.select(base.schema.names)
    if base.num_rows == 0:
        return best_cells(stage, newer)
    keys = list(stage.keys)
    touched = keys_present(base, newer, keys)
    if not touched.any():
        return pa.concat_tables([base, best_cells(stage, newer)])
    kept = base.filter(pa.array(~touched))
    contested = pa.concat_tables([base.filter(pa.array(touched)), newer])
    return pa.concat_tables([kept, best_cells(stage, contested)])


# -- what physical rows cost -------------------------------------------------------------------


def spent_of(stage: Stage, rows: pa.Table) -> pa.Table:
    """`SPENT_SCHEMA` per model of physical rows (needs `usd`, `cached`, `tier` or `batch`,
    `cached_input_tokens` and the model column)."""
    model = model_column(stage)
    if rows.num_rows == 0:
        return SPENT_SCHEMA.empty_table()
    cached = rows.column("cached")
    batch = (
        rows.column("batch")
        if "batch" in rows.column_names
        else pc.equal(rows.column("tier"), TIER_BATCH)
    )
    paid = pc.invert(cached)
    work = pa.table(
        {
            "model": rows.column(model),
            "usd": rows.column("usd"),
            "paid_cached_input_tokens": pc.if_else(paid, rows.column("cached_input_tokens"), 0),
            "paid_batch_usd": pc.if_else(pc.and_(paid, batch), rows.column("usd"), 0.0),
        }
    )
    grouped = work.group_by("model", use_threads=False).aggregate(
        [("usd", "sum"), ("paid_cached_input_tokens", "sum"), ("paid_batch_usd", "sum")]
    )
    return _spent_table(grouped.rename_columns([f.split("_sum")[0] for f in grouped.column_names]))


def add_spent(*tables: pa.Table) -> pa.Table:
    """The sum of several `SPENT_SCHEMA` tables, per model (in a stable order)."""
    parts = [t for t in tables if t.num_rows]
    if not parts:
        return SPENT_SCHEMA.empty_table()
    if len(parts) == 1:
        return parts[0]
    grouped = (
        pa.concat_tables(parts)
        .group_by("model", use_threads=False)
        .aggregate([("usd", "sum"), ("paid_cached_input_tokens", "sum"), ("paid_batch_usd", "sum")])
    )
    return _spent_table(grouped.rename_columns([f.split("_sum")[0] for f in grouped.column_names]))


def _spent_table(table: pa.Table) -> pa.Table:
    table = table.select(SPENT_SCHEMA.names).cast(SPENT_SCHEMA)
    return table.take(pc.sort_indices(table, [("model", "ascending")]))


def spent_to_json(spent: pa.Table) -> list[list[object]]:
    return [list(row.values()) for row in spent.to_pylist()]


def spent_from_json(rows: Iterable[Sequence[object]]) -> pa.Table:
    data = list(rows)
    if not data:
        return SPENT_SCHEMA.empty_table()
    columns = list(zip(*data, strict=True))
    return pa.table(
        {f.name: pa.array(list(col), f.type) for f, col in zip(SPENT_SCHEMA, columns, strict=True)}
    )


@dataclass(frozen=True)
class FragmentCost:
    """What one fragment's physical rows cost (and, for a fragment a compaction wrote, the rows
    it dropped), and the fragments that compaction merged into it."""

    spent: pa.Table
    merged: frozenset[str] = frozenset()


def fragment_cost(stage: Stage, table: pa.Table) -> FragmentCost:
    """A fragment's cost, from its rows as read (`row_columns`) and its file's metadata."""
    meta = table.schema.metadata or {}
    raw = meta.get(SUPERSEDED_KEY)
    superseded = spent_from_json(json.loads(raw)) if raw else SPENT_SCHEMA.empty_table()
    merged = meta.get(MERGED_KEY)
    return FragmentCost(
        add_spent(spent_of(stage, table), superseded),
        frozenset(json.loads(merged)) if merged else frozenset(),
    )


def paid_spent(costs: Mapping[str, FragmentCost]) -> pa.Table:
    """What a set of fragments' physical rows cost, each paid row once: a fragment that a
    compaction merged into another one of the set is counted in that one (a compaction that
    died before it deleted what it merged leaves both)."""
    replaced = set().union(*(c.merged for c in costs.values())) if costs else set()
    return add_spent(*(c.spent for name, c in costs.items() if name not in replaced))


def replaces_any(costs: Mapping[str, FragmentCost], names: Collection[str]) -> bool:
    """Whether one of the fragments merged one of `names`."""
    wanted = set(names)
    return any(c.merged & wanted for c in costs.values())


def group_columns(stage: Stage) -> list[str]:
    """What cells are counted by (`cell_groups`)."""
    if stage.name == GRADES.name:
        return [
            "gen_condition_id",
            "grader",
            "ok",
            "error_code",
            "cached",
            "batch",
            "parse_ok",
            "parse_code",
        ]
    return ["model", "ok", "error_code", "cached", "batch"]


GROUP_SUMS = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
    "usd",
    "latency_ms",
)


def cell_groups(stage: Stage, cells: pa.Table) -> pa.Table:
    """The cells counted by `group_columns`: `cells` (the count) and the sums of
    `GROUP_SUMS`, one row per group, in a stable order."""
    keys = group_columns(stage)
    schema = _groups_schema(stage)
    if cells.num_rows == 0:
        return schema.empty_table()
    grouped = cells.group_by(keys, use_threads=False).aggregate(
        [([], "count_all")] + [(name, "sum") for name in GROUP_SUMS]
    )
    grouped = grouped.rename_columns(
        [("cells" if n == "count_all" else n.removesuffix("_sum")) for n in grouped.column_names]
    )
    grouped = grouped.select(schema.names).cast(schema)
    return grouped.take(pc.sort_indices(grouped, [(k, "ascending") for k in keys]))


def _groups_schema(stage: Stage) -> pa.Schema:
    cells = cells_schema(stage)
    return pa.schema(
        [cells.field(k) for k in group_columns(stage)]
        + [pa.field("cells", pa.int64())]
        + [cells.field(name) for name in GROUP_SUMS]
    )


def groups_to_json(groups: pa.Table) -> list[list[object]]:
    return [list(row.values()) for row in groups.to_pylist()]


def groups_from_json(stage: Stage, rows: Iterable[Sequence[object]]) -> pa.Table:
    schema = _groups_schema(stage)
    data = list(rows)
    if not data:
        return schema.empty_table()
    columns = list(zip(*data, strict=True))
    return pa.table(
        {f.name: pa.array(list(col), f.type) for f, col in zip(schema, columns, strict=True)}
    )
