"""Full columns of chosen logical rows, fetched by (fragment, position): the texts a page shows.

A local store is read through DuckDB: one query per partition, `read_parquet` over the
fragments that hold the rows with `file_row_number`, filtered to the wanted positions. DuckDB
decodes only the vectors that hold them, which matters for compacted fragments (one file a
partition, row groups of up to 131,072 rows): on 100,000-row files, 4-20 ms a row against
55-990 ms for pyarrow, which decodes the whole column chunk (`docs/decisions/0034-viewer.md`).
A remote store (S3) is read through pyarrow (`results.RowFetcher`): DuckDB would need
its `httpfs` extension, which it fetches from the internet, and the store's credentials.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.results import PartitionRows, RowFetcher
from itemeval.store import Stage
from itemeval.view._index import Where

if TYPE_CHECKING:
    import duckdb  # imported when a page first fetches rows

#: DuckDB settings of the viewer's reads: small, and nothing fetched from the internet (no
#: extension is installed or loaded).
_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "threads": 2,
    "memory_limit": "64MB",
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}


_lock = threading.Lock()
_shared: list[duckdb.DuckDBPyConnection] = []


def _cursor() -> duckdb.DuckDBPyConnection:
    """A cursor of the process's DuckDB connection (made once, closed at exit): a cursor per
    fetch, since pages render on several worker threads."""
    with _lock:
        if not _shared:
            import duckdb

            con = duckdb.connect(config=_CONFIG)
            atexit.register(con.close)
            _shared.append(con)
        return _shared[0].cursor()


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


Part = tuple[Where, np.ndarray, np.ndarray]  # a partition, and the (frag, pos) of rows in it


def fetch_rows(stage: Stage, columns: Sequence[str], parts: Sequence[Part]) -> list[pa.Table]:
    """For each part `(where, frag, pos)`: the rows at (`frag[i]`, `pos[i]`) of the partition
    `where`, in that order, with `columns`. Local parts are read in one DuckDB query."""
    out: list[pa.Table | None] = [None] * len(parts)
    local: list[tuple[int, list[str]]] = []  # part index, path of each wanted row
    for k, (where, frag, pos) in enumerate(parts):
        if len(frag) == 0:
            out[k] = pa.schema([stage.schema.field(c) for c in columns]).empty_table()
        elif where.location.is_local:
            names = where.fragments
            local.append((k, [where.location.join(names[int(f)]).path for f in frag]))
        else:
            rows = PartitionRows(
                stage, where.condition_id, where.location, where.fragments, pa.table({})
            )
            out[k] = RowFetcher(rows, columns).take(frag, pos)
    if local:
        paths = sorted({p for _, row_paths in local for p in row_paths})
        positions = sorted({int(p) for k, _ in local for p in parts[k][2]})
        found = _query(paths, positions, columns)
        have = pc.binary_join_element_wise(
            found.column("filename"), pc.cast(found.column("file_row_number"), pa.string()), "\x00"
        )
        for k, row_paths in local:
            wanted = pa.array(
                [f"{p}\x00{int(n)}" for p, n in zip(row_paths, parts[k][2], strict=True)]
            )
            index = pc.index_in(wanted, value_set=have)
            if index.null_count:
                raise LookupError(f"rows not found in {parts[k][0].location.url}")
            table = found.take(index).select(list(columns))
            if "tier" in columns:  # fragments written before `tier` existed hold live rows
                tier = pc.fill_null(table.column("tier"), "live")
                table = table.set_column(table.schema.get_field_index("tier"), "tier", tier)
            out[k] = table
    return [t for t in out if t is not None]


def _query(paths: list[str], positions: list[int], columns: Sequence[str]) -> pa.Table:
    """Every row at one of `positions` in any of the files `paths` (a superset of the pairs
    asked for: the caller keeps those)."""
    projected = ", ".join(f'"{c}"' for c in columns)
    sql = (
        f"SELECT filename, file_row_number, {projected} FROM read_parquet("
        f"[{', '.join(map(_quoted, paths))}], filename = true, file_row_number = true, "
        f"union_by_name = true) WHERE file_row_number IN ({', '.join(map(str, positions))})"
    )
    cursor = _cursor()
    try:
        relation = cursor.sql(sql)
        # duckdb 1.4 named it `to_arrow_table`; earlier versions `arrow`
        return (getattr(relation, "to_arrow_table", None) or relation.arrow)()
    finally:
        cursor.close()
