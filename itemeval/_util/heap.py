"""The process heap during a run: the cyclic garbage collector's pace, and giving memory back.

Python's default collector thresholds (700, 10, 10) suit small programs. A run allocates a few
objects per call by the hundred thousand (aiohttp's requests and futures, result objects,
rows) beside many long-lived ones (modules, the plan, a part of work items), so the default
pace collects the young generation thousands of times and walks every live object in full
passes: measured on a 20,000-item run in one process (2 cores, issue 14), the collector took
5.6 of the run's 22.7 CPU seconds. With `RUN_THRESHOLDS` it took 0.4 s, the whole command
was 20% faster, and the peak RSS did not change (270 MB). Reference counting still frees
almost everything at once; only cyclic garbage waits longer.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
from collections.abc import Iterator

import pyarrow as pa

#: Allocations before a young collection, and young (then middle) collections per older one.
RUN_THRESHOLDS = (50_000, 50, 100)


@contextlib.contextmanager
def run_collector_pace() -> Iterator[None]:
    """The run's collector pace while the block runs (the caller's pace comes back after,
    say in a notebook that ran a study)."""
    before = gc.get_threshold()
    gc.set_threshold(*RUN_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


#: glibc's malloc arenas for a process that runs shards (see `limit_malloc_arenas`).
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number (malloc.h)


def limit_malloc_arenas() -> None:
    """At most `MALLOC_ARENAS` glibc malloc arenas from now on. By default glibc gives threads
    up to 8 arenas per core; a shard's store and cache I/O runs in a pool of threads, and
    each arena kept its own free fragments: a worker's anonymous memory grew through a long run
    while its Python objects stayed flat (measured at 300,000 items in one process: 330 MB and
    rising, against 300 MB flat with two arenas). Threads that already have an arena keep it."""
    if _LIBC is not None:
        with contextlib.suppress(OSError, AttributeError):
            _LIBC.mallopt(_M_ARENA_MAX, MALLOC_ARENAS)


def settle_worker_heap() -> None:
    """For a process that only runs shards (a Ray worker actor): the run's pace for good, what
    exists once it is set up (modules, clients) never scanned again, and few malloc arenas."""
    limit_malloc_arenas()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*RUN_THRESHOLDS)


def release_unused_memory() -> None:
    """Collect, then hand free heap pages back to the system: arrow's pool and glibc's malloc
    keep them otherwise (after planning a million items, ~100 MB the run no longer used)."""
    gc.collect()
    pa.default_memory_pool().release_unused()
    trim_heap()


#: glibc's mmap threshold for a process that holds large arrow tables (`use_system_arrow_pool`).
MMAP_THRESHOLD = 1 << 20
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


def use_system_arrow_pool() -> None:
    """Arrow allocates from glibc's malloc from now on (not from its default mimalloc pool),
    and every allocation of `MMAP_THRESHOLD` bytes or more is its own mapping, returned to the
    system when freed. For a long-lived process that builds big tables, drops the
    intermediates and keeps the rest (the viewer's index): mimalloc kept the pages of freed
    intermediates (`release_unused` did not return them), and glibc's threshold, which rises
    to 32 MB as large blocks are freed, put later large buffers on the heap, where freed ones
    could not be trimmed. Measured on the viewer's index of 1,000,000 solutions and 2,000,000
    grades: 453 MB held after the index with mimalloc, 379 MB with glibc (docs/performance.md,
    "The viewer on a big store"). Buffers allocated before the call stay in their pool."""
    if _LIBC is not None:
        with contextlib.suppress(OSError, AttributeError):
            _LIBC.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    pa.set_memory_pool(pa.system_memory_pool())


def trim_heap() -> None:
    """Hand glibc's free heap pages back to the system, without a collection (cheap enough
    after every batch of a long scan). A scan's batches of parsed items come and go, and glibc
    kept the pages each one freed: reading a million items again (`planning.commit_plan`) grew
    the heap by ~25 MB of free pages, against 3-5 MB when trimmed after every batch."""
    if _LIBC is not None:
        with contextlib.suppress(OSError, AttributeError):
            _LIBC.malloc_trim(0)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


_LIBC = _libc()
