"""The response cache: identical calls answered again for free, across runs and studies.

It lives outside any study by default (`default_cache_url()`: `$ITEMEVAL_CACHE_DIR`, else
`$XDG_CACHE_HOME/itemeval`, else `~/.cache/itemeval`; any fsspec URL, S3 included), so a wiped
study or a second study with the same condition pays nothing again.

```
<cache root>/responses/condition_id=<cid>/<fragment>.parquet     RESPONSE_SCHEMA
```

The key is `sha256(canonical JSON {condition_id, request, epoch})` where `request` is the exact
request content (model, messages, set sampling params). The epoch is part of the key, so a
replication is never answered with another replication's response. Only successful responses
are cached. Lookups are per shard: one listing of new fragments, one vectorised `is_in` over an
in-memory index of the condition's keys, one parallel read of the fragments that hold hits.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.ids import content_hash
from itemeval.providers.types import ModelRequest
from itemeval.storage import Location, resolve
from itemeval.store.dedup import best_row_indices
from itemeval.store.fragments import (
    FRAGMENT_ORDINAL,
    FragmentInfo,
    list_fragments,
    read_fragments,
    write_fragment,
)
from itemeval.store.layout import Stage, partition_dir
from itemeval.store.schemas import (
    RESPONSE_SCHEMA,
    SOLUTION_SCHEMA,
    STATUS_OK,
    TIMESTAMP,
    build_table,
    check_table,
    text_hashes,
)

RESPONSES = Stage("responses", "condition_id", ("key",), RESPONSE_SCHEMA)
_INDEX_COLUMNS = ["key", "item_id", "epoch", "written_at"]
_FRAGMENT_NAME = "_fragment_name"
_ROW = "_row"


def default_cache_url() -> str:
    """Where the response cache lives unless a study or the command line says otherwise."""
    explicit = os.environ.get("ITEMEVAL_CACHE_DIR")
    if explicit:
        return explicit
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return str(base / "itemeval")


def request_content(request: ModelRequest | Mapping[str, Any]) -> dict[str, Any]:
    """The exact content of a call that the cache key and `request_hash` cover.

    `sim_hints` are not request content (real providers never see them).
    """
    if isinstance(request, ModelRequest):
        return {
            "model": request.model,
            "messages": [dict(m) for m in request.messages],
            "params": request.params.as_dict(),
        }
    return {
        "model": request["model"],
        "messages": [dict(m) for m in request["messages"]],
        "params": dict(request.get("params") or {}),
    }


def request_hash(request: ModelRequest | Mapping[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON of `request_content(request)`."""
    return content_hash(request_content(request))


def cache_key(condition_id: str, request: ModelRequest | Mapping[str, Any], epoch: int) -> str:
    """The cache key of one call: condition id, exact request content and epoch."""
    payload = {"condition_id": condition_id, "request": request_content(request), "epoch": epoch}
    return content_hash(payload)


@dataclass
class _Index:
    """What is known about one condition's cache partition: its fragments and their keys."""

    fragments: dict[str, FragmentInfo]
    table: pa.Table  # key, item_id, epoch, written_at, _fragment_name, _row


def _empty_index_table() -> pa.Table:
    fields = [RESPONSE_SCHEMA.field(c) for c in _INDEX_COLUMNS]
    fields += [pa.field(_FRAGMENT_NAME, pa.string()), pa.field(_ROW, pa.int64())]
    return pa.schema(fields).empty_table()


class ResponseCache:
    """A content-keyed cache of model responses at any fsspec URL (see the module doc)."""

    def __init__(self, root: Location, *, refresh_interval_s: float = 0.0):
        """`refresh_interval_s`: how old a condition's index may be before a lookup lists the
        partition again (0: every lookup). A long-running worker uses about a minute: fragments
        written meanwhile by the same run never answer its own pending cells, and another
        study's new fragments are seen within the interval."""
        self.root = root
        self.refresh_interval_s = refresh_interval_s
        self._indexes: dict[str, _Index] = {}
        self._refreshed_at: dict[str, float] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        url: str | os.PathLike[str] | None = None,
        storage_options: dict[str, Any] | None = None,
        *,
        refresh_interval_s: float = 0.0,
    ) -> ResponseCache:
        location = resolve(url if url is not None else default_cache_url(), storage_options)
        return cls(location, refresh_interval_s=refresh_interval_s)

    def __repr__(self) -> str:
        return f"ResponseCache({self.root.url!r})"

    def partition(self, condition_id: str) -> Location:
        return self.root.join(RESPONSES.name, partition_dir(RESPONSES, condition_id))

    # -- writing -------------------------------------------------------------------------
    def put(self, condition_id: str, rows: pa.Table | Iterable[Mapping[str, Any]]) -> str | None:
        """Store responses of one condition as one new fragment; returns its name."""
        partition = self.partition(condition_id)
        if isinstance(rows, pa.Table):
            table = check_table(rows, RESPONSE_SCHEMA, what=partition.url)
        else:
            table = build_table(RESPONSE_SCHEMA, rows)
        if table.num_rows == 0:
            return None
        name = write_fragment(partition, table)
        with self._lock:
            index = self._indexes.get(condition_id)
            if index is not None:
                info = FragmentInfo(name, partition.join(name).path, None)
                index.fragments[name] = info
                index.table = pa.concat_tables([index.table, _index_rows(name, table)])
        return name

    # -- reading -------------------------------------------------------------------------
    def refresh(self, condition_id: str) -> pa.Table:
        """Bring the condition's index up to date (reads only fragments not seen before)."""
        partition = self.partition(condition_id)
        listed = list_fragments(partition)
        with self._lock:
            index = self._indexes.setdefault(condition_id, _Index({}, _empty_index_table()))
            new = [info for info in listed if info.name not in index.fragments]
            present = {info.name for info in listed}
            gone = [name for name in index.fragments if name not in present]
        tables = read_fragments(partition, new, RESPONSE_SCHEMA, _INDEX_COLUMNS) if new else []
        with self._lock:
            parts = [index.table]
            if gone:
                keep = pc.invert(pc.is_in(index.table[_FRAGMENT_NAME], value_set=pa.array(gone)))
                parts = [index.table.filter(keep)]
                for name in gone:
                    index.fragments.pop(name, None)
            for info, table in zip(new, tables, strict=True):
                if table is None or info.name in index.fragments:
                    continue
                index.fragments[info.name] = info
                parts.append(_index_rows(info.name, table))
            index.table = pa.concat_tables(parts)
            return index.table

    def lookup(
        self, condition_id: str, keys: pa.Array | pa.ChunkedArray | Sequence[str]
    ) -> pa.Table:
        """The cached responses for `keys` (one row per key found; misses are absent)."""
        key_array = _as_keys(keys)
        index = self._current_index(condition_id)
        hits = index.filter(pc.is_in(index.column("key"), value_set=key_array))
        if hits.num_rows == 0:
            return RESPONSE_SCHEMA.empty_table()
        # Several writers may have cached the same key: take the latest, deterministically.
        names = hits.column(_FRAGMENT_NAME)
        ordinal = pc.rank(names, sort_keys="ascending", tiebreaker="dense")
        hits = hits.append_column(FRAGMENT_ORDINAL, ordinal)
        hits = hits.take(best_row_indices(hits, ["key"]))
        return self._fetch(condition_id, hits)

    def _fetch(self, condition_id: str, hits: pa.Table) -> pa.Table:
        partition = self.partition(condition_id)
        with self._lock:
            fragments = self._indexes[condition_id].fragments
            wanted = sorted(set(hits.column(_FRAGMENT_NAME).to_pylist()))
            infos = [fragments[name] for name in wanted if name in fragments]
        tables = read_fragments(partition, infos, RESPONSE_SCHEMA)
        parts = []
        for info, table in zip(infos, tables, strict=True):
            if table is None:  # deleted by hand since it was listed: those are misses now
                continue
            mine = hits.filter(pc.equal(hits.column(_FRAGMENT_NAME), info.name))
            parts.append(table.take(mine.column(_ROW)))
        if not parts:
            return RESPONSE_SCHEMA.empty_table()
        return pa.concat_tables(parts)

    def _current_index(self, condition_id: str) -> pa.Table:
        now = time.monotonic()
        with self._lock:
            fresh = now - self._refreshed_at.get(condition_id, -math.inf) < self.refresh_interval_s
            if fresh:
                return self._indexes[condition_id].table
        table = self.refresh(condition_id)
        with self._lock:
            self._refreshed_at[condition_id] = now
        return table

    def candidates(self, condition_id: str, cells: pa.Table) -> pa.Table:
        """The `cells` (`item_id`, `epoch`) with some cached response under the condition:
        a cheap upper bound of the hits, for cost estimates (the exact request may differ)."""
        index = self.refresh(condition_id)
        cached = index.select(["item_id", "epoch"])
        wanted = cells.select(["item_id", "epoch"])
        if cached.num_rows == 0 or wanted.num_rows == 0:
            return wanted.slice(0, 0)
        if wanted.schema.field("epoch").type != pa.int32():
            wanted = wanted.set_column(1, "epoch", wanted.column("epoch").cast(pa.int32()))
        return wanted.join(cached, keys=["item_id", "epoch"], join_type="left semi")


def _as_keys(keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        return keys.combine_chunks()
    if isinstance(keys, pa.Array):
        return keys
    return pa.array(list(keys), type=pa.string())


def _index_rows(name: str, table: pa.Table) -> pa.Table:
    rows = table.select(_INDEX_COLUMNS)
    rows = rows.append_column(_FRAGMENT_NAME, pa.repeat(name, rows.num_rows))
    return rows.append_column(_ROW, pa.array(np.arange(rows.num_rows, dtype=np.int64)))


def solutions_from_cache(
    responses: pa.Table, *, run_id: str, written_at: datetime | None = None
) -> pa.Table:
    """Solution rows (`SOLUTION_SCHEMA`) for cache hits: `usd = 0`, `cached = true`,
    `attempts = 0`; text, tokens and latency are those of the original call."""
    n = responses.num_rows
    when = written_at or datetime.now(UTC)
    columns = {
        "item_id": responses.column("item_id"),
        "epoch": responses.column("epoch"),
        "status": pa.repeat(STATUS_OK, n),
        "error_code": pa.nulls(n, pa.string()),
        "error_message": pa.nulls(n, pa.string()),
        "text": responses.column("text"),
        "text_hash": text_hashes(responses.column("text")),
        "finish_reason": responses.column("finish_reason"),
        "input_tokens": responses.column("input_tokens"),
        "output_tokens": responses.column("output_tokens"),
        "cached_input_tokens": responses.column("cached_input_tokens"),
        "reasoning_tokens": responses.column("reasoning_tokens"),
        "usd": pa.repeat(pa.scalar(0.0), n),
        "latency_ms": responses.column("latency_ms"),
        "request_id": responses.column("request_id"),
        "attempts": pa.repeat(pa.scalar(0, pa.int32()), n),
        "cached": pa.repeat(True, n),
        "request_hash": responses.column("request_hash"),
        "model": responses.column("model"),
        "run_id": pa.repeat(run_id, n),
        "written_at": pa.repeat(pa.scalar(when, TIMESTAMP), n),
    }
    return check_table(pa.table(columns), SOLUTION_SCHEMA, what="cache hits")


def responses_from_solutions(
    solutions: pa.Table, keys: pa.Array | pa.ChunkedArray | Sequence[str]
) -> pa.Table:
    """Cache rows (`RESPONSE_SCHEMA`) for the `ok`, not-cached rows of `solutions`; `keys[i]`
    is the cache key of `solutions` row i."""
    table = solutions.append_column("key", _as_keys(keys))
    fresh = pc.and_(pc.equal(table.column("status"), STATUS_OK), pc.invert(table.column("cached")))
    table = table.filter(fresh)
    now = pa.repeat(pa.scalar(datetime.now(UTC), TIMESTAMP), table.num_rows)
    table = table.set_column(table.schema.get_field_index("written_at"), "written_at", now)
    return check_table(table.select(RESPONSE_SCHEMA.names), RESPONSE_SCHEMA, what="responses")
