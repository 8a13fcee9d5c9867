"""The response cache: every paid answer kept by its request content, answered again for free.

It lives outside any study by default (`default_cache_url()`: `$ITEMEVAL_CACHE_DIR`, else
`$XDG_CACHE_HOME/itemeval`, else `~/.cache/itemeval`; any fsspec URL, S3 included), so a wiped
study or a second study with the same calls pays nothing again. It is also the journal that makes
paid answers durable: workers write each answer here within about a second of its arrival, before
the shard's store fragment (`calls/_journal.py`).

```
<cache root>/calls/group=<group>/<fragment>.parquet                RESPONSE_SCHEMA (current)
<cache root>/responses/condition_id=<condition id>/<fragment>.parquet   read-only, older caches
```

**Keys are request content alone** (a contract): `key = sha256({request: request_hash, epoch})`,
where `request_hash` covers the model id as the endpoint knows it, the exact messages and the set
sampling params (`request_content`). No display name enters it (a model's `name`, a model-config
name, a prompt or rubric file name, a condition slug), so a rename never pays again; the epoch
does, so a replication never gets another replication's answer. The endpoint does not either
(see docs/decisions/0019-response-cache.md).

**Groups** only shard the key space so that a lookup reads one small index: a group is
`sha256({model, params, template content hash})`, the condition's payload without its names. A
lookup asks for the keys of one shard; misses are absent from the answer.

Caches written before keys were content-only (partitioned by condition id, keys that hashed the
condition id) are still read: for a condition that has such a partition, misses are looked up
there with the old keys (`legacy=`). Nothing is written in the old layout.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.ids import canonical_json, content_hash, sha256_hex, slugify
from itemeval.providers.types import ModelRequest
from itemeval.storage import Location, resolve
from itemeval.store._content_keys import hash_keys
from itemeval.store._dedup import best_row_indices
from itemeval.store._layout import Stage, partition_dir
from itemeval.store._schemas import RESPONSE_SCHEMA, TIMESTAMP, build_table, check_table
from itemeval.store.fragments import (
    FRAGMENT_ORDINAL,
    FragmentInfo,
    list_fragments,
    read_fragments,
    write_fragment,
)

#: The current layout: partitions by content group.
RESPONSES = Stage("calls", "group", ("key",), RESPONSE_SCHEMA)
#: Caches written before keys were content-only (read-only).
LEGACY_RESPONSES = Stage("responses", "condition_id", ("key",), RESPONSE_SCHEMA)
#: Where a study with `cache.enabled: false` keeps its own paid answers (under its store root):
#: durable, but never shared with other studies.
STUDY_CACHE_DIR = "response_cache"
#: What a lookup's index reads of a fragment.
_INDEX_COLUMNS = ["key", "written_at"]
_KEY = "_key"  # the key's 64 bits (`hash_keys`): every hit is confirmed on the whole key
_FRAGMENT = "_fragment_number"  # the fragment's number in `_Index.names`
_ROW = "_row"
_NAME = "_fragment_name"  # a fetched row's fragment (for the rule among several writers)


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

    `sim_hints` are not request content (real providers never see them). A reply schema
    (structured output) is, under `reply_schema`, only when set: a request without one hashes
    as it always did.
    """
    if isinstance(request, ModelRequest):
        content = {
            "model": request.model,
            "messages": [dict(m) for m in request.messages],
            "params": request.params.as_dict(),
        }
        if request.reply_schema is not None:
            content["reply_schema"] = request.reply_schema.as_dict()
        return content
    content = {
        "model": request["model"],
        "messages": [dict(m) for m in request["messages"]],
        "params": dict(request.get("params") or {}),
    }
    if request.get("reply_schema") is not None:
        content["reply_schema"] = dict(request["reply_schema"])
    return content


def request_hash(request: ModelRequest | Mapping[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON of `request_content(request)`."""
    return content_hash(request_content(request))


def request_hashes(requests: Sequence[ModelRequest]) -> list[str]:
    """`request_hash` of each request (a shard's, taken on the event loop once per call).

    The canonical JSON is written out around its parts (its keys sort as messages, model,
    params) and each distinct `params` object is encoded once, since a shard's requests share
    theirs: the same bytes as `request_hash`, which a test holds, at half the cost."""
    params_json: dict[int, str] = {}
    hashes = []
    for request in requests:
        if request.reply_schema is not None or not all(
            type(message) is dict for message in request.messages
        ):
            # `request_content` copies other mappings and adds the reply schema
            hashes.append(request_hash(request))
            continue
        params = params_json.get(id(request.params))
        if params is None:
            params = params_json[id(request.params)] = canonical_json(request.params.as_dict())
        messages = canonical_json(request.messages)  # a tuple is written as a list
        model = canonical_json(request.model)
        hashes.append(sha256_hex(f'{{"messages":{messages},"model":{model},"params":{params}}}'))
    return hashes


def cache_key(request_sha256: str, epoch: int) -> str:
    """The cache key of one call: its `request_hash` and its epoch, nothing else."""
    if request_sha256.isascii() and request_sha256.isalnum():
        # The canonical JSON of {"request": ..., "epoch": ...}, written out (a hex digest
        # needs no escaping): the same bytes, without the encoder, once per call.
        return sha256_hex(f'{{"epoch":{int(epoch)},"request":"{request_sha256}"}}')
    return content_hash({"request": request_sha256, "epoch": int(epoch)})


def cache_group(model: str, params: Mapping[str, Any], template_sha256: str) -> str:
    """The partition a condition's calls are cached under: readable model slug plus the hash of
    the content that shapes every request of the condition (never a display name)."""
    digest = content_hash({"model": model, "params": dict(params), "template": template_sha256})
    return f"{slugify(model)[:48]}--{digest[:16]}"


def legacy_cache_key(
    condition_id: str, request: ModelRequest | Mapping[str, Any], epoch: int
) -> str:
    """The key older caches used (it hashed the condition id, so renames missed)."""
    payload = {"condition_id": condition_id, "request": request_content(request), "epoch": epoch}
    return content_hash(payload)


@dataclass(frozen=True, slots=True)
class LegacyLookup:
    """Where misses are looked up in an older cache: the condition id and each request's old
    key (in the same order as the keys of the lookup)."""

    condition_id: str
    keys: Sequence[str]


@dataclass
class _Index:
    """What is known about one partition: its fragments and, per row, where each key is.

    An index holds every answer of the groups looked up (a run's worker: those cached before
    its run, `indexed_before`): 24 bytes a row (the key's 64 bits, `written_at`, the fragment's
    number and the row's), not the ~160 of the key's text and the fragment's name per row (a
    million-item run's workers grew by ~300 MB each with those)."""

    fragments: dict[str, FragmentInfo]
    names: list[str]  # fragment names by number (a gone fragment keeps its number)
    table: pa.Table  # _key, written_at, _fragment, _row

    def number(self, name: str) -> int:
        self.names.append(name)
        return len(self.names) - 1


_INDEX_SCHEMA = pa.schema(
    [
        pa.field(_KEY, pa.uint64()),
        RESPONSE_SCHEMA.field("written_at"),
        pa.field(_FRAGMENT, pa.int32()),
        pa.field(_ROW, pa.int32()),
    ]
)


class ResponseCache:
    """A content-keyed cache of model responses at any fsspec URL (see the module doc)."""

    def __init__(
        self,
        root: Location,
        *,
        refresh_interval_s: float = 0.0,
        indexed_before: str | None = None,
    ):
        """`refresh_interval_s`: how old a partition's index may be before a lookup lists the
        partition again (0: every lookup). A long-running worker uses about a minute, and a
        lookup can ask for a fresh listing (`fresh=True`, e.g. for a shard dispatched again
        after a failure elsewhere). Without `indexed_before`, what this process writes is
        added to its index as it is written.

        `indexed_before` (a sortable id: a run's): a lookup that is not fresh sees only the
        fragments named before it, and what this process writes is not added to its index.
        A run's worker then holds the answers that were cached before its run, whatever the
        run's size (its own answers, 24 bytes each, grew every worker by the run's answers);
        a fresh lookup (a shard dispatched again, or repeating an earlier request) lists and
        reads everything, as before."""
        self.root = root
        self.refresh_interval_s = refresh_interval_s
        self.indexed_before = indexed_before
        self._indexes: dict[str, _Index] = {}
        self._refreshed_at: dict[str, float] = {}
        self._legacy_present: dict[str, bool] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        url: str | os.PathLike[str] | None = None,
        storage_options: dict[str, Any] | None = None,
        *,
        refresh_interval_s: float = 0.0,
        indexed_before: str | None = None,
    ) -> ResponseCache:
        location = resolve(url if url is not None else default_cache_url(), storage_options)
        return cls(location, refresh_interval_s=refresh_interval_s, indexed_before=indexed_before)

    def __repr__(self) -> str:
        return f"ResponseCache({self.root.url!r})"

    def partition(self, group: str) -> Location:
        return self.root.join(RESPONSES.name, partition_dir(RESPONSES, group))

    def legacy_partition(self, condition_id: str) -> Location:
        return self.root.join(LEGACY_RESPONSES.name, partition_dir(LEGACY_RESPONSES, condition_id))

    # -- writing -------------------------------------------------------------------------
    def put(self, group: str, rows: pa.Table | Iterable[Mapping[str, Any]]) -> str | None:
        """Store responses of one group as one new fragment; returns its name."""
        partition = self.partition(group)
        if isinstance(rows, pa.Table):
            table = check_table(rows, RESPONSE_SCHEMA, what=partition.url)
        else:
            table = build_table(RESPONSE_SCHEMA, rows)
        if table.num_rows == 0:
            return None
        name = write_fragment(partition, table)
        if self.indexed_before is not None:
            return name  # found by a fresh listing, when one is asked for
        with self._lock:
            index = self._indexes.get(partition.url)
            if index is not None:
                index.fragments[name] = FragmentInfo(name, partition.join(name).path, None)
                rows = _index_rows(index.number(name), table)
                index.table = _joined([index.table, rows])
        return name

    # -- reading -------------------------------------------------------------------------
    def lookup(
        self,
        group: str,
        keys: pa.Array | pa.ChunkedArray | Sequence[str],
        *,
        since: datetime | None = None,
        fresh: bool = False,
        legacy: LegacyLookup | None = None,
    ) -> pa.Table:
        """The cached responses for `keys` (one row per key found, its `key` column the key
        asked for; misses are absent).

        `since`: only responses cached at or after that moment (a `--force` run reuses only
        what it paid itself). `fresh`: list the partition now whatever the refresh interval.
        `legacy`: where to look for misses in an older cache (see the module doc).
        """
        key_array = _as_keys(keys)
        hits = self._lookup(self.partition(group), key_array, since, fresh)
        if legacy is None or hits.num_rows == len(key_array):
            return hits
        old_partition = self.legacy_partition(legacy.condition_id)
        if not self._legacy_exists(old_partition):
            return hits
        found = set(hits.column("key").to_pylist())
        missing = [i for i, key in enumerate(key_array.to_pylist()) if key not in found]
        old_keys = pa.array([legacy.keys[i] for i in missing], pa.string())
        old_hits = self._lookup(old_partition, old_keys, since, fresh)
        if old_hits.num_rows == 0:
            return hits
        # Answer with the new keys, so callers see one key space.
        new_for_old = dict(zip(old_keys.to_pylist(), (key_array[i] for i in missing), strict=True))
        renamed = pa.array(
            [new_for_old[k].as_py() for k in old_hits.column("key").to_pylist()], pa.string()
        )
        old_hits = old_hits.set_column(0, RESPONSE_SCHEMA.field("key"), renamed)
        return pa.concat_tables([hits, old_hits])

    def _lookup(
        self, partition: Location, keys: pa.Array, since: datetime | None, fresh: bool
    ) -> pa.Table:
        if fresh:
            index = self._refresh(partition, everything=True)
        else:
            index = self._current_index(partition)
        asked = pa.array(hash_keys(keys), pa.uint64())
        hits = index.filter(pc.is_in(index.column(_KEY), value_set=asked))
        if since is not None and hits.num_rows:
            hits = hits.filter(pc.greater_equal(hits.column("written_at"), _timestamp(since)))
        if hits.num_rows == 0:
            return RESPONSE_SCHEMA.empty_table()
        # A key cached several times (writers racing, an item repeated) has several rows: the
        # best row of each 64-bit key is fetched, then confirmed on the whole key.
        numbers = pc.unique(hits.column(_FRAGMENT).combine_chunks())
        with self._lock:  # the names of the hits' fragments only (a journal adds one a flush)
            all_names = self._indexes[partition.url].names
            names = pa.array([all_names[n] for n in numbers.to_pylist()], pa.string())
        at = pc.index_in(hits.column(_FRAGMENT), value_set=numbers)
        hits = hits.append_column(_NAME, names.take(at))
        rows = self._confirmed(partition, _best(hits, _KEY), keys)
        found = set(rows.column("key").to_pylist())
        # Two keys that share their first 64 bits (about 1 in 10**7 per run of a million
        # answers): the best row of the shared bits may be the other key's. Fetch every row
        # of those bits, so such a key is answered exactly, never missed.
        shared = [key for key in keys.to_pylist() if key not in found]
        if shared and rows.num_rows < hits.num_rows:
            unsure = pa.array(hash_keys(pa.array(shared, pa.string())), pa.uint64())
            more = hits.filter(pc.is_in(hits.column(_KEY), value_set=unsure))
            if more.num_rows:
                rows = pa.concat_tables([rows, self._confirmed(partition, more, keys)])
        if rows.num_rows == 0:
            return RESPONSE_SCHEMA.empty_table()
        return _best(rows, "key").select(RESPONSE_SCHEMA.names)

    def _confirmed(self, partition: Location, hits: pa.Table, keys: pa.Array) -> pa.Table:
        """The rows `hits` point at whose whole key is one of `keys` (with `_NAME`)."""
        rows = self._fetch(partition, hits)
        return rows.filter(pc.is_in(rows.column("key"), value_set=keys))

    def has_legacy(self, condition_id: str) -> bool:
        """Whether an older cache holds answers of `condition_id` (listed once per process)."""
        return self._legacy_exists(self.legacy_partition(condition_id))

    def _legacy_exists(self, partition: Location) -> bool:
        with self._lock:
            known = self._legacy_present.get(partition.url)
        if known is None:
            known = bool(list_fragments(partition))
            with self._lock:
                self._legacy_present[partition.url] = known
        return known

    def _fetch(self, partition: Location, hits: pa.Table) -> pa.Table:
        """The rows `hits` point at, with their fragment's name (`_NAME`)."""
        numbers = sorted(set(hits.column(_FRAGMENT).to_pylist()))
        with self._lock:
            index = self._indexes[partition.url]
            named = [(n, index.names[n]) for n in numbers]
            infos = [(n, index.fragments[name]) for n, name in named if name in index.fragments]
        tables = read_fragments(partition, [info for _, info in infos], RESPONSE_SCHEMA)
        parts = []
        for (number, info), table in zip(infos, tables, strict=True):
            if table is None:  # deleted by hand since it was listed: those are misses now
                continue
            mine = hits.filter(pc.equal(hits.column(_FRAGMENT), number))
            part = table.take(mine.column(_ROW))
            parts.append(part.append_column(_NAME, pa.repeat(info.name, part.num_rows)))
        if not parts:
            return RESPONSE_SCHEMA.append(pa.field(_NAME, pa.string())).empty_table()
        return pa.concat_tables(parts)

    def _current_index(self, partition: Location) -> pa.Table:
        now = time.monotonic()
        with self._lock:
            age = now - self._refreshed_at.get(partition.url, -math.inf)
            if age < self.refresh_interval_s:
                return self._indexes[partition.url].table
        return self._refresh(partition)

    def _refresh(self, partition: Location, *, everything: bool = False) -> pa.Table:
        """Bring the partition's index up to date (reads only fragments not seen before; with
        `indexed_before`, only those named before it unless `everything`)."""
        started = time.monotonic()
        listed = list_fragments(partition)
        before = None if everything else self.indexed_before
        with self._lock:
            index = self._indexes.setdefault(
                partition.url, _Index({}, [], _INDEX_SCHEMA.empty_table())
            )
            new = [
                info
                for info in listed
                if info.name not in index.fragments and (before is None or info.name < before)
            ]
            present = {info.name for info in listed}
            gone = [name for name in index.fragments if name not in present]
        tables = read_fragments(partition, new, RESPONSE_SCHEMA, _INDEX_COLUMNS) if new else []
        with self._lock:
            parts = [index.table]
            if gone:
                gone_names = set(gone)
                numbers = pa.array(
                    [n for n, name in enumerate(index.names) if name in gone_names], pa.int32()
                )
                keep = pc.invert(pc.is_in(index.table[_FRAGMENT], value_set=numbers))
                parts = [index.table.filter(keep)]
                for name in gone:
                    index.fragments.pop(name, None)
            for info, table in zip(new, tables, strict=True):
                if table is None or info.name in index.fragments:
                    continue
                index.fragments[info.name] = info
                parts.append(_index_rows(index.number(info.name), table))
            index.table = _joined(parts)
            self._refreshed_at[partition.url] = started
            return index.table


def _best(rows: pa.Table, key: str) -> pa.Table:
    """The best row of each `key`: the latest `written_at`, then the later fragment by name
    (`_NAME`), as the store's rule chooses among several writers."""
    ordinal = pc.rank(rows.column(_NAME), sort_keys="ascending", tiebreaker="dense")
    ranked = rows.append_column(FRAGMENT_ORDINAL, ordinal)
    return rows.take(best_row_indices(ranked, [key]))


def _as_keys(keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        return keys.combine_chunks()
    if isinstance(keys, pa.Array):
        return keys
    return pa.array(list(keys), type=pa.string())


def _timestamp(moment: datetime) -> pa.Scalar:
    return pa.scalar(moment, TIMESTAMP)


#: An index is made one piece again when it has this many (a journal adds one per flush, and a
#: lookup's membership test pays per piece).
_INDEX_PIECES = 512


def _joined(parts: list[pa.Table]) -> pa.Table:
    table = pa.concat_tables(parts)
    return table.combine_chunks() if table.column(0).num_chunks > _INDEX_PIECES else table


def _index_rows(number: int, table: pa.Table) -> pa.Table:
    n = table.num_rows
    return pa.table(
        [
            pa.array(hash_keys(table.column("key")), pa.uint64()),
            table.column("written_at"),
            pa.array(np.full(n, number, dtype=np.int32)),
            pa.array(np.arange(n, dtype=np.int32)),
        ],
        schema=_INDEX_SCHEMA,
    )
