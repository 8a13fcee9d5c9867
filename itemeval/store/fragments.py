"""Fragments: the immutable parquet files inside one partition directory.

A fragment is written once under a unique, time-sortable name (`storage.unique_name`) and is
wholly visible or absent (`Location.write_atomic`: write + rename locally, one PUT on S3).
Names starting with `.` or `_` are not fragments (a killed writer's `.tmp-*.part` file, markers);
any other file that is not a `*.parquet` fragment of the expected schema is a `StoreError`
naming it.

Reading is done for many partitions at once, in parallel: local files through pyarrow's own
reader, remote files fetched whole in one batched GET when small (`fs.cat`) or read by ranges
when large, so that projecting a few columns of a big compacted file stays cheap. Compaction may
delete a fragment between listing and reading; the reader then lists the partition again and
reads what is new (the compacted file holds the vanished rows).
"""

from __future__ import annotations

import io
import itertools
import os
import posixpath
from collections import deque
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from itemeval.errors import Problem, StoreError
from itemeval.storage import Location, unique_name
from itemeval.store._schemas import conform_older, fill_columns

FRAGMENT_SUFFIX = ".parquet"
#: Rows per parquet row group: large enough for fast scans, small enough to stream.
ROW_GROUP_ROWS = 128 * 1024
#: Remote fragments up to this size are fetched whole (one GET) rather than by ranges.
WHOLE_FETCH_BYTES = 8 * 1024 * 1024
#: Column the readers add: the fragment's position in name (= write) order within its partition.
FRAGMENT_ORDINAL = "_fragment"
#: Column the readers add on request: the fragment's file name (dictionary-encoded).
FRAGMENT_NAME = "_fragment_name"
#: A partition's compaction marker: rewritten by each compaction before it deletes fragments.
COMPACTION_MARKER = "_compaction"
_MAX_PASSES = 32  # read passes per call before a read gives up (see read_partitions)
_THREADS = 8  # readers of a remote store: each mostly waits on the network (local: see below)
_FETCH_CHUNK = 256  # remote fragments fetched per batched GET
#: Rows per table of `scan_partition`'s stream.
SCAN_BATCH_ROWS = 1 << 14

#: What `read_partitions` applies to each fragment as it is read, and `scan_partition` to each
#: batch (see there).
FragmentReducer = Callable[[pa.Table], pa.Table]
#: Whether a fragment can be left unread, judged from its footer (its row groups' statistics).
FooterFilter = Callable[[pq.FileMetaData], bool]


@dataclass(frozen=True, slots=True)
class FragmentInfo:
    """A listed fragment: its file name, filesystem path and size in bytes (when known)."""

    name: str
    path: str
    size: int | None


def encode_fragment(table: pa.Table) -> bytes:
    """Parquet bytes of `table` (zstd, plain encoding, row groups of `ROW_GROUP_ROWS`).

    No dictionary pages: zstd finds the repeats a dictionary would, and on our tables the files
    came out smaller (a run's 512-row fragments and a 20,000-row partition), quicker to write
    and quicker to read (docs/performance.md, "Fragments without dictionary pages")."""
    sink = io.BytesIO()
    pq.write_table(
        table,
        sink,
        compression="zstd",
        use_dictionary=False,
        row_group_size=ROW_GROUP_ROWS,
        write_statistics=True,
    )
    return sink.getvalue()


def write_fragment(partition: Location, table: pa.Table) -> str:
    """Write `table` as a new fragment of `partition`; returns the fragment's name.

    The table must already conform (see `schemas.check_table`).
    """
    name = unique_name(suffix=FRAGMENT_SUFFIX)
    partition.join(name).write_atomic(encode_fragment(table))
    return name


def list_fragments(partition: Location) -> list[FragmentInfo]:
    """The fragments of `partition` in name (= write) order; [] when the partition is absent."""
    fs = partition.fs
    fs.invalidate_cache(partition.path)
    try:
        entries = fs.ls(partition.path, detail=True)
    except FileNotFoundError:
        return []
    fragments: list[FragmentInfo] = []
    prefix = partition.path.rstrip("/") + "/"
    for entry in entries:
        path = str(entry["name"]).rstrip("/")
        if path == partition.path.rstrip("/"):
            continue
        name = posixpath.basename(path)
        if name.startswith((".", "_")):
            continue
        if entry.get("type") != "file" or not name.endswith(FRAGMENT_SUFFIX):
            raise StoreError(
                Problem(
                    "a file that is not a store fragment sits in a partition",
                    file=_url(partition, name),
                    hint="move it out of the store; partitions hold only *.parquet fragments",
                )
            )
        if not path.startswith(prefix):
            path = prefix + name
        size = entry.get("size")
        fragments.append(FragmentInfo(name, path, int(size) if size is not None else None))
    fragments.sort(key=lambda f: f.name)
    return fragments


def compaction_generation(partition: Location) -> str | None:
    """The partition's compaction marker (None before its first compaction)."""
    try:
        return partition.join(COMPACTION_MARKER).read_bytes().decode("ascii", "replace")
    except FileNotFoundError:
        return None


def mark_compaction(partition: Location) -> None:
    """Record that a compaction is about to delete fragments (see `read_partitions`)."""
    partition.join(COMPACTION_MARKER).write_atomic(unique_name().encode("ascii"))


def read_partitions(
    partitions: Mapping[str, Location],
    schema: pa.Schema,
    columns: Sequence[str] | None = None,
    *,
    fragment_names: bool = False,
    reduce: FragmentReducer | None = None,
    on_read: Callable[[str, pa.Table], None] | None = None,
    skip_if: FooterFilter | None = None,
) -> dict[str, pa.Table]:
    """Every row of every fragment of each partition, `columns` only, plus `FRAGMENT_ORDINAL`
    (and `FRAGMENT_NAME` with `fragment_names`: where each row lives, for readers that come
    back for a few rows of one fragment).

    `reduce`, when given, is applied to each fragment's table as soon as it is read (rows
    filtered, columns dropped or made compact), so a reader that needs a little of each row of
    a large partition never holds the whole of it: it must return the same schema for every
    fragment, including an empty one.

    Keys of the result are the keys of `partitions`. A partition without fragments gives an
    empty table. Raises `StoreError` naming the file for a corrupt or foreign fragment.

    Consistent beside compaction. A fragment listed but gone when read was compacted: the
    partition is listed again and the new files read. And because a directory listing is not a
    snapshot, a listing taken while a compaction deletes what it merged can miss both its new
    file and a deleted one; compaction therefore rewrites the partition's marker after writing
    its new file and before deleting anything, and a partition whose marker changed during a
    pass gets another pass. A pass during which the marker did not change is complete: any
    compaction deleting during it wrote its new file before the pass listed, so it is listed.
    Passes after the first read only files they have not read.

    `on_read(fragment name, table)` sees each fragment's table as read, before `reduce`, with
    the file's metadata in its schema (what a compaction noted there). `skip_if(footer)`: a
    fragment it says true of is read as no rows (only its footer is read).
    """
    names = _checked_columns(schema, columns)
    read: dict[str, dict[str, pa.Table]] = {key: {} for key in partitions}

    def listed(key: str, still: set[str]) -> None:
        # A fragment that is no longer listed was compacted: its rows are in a newer file.
        read[key] = {n: t for n, t in read[key].items() if n in still}

    for key, name, table in _consistent_reads(
        partitions, schema, names, reduce, listed, on_read=on_read, skip_if=skip_if
    ):
        read[key][name] = table
    empty = pa.schema([schema.field(c) for c in names]).empty_table()
    if reduce is not None:
        empty = reduce(empty)
    return {key: _assemble(read[key], empty, fragment_names) for key in partitions}


def scan_partition(
    partition: Location,
    schema: pa.Schema,
    columns: Sequence[str] | None = None,
    *,
    reduce: FragmentReducer | None = None,
    batch_rows: int | None = None,
    fragment_names: list[str] | None = None,
    skip: Container[str] = (),
) -> Iterator[pa.Table]:
    """The rows of one partition as a stream of tables of about `batch_rows` rows (default
    `SCAN_BATCH_ROWS`; more when one fragment holds more), fragments in name (= write) order,
    each batch `reduce`d once (so `reduce` must work row by row: filter, project, convert).
    With `fragment_names`, each fragment's name is appended to that list as it is read and its
    rows get a last column `FRAGMENT_ORDINAL`: the name's index in the list. Fragments named
    in `skip` are not read (a fragment is never rewritten, so a caller that saw what one holds
    may leave it out of a later scan). Memory stays bounded by a batch, whatever the
    partition's size.

    Unlike `read_partitions`, a stream cannot take back rows it gave: a fragment compacted
    while the partition is scanned may have its rows given twice (from the fragment, then from
    the compacted file that holds them). Consumers fold rows in a way a repeated row does not
    change (best row of a key, set of keys present)."""
    names = _checked_columns(schema, columns)
    batch_rows = batch_rows or SCAN_BATCH_ROWS
    batch: list[pa.Table] = []
    rows = 0

    def reduced(tables: list[pa.Table]) -> pa.Table:
        # One reduce per batch, not per fragment: each of arrow's compute calls costs tens of
        # microseconds whatever its size, and a run writes fragments of a few hundred rows.
        table = pa.concat_tables(tables)
        return table if reduce is None else reduce(table)

    for _, name, table in _consistent_reads({"": partition}, schema, names, None, skip=skip):
        if fragment_names is not None:
            ordinal = pa.repeat(pa.scalar(len(fragment_names), pa.int32()), table.num_rows)
            table = table.append_column(FRAGMENT_ORDINAL, ordinal)
            fragment_names.append(name)
        batch.append(table)
        rows += table.num_rows
        if rows >= batch_rows:
            yield reduced(batch)
            batch, rows = [], 0
            # Arrow's allocator keeps the pages a consumer freed; give them back after each
            # batch, so that a stream's peak is a batch's and not the sum of them.
            pa.default_memory_pool().release_unused()
    if batch:
        yield reduced(batch)


def _checked_columns(schema: pa.Schema, columns: Sequence[str] | None) -> list[str]:
    names = list(columns) if columns is not None else list(schema.names)
    unknown = [c for c in names if c not in schema.names]
    if unknown:
        raise StoreError(Problem(f"no such column(s) {unknown}; columns are {schema.names}"))
    return names


def _consistent_reads(
    partitions: Mapping[str, Location],
    schema: pa.Schema,
    names: list[str],
    reduce: FragmentReducer | None,
    listed: Callable[[str, set[str]], None] | None = None,
    skip: Container[str] = (),
    on_read: Callable[[str, pa.Table], None] | None = None,
    skip_if: FooterFilter | None = None,
) -> Iterator[tuple[str, str, pa.Table]]:
    """`(partition key, fragment name, reduced table)` for each fragment not in `skip`,
    partition by partition in name order, in the passes `read_partitions` describes. After each
    pass, `listed(key, names)` is told which fragments that pass found in each partition read
    in it."""
    done: dict[str, set[str]] = {key: set() for key in partitions}
    generation = {key: compaction_generation(loc) for key, loc in partitions.items()}
    todo = list(partitions)
    for _ in range(_MAX_PASSES):
        listing = {key: list_fragments(partitions[key]) for key in todo}
        jobs = [
            (key, info)
            for key in todo
            for info in listing[key]
            if info.name not in done[key] and info.name not in skip
        ]
        again: set[str] = set()
        for (key, info), table in zip(
            jobs,
            _read_many(partitions, jobs, schema, names, reduce, on_read, skip_if),
            strict=True,
        ):
            if table is None:
                again.add(key)  # compacted away since it was listed
            else:
                done[key].add(info.name)
                yield key, info.name, table
        for key in todo:
            still = {info.name for info in listing[key]}
            done[key] &= still
            if listed is not None:
                listed(key, still)
            now = compaction_generation(partitions[key])
            if now != generation[key]:
                generation[key] = now
                again.add(key)
        todo = [key for key in todo if key in again]
        if not todo:
            return
    raise StoreError(
        Problem(
            "partitions kept being compacted while they were read",
            file=", ".join(partitions[k].url for k in todo),
            hint="retry when the compaction has finished",
        )
    )


_NAME_TYPE = pa.dictionary(pa.int32(), pa.string())


def _assemble(tables: Mapping[str, pa.Table], empty_table: pa.Table, with_names: bool) -> pa.Table:
    parts = []
    for ordinal, name in enumerate(sorted(tables)):
        table = tables[name]
        ordinals = pa.repeat(pa.scalar(ordinal, pa.int32()), table.num_rows)
        table = table.append_column(FRAGMENT_ORDINAL, ordinals)
        if with_names:
            indices = pa.repeat(pa.scalar(0, pa.int32()), table.num_rows)
            names = pa.DictionaryArray.from_arrays(indices, pa.array([name]))
            table = table.append_column(FRAGMENT_NAME, names)
        parts.append(table)
    if not parts:
        empty = empty_table.schema.append(pa.field(FRAGMENT_ORDINAL, pa.int32()))
        if with_names:
            empty = empty.append(pa.field(FRAGMENT_NAME, _NAME_TYPE))
        return empty.empty_table()
    return pa.concat_tables(parts)


def _local_readers() -> int:
    """Readers of a local store: parsing a small fragment is CPU work, so threads beyond the
    CPUs this process may use only contend for them (on 2 CPUs, 8 readers scanned a partition
    of 400 fragments a third slower than 2)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(2, min(_THREADS, cpus))


def _read_many(
    partitions: Mapping[str, Location],
    jobs: list[tuple[str, FragmentInfo]],
    schema: pa.Schema,
    columns: list[str],
    reduce: FragmentReducer | None = None,
    on_read: Callable[[str, pa.Table], None] | None = None,
    skip_if: FooterFilter | None = None,
) -> Iterator[pa.Table | None]:
    """Read each job's fragment (reduced by `reduce`), in the jobs' order; None for a fragment
    that vanished since it was listed."""
    if not jobs:
        return
    location = partitions[jobs[0][0]]
    fs = location.fs
    payloads: dict[str, bytes | BaseException] = {}

    def fetch(chunk: list[tuple[str, FragmentInfo]]) -> None:
        if location.is_local:
            return
        small = [info.path for _, info in chunk if (info.size or 0) <= WHOLE_FETCH_BYTES]
        if small:
            # One batched, concurrent fetch (s3fs runs these as parallel GETs).
            fetched = fs.cat(small, on_error="return")
            payloads.update({p: fetched.get(p, FileNotFoundError(p)) for p in small})

    def one(job: tuple[str, FragmentInfo]) -> pa.Table | None:
        table = read_one(job)
        if table is not None and on_read is not None:
            on_read(job[1].name, table)
        return table if table is None or reduce is None else reduce(table)

    def read_one(job: tuple[str, FragmentInfo]) -> pa.Table | None:
        key, info = job
        url = _url(partitions[key], info.name)
        try:
            if location.is_local:
                return _project(open_parquet(info.path), schema, columns, url, skip_if)
            if info.path in payloads:
                payload = payloads.pop(info.path)
                if isinstance(payload, BaseException):
                    raise payload
                source = open_parquet(pa.BufferReader(payload))
                return _project(source, schema, columns, url, skip_if)
            with fs.open(info.path, "rb") as handle:  # large: ranged reads, pre-buffered
                return _project(pq.ParquetFile(handle), schema, columns, url, skip_if)
        except FileNotFoundError:
            return None
        except StoreError:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise StoreError(
                Problem(
                    f"not a readable store fragment ({type(exc).__name__}: {exc})",
                    file=url,
                    hint="a fragment is written whole or not at all; a damaged file was put "
                    "there by something else: move it out of the store",
                )
            ) from exc

    if len(jobs) == 1:
        fetch(jobs)
        yield one(jobs[0])
        return

    def submitted(pool: ThreadPoolExecutor) -> Iterator[Future[pa.Table | None]]:
        for start in range(0, len(jobs), _FETCH_CHUNK):
            chunk = jobs[start : start + _FETCH_CHUNK]
            fetch(chunk)
            for job in chunk:
                yield pool.submit(one, job)

    # In order, with a window of fragments read ahead: a slow consumer (a stream) does not
    # make the readers hold every fragment of the partition at once.
    threads = _local_readers() if location.is_local else _THREADS
    with ThreadPoolExecutor(max_workers=min(threads, len(jobs))) as pool:
        futures = submitted(pool)
        ahead = deque(itertools.islice(futures, 4 * threads))  # 4 fragments a reader ahead
        while ahead:
            table = ahead.popleft().result()
            ahead.extend(itertools.islice(futures, 1))
            yield table


def _project(
    parquet: pq.ParquetFile,
    schema: pa.Schema,
    columns: list[str],
    url: str,
    skip_if: FooterFilter | None = None,
) -> pa.Table:
    stored = parquet.schema_arrow
    if skip_if is not None and skip_if(parquet.metadata):
        empty = pa.schema([schema.field(c) for c in columns]).empty_table()
        return empty.replace_schema_metadata(stored.metadata)
    fills = conform_older(stored, schema)
    if fills:  # an older version of the schema: read what it has, fill what it lacks
        present = [c for c in columns if c not in fills]
        table = parquet.read(columns=present, use_threads=False)
        return fill_columns(table, schema, columns, fills)
    if fills is None:
        raise StoreError(
            Problem(
                "fragment does not have the store's schema",
                file=url,
                hint=f"expected columns {schema.names}; found {stored.names} "
                f"({_first_difference(stored, schema)})",
            )
        )
    return parquet.read(columns=columns, use_threads=False)


def _first_difference(stored: pa.Schema, expected: pa.Schema) -> str:
    for field in expected:
        if field.name not in stored.names:
            return f"{field.name} is missing"
        actual = stored.field(field.name)
        if actual.type != field.type or actual.nullable != field.nullable:
            return f"{field.name} is {actual.type} (nullable={actual.nullable})"
    extra = [n for n in stored.names if n not in expected.names]
    return f"extra columns {extra}" if extra else "column order differs"


def _url(partition: Location, name: str) -> str:
    return partition.url.rstrip("/") + "/" + name


def read_fragments(
    partition: Location,
    fragments: Sequence[FragmentInfo],
    schema: pa.Schema,
    columns: Sequence[str] | None = None,
) -> list[pa.Table | None]:
    """Read exactly `fragments` (None for one that vanished since it was listed)."""
    names = list(columns) if columns is not None else list(schema.names)
    return list(_read_many({"": partition}, [("", info) for info in fragments], schema, names))


def open_parquet(source: str | pa.BufferReader) -> pq.ParquetFile:
    """A parquet file on local disk or in memory, opened without pre-buffering. Pre-buffering
    coalesces the reads of a high-latency store through a background I/O pool; for a local or
    in-memory file that hand-off costs more than it saves (a quarter of the time of reading a
    few columns of a fragment of a few hundred rows)."""
    return pq.ParquetFile(source, pre_buffer=False)


def read_parquet_file(location: Location, columns: Sequence[str] | None = None) -> pa.Table:
    """One parquet file that is not a fragment (an items part); `StoreError` if unreadable."""
    try:
        source = location.path if location.is_local else pa.BufferReader(location.read_bytes())
        return open_parquet(source).read(columns=columns)
    except FileNotFoundError:
        raise StoreError(Problem("file is missing", file=location.url)) from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise StoreError(
            Problem(f"not a readable parquet file ({type(exc).__name__}: {exc})", file=location.url)
        ) from exc
