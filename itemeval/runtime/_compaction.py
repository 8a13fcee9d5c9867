"""The run compacts the partitions it writes (`runtime.compact`, `store.compact`).

* **As it goes**: the driver counts the fragments and rows each shard wrote (`shard_done`). A
  partition of the current stage that has received `runtime.compact_fragments` fragments since
  its last compaction, and at least as many rows as the run had written to it before, is
  queued; a thread of the driver takes queued partitions one at a time. Dispatch never waits
  for it. The rows' condition makes a partition's compactions double in size, so a run rewrites
  its partitions' summaries about twice in all rather than once per `compact_fragments`.
  Between stages the driver waits for the partition in progress (a grade stage places each
  solution in the fragment that holds it when its condition's turn comes), and no solutions
  partition is compacted during a later stage.
* **Before the next stage**: every partition that received `BEFORE_NEXT_STAGE_ROWS` rows or
  more since its last compaction is compacted before the grade stage starts (the run waits;
  the end then has those partitions no more to do). The grade stage's pending set reads each
  partition's summary and the fragments it does not cover, and those it reads row by row: a
  million items x 2 models left ~2M rows uncovered, and reading them raised the driver from
  ~130 MB to its run's peak of 745 MB (docs/performance.md, "Memory").
* **In a process of its own**: the thread starts one (`_compaction_process`) per compaction,
  which holds one unit at a time (`store/_compact_merge.py`) and hands all its memory back when
  it ends (arrow's pool and malloc keep freed pages in the driver): a million-item run's
  driver peaked at 745 MB with it, 977 MB compacting in its own thread (docs/performance.md,
  "Memory"). It also keeps compaction off the interpreter that dispatches.
* **At the end** of a run that was not interrupted (completed, stopped at the budget cap, or
  with failed shards), every partition it wrote since that partition's last compaction, in one
  process, after the manifest has recorded how the run ended; the manifest is then written
  again with what compaction did (`RunManifest.compaction`). An interruption (Ctrl-C, SIGTERM)
  skips it: the process under way is asked to stop (SIGTERM: at its next batch of fragments,
  removing what it wrote) and the run does not wait for it.
* **A failure is a warning**: compaction writes before it deletes and deletes only what it
  merged, so the run's rows are never at risk; the partition is left for the next compaction
  and the run's outcome does not change.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

import itemeval
from itemeval.runtime._progress import Progress
from itemeval.runtime._shards import ShardSummary
from itemeval.secrets import redact
from itemeval.store import (
    GRADES,
    SOLUTIONS,
    CompactionRecord,
    CompactionResult,
    RunManifest,
    StudyStore,
    write_manifest_end,
)

Partition = tuple[str, str]  # (table, condition id)

#: How long an interrupted run waits for the thread to notice (it checks between batches).
STOP_WAIT_S = 0.5
#: A partition with this many rows not yet compacted is compacted before the next stage reads
#: it (a few tens of MB of the driver's memory when read row by row; fewer rows are cheaper to
#: read than a compaction's process is to start).
BEFORE_NEXT_STAGE_ROWS = 100_000


class RunCompaction:
    """Compaction of the partitions a run writes (see the module doc)."""

    def __init__(
        self,
        store: StudyStore,
        *,
        storage_options: dict[str, Any] | None = None,
        enabled: bool,
        every: int,
        inline: Iterable[str] = (),
        progress: Progress | None = None,
    ):
        """`storage_options`: the store's, for the compaction's process; `every`: a partition
        is compacted while the run goes once it received this many fragments; `inline`: the
        grade conditions generate shards write with their solutions."""
        self.store = store
        self.store_url = store.root.url
        self.storage_options = storage_options
        self.enabled = enabled
        self.every = every
        self.inline = tuple(inline)
        self.progress = progress
        status = "compacted" if enabled else "skipped"
        self.record = CompactionRecord(enabled=enabled, status=status)
        if not enabled:
            self.record.reason = "runtime.compact is false"
        self._written: dict[Partition, int] = {}  # fragments since the partition's last compaction
        self._rows: dict[Partition, int] = {}  # ... and rows
        self._compacted_rows: dict[Partition, int] = {}  # rows written before it
        self._queue: list[Partition] = []
        self._tables: set[str] = set()  # what the current stage writes (compacted as it goes)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._busy: Partition | None = None
        self._closing = False
        self._stop = threading.Event()  # the run was interrupted: stop at the next batch
        self._thread: threading.Thread | None = None

    # -- what the driver tells it ----------------------------------------------------------
    def stage(self, stage: str) -> None:
        """A stage starts: its partitions may be compacted as it goes."""
        with self._lock:
            self._tables = {SOLUTIONS.name, GRADES.name} if stage == "generate" else {GRADES.name}

    def shard_done(self, summary: ShardSummary) -> None:
        """A shard's summary came back: the fragments it wrote."""
        if summary.fragment is not None:
            table = SOLUTIONS.name if summary.stage == "generate" else GRADES.name
            self.wrote(table, summary.condition_id, rows=summary.ok + summary.error_count)
        if summary.graded_inline and self.inline:
            rows = summary.graded_inline // len(self.inline)  # each scorer grades the same
            for condition_id in self.inline:
                self.wrote(GRADES.name, condition_id, rows=rows)

    def wrote(self, table: str, condition_id: str, fragments: int = 1, rows: int = 0) -> None:
        """`fragments` more fragments, of `rows` rows, in a partition (a shard's, or the batch
        tier's)."""
        key = (table, condition_id)
        with self._lock:
            count = self._written[key] = self._written.get(key, 0) + fragments
            new_rows = self._rows[key] = self._rows.get(key, 0) + rows
            if (
                self.enabled
                and count >= self.every
                and new_rows >= self._compacted_rows.get(key, 0)
                and table in self._tables
                and key not in self._queue
                and key != self._busy
                and not self._closing
            ):
                self._queue.append(key)
                self._start()
                self._wake.notify()

    def between_stages(self, stopped: Callable[[], bool], *, next_stage: bool = False) -> None:
        """A stage ended: wait for the partition in progress (not the queue, which waits for
        the run's end); with a `next_stage` to come, then compact here every partition that
        received `BEFORE_NEXT_STAGE_ROWS` rows since its last compaction (the run waits). An
        interruption stops it instead."""
        with self._lock:
            self._tables = set()
            self._queue.clear()
            while self._busy is not None:
                if stopped():
                    self._stop.set()
                    return
                self._wake.wait(0.2)
            todo = sorted(
                key
                for key, rows in self._rows.items()
                if rows >= BEFORE_NEXT_STAGE_ROWS and self._written.get(key, 0)
            )
        if not (self.enabled and next_stage and todo) or stopped():
            return
        self.say(f"compacting the {len(todo)} partition(s) the next stage reads")
        self._compact(todo, stopped)

    # -- the end -----------------------------------------------------------------------------
    def finish(self, stopped: Callable[[], bool], skip: str | None = None) -> CompactionRecord:
        """At the run's end: the thread ends after its partition (or at once when the run was
        interrupted); then, unless `skip` says why not, every partition written since its
        last compaction, here (the run waits)."""
        if skip is not None or stopped():
            self.abandon()
            if self.enabled:
                self.record.status, self.record.reason = "skipped", skip or "interrupted"
            self.record.left = self._left()
            return self.record
        with self._lock:
            self._closing = True
            self._queue.clear()
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join()
        if self.enabled:
            todo = sorted(key for key, count in self._written.items() if count)
            if todo:
                started = time.monotonic()
                self.say(f"compacting the {len(todo)} partition(s) this run wrote")
                self._compact(todo, stopped)
                if stopped():
                    self.record.status, self.record.reason = "skipped", "interrupted"
                self.record.end_seconds = round(time.monotonic() - started, 3)
                self.say(self.summary())
            if self.record.failed and self.record.status == "compacted":
                self.record.status = "failed"
        self.record.left = self._left()
        return self.record

    def at_end(self, ended: RunManifest, stopped: Callable[[], bool]) -> str:
        """The run's end compaction (`finish`), after `ended` (the manifest) recorded how the
        run ended; then the manifest again with what it did. Returns what the run's message
        adds (a warning when a partition failed)."""
        record = self.finish(stopped)
        try:
            write_manifest_end(self.store, ended.model_copy(update={"compaction": record}))
        except Exception as exc:  # the outcome is recorded already
            self.say("could not record the compaction in the manifest: " + redact(repr(exc))[:300])
        if record.failed:
            return (
                f"\nWarning: compacting {len(record.failed)} partition(s) failed; their "
                "fragments stay as written (the rows are unaffected; `itemeval compact` tries "
                "again): " + record.failed[0]
            )
        if record.partitions:
            text = self.summary()
            return "\n" + text[0].upper() + text[1:] + "."
        return ""

    def abandon(self) -> None:
        """The run was interrupted: the compaction under way stops at its next batch of
        fragments (what it wrote of that partition removed); waits for it briefly."""
        self._stop.set()
        with self._lock:
            self._closing = True
            self._queue.clear()
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_S)

    def summary(self) -> str:
        r = self.record
        text = (
            f"compaction: {r.partitions} partition(s), {r.fragments_merged:,} fragments -> "
            f"{r.fragments_written:,} ({r.rows_written:,} rows) in {r.seconds:,.1f}s"
        )
        if r.end_seconds:
            text += f" ({r.end_seconds:,.1f}s of it at the end)"
        if r.failed:
            text += f"; {len(r.failed)} failed, left as written: " + "; ".join(r.failed[:3])
        return text

    def _left(self) -> int:
        with self._lock:
            return sum(1 for count in self._written.values() if count)

    # -- the work ----------------------------------------------------------------------------
    def _start(self) -> None:
        if self._thread is None:  # under the lock
            self._thread = threading.Thread(
                target=self._run, name="itemeval-compaction", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closing:
                    self._wake.wait()
                if self._closing and not self._queue:
                    return
                key = self._queue.pop(0)
                if key[0] not in self._tables:
                    continue
                self._busy = key
            try:
                if self.progress is not None:
                    self.progress.compacting = f"compacting {key[0]}/{key[1][:40]}"
                self._compact([key], self._stop.is_set)
            finally:
                if self.progress is not None:
                    self.progress.compacting = ""
                with self._lock:
                    self._busy = None
                    self._wake.notify_all()

    def _compact(self, keys: list[Partition], stopped: Callable[[], bool]) -> None:
        """Compact `keys` in a process of their own (`_compact_in_child`), one after another;
        each partition's count starts again from the fragments written meanwhile (or is kept
        when its compaction stopped or failed). `stopped()` true: the child is asked to stop
        (SIGTERM: at its next batch of fragments) and not waited for long."""
        counted = {}
        with self._lock:
            for key in keys:
                counted[key] = (self._written.get(key, 0), self._rows.get(key, 0))
                self._written[key] = self._rows[key] = 0
        started = time.monotonic()
        reports: dict[Partition, tuple[list[CompactionResult] | None, str | None]] = {}
        try:
            reports = self._child(keys, stopped)
        except Exception as exc:  # the process could not start or died: a warning
            reason = redact(f"{type(exc).__name__}: {exc}").splitlines()[0][:300]
            reports = {key: (None, reason) for key in keys}
        finally:
            self.record.seconds = round(self.record.seconds + time.monotonic() - started, 3)
        for key in keys:
            results, error = reports.get(key, (None, None))
            if error is not None:
                self.record.failed.append(f"{key[0]}/{key[1]}: {error}")
                self.say(f"compaction of {key[0]}/{key[1]} failed, left as written: {error}")
            if results is None or any(r.stopped for r in results) or not results:
                with self._lock:  # left for the next compaction
                    before, rows = counted[key]
                    self._written[key] = self._written.get(key, 0) + before
                    self._rows[key] = self._rows.get(key, 0) + rows
                continue
            with self._lock:
                self._compacted_rows[key] = self._compacted_rows.get(key, 0) + counted[key][1]
            for result in results:
                if result.summary_written:
                    self.record.partitions += 1
                    self.record.fragments_merged += result.fragments_read
                    self.record.fragments_written += len(result.fragments_written)
                    self.record.rows_written += result.rows_written

    def _child(
        self, keys: list[Partition], stopped: Callable[[], bool]
    ) -> dict[Partition, tuple[list[CompactionResult] | None, str | None]]:
        """Run `_compaction_process` over `keys` and collect what it reports, partition by
        partition; `stopped()` true: SIGTERM, and a short wait."""
        job = {"store": self.store_url, "options": self.storage_options, "partitions": keys}
        with tempfile.TemporaryFile() as errors:  # its last line says why, should it die
            child = subprocess.Popen(
                [sys.executable, "-m", "itemeval.runtime._compaction_process"],
                env=_child_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                start_new_session=True,  # a terminal's Ctrl-C is the driver's, not its
            )
            assert child.stdin is not None and child.stdout is not None
            lines: queue.Queue[str | None] = queue.Queue()

            def read(stdout: IO[str]) -> None:
                for line in stdout:
                    lines.put(line)
                lines.put(None)

            threading.Thread(target=read, args=(child.stdout,), daemon=True).start()
            child.stdin.write(json.dumps(job))
            child.stdin.close()
            reports: dict[Partition, tuple[list[CompactionResult] | None, str | None]] = {}
            asked_to_stop = 0.0
            while True:
                if stopped() and not asked_to_stop:
                    child.terminate()  # SIGTERM: it stops at its next batch
                    asked_to_stop = time.monotonic()
                if asked_to_stop and time.monotonic() - asked_to_stop > STOP_WAIT_S:
                    return reports  # it removes what it wrote on its own; the run goes on
                try:
                    line = lines.get(timeout=0.1)
                except queue.Empty:
                    continue
                if line is None:
                    break
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    report = json.loads(line)
                    key = (str(report["key"][0]), str(report["key"][1]))
                    results = report.get("results")
                    reports[key] = (
                        None
                        if results is None
                        else [CompactionResult(**_tuples(r)) for r in results],
                        report.get("error"),
                    )
            code = child.wait()
            if any(key not in reports for key in keys) and not asked_to_stop:
                errors.seek(0)
                said = errors.read()[-4000:].decode(errors="replace").strip().splitlines()
                why = f"the compaction's process ended with exit code {code}"
                if said:
                    why += ": " + redact(said[-1])[:300]
                for key in keys:
                    reports.setdefault(key, (None, why))
        return reports

    def say(self, text: str) -> None:
        """A line on the progress output (nothing when quiet)."""
        if self.progress is not None:
            self.progress.message(text)


def _child_env() -> dict[str, str]:
    """The driver's environment, with the folder this `itemeval` was imported from first on
    the path (a driver that found it by `sys.path`, not by an install, has the same)."""
    root = str(Path(itemeval.__file__).resolve().parents[1])
    path = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _tuples(result: dict[str, Any]) -> dict[str, Any]:
    """A `CompactionResult` as JSON gave it back (its tuple a list)."""
    return {**result, "fragments_written": tuple(result.get("fragments_written") or ())}
