"""A run compacts the partitions it wrote: at its end, as it goes, never at the cost of a row.

The physical truth is the store's rows read without deduplication: after the run's compaction
they are exactly the logical rows read (deduplicated) just before it."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from runtime_files import write_study

from itemeval.config import load_study
from itemeval.runtime import RunOptions, _compaction, run_study
from itemeval.store import StudyStore, compact, latest_manifest
from itemeval.store._summary_file import read_summary

INLINE = RunOptions(no_ray=True, yes=True, quiet=True)
FRAGMENTS_BEFORE: dict[tuple[str, str], int] = {}
KEYS = {"solutions": ["item_id", "epoch"], "grades": ["gen_condition_id", "item_id", "epoch"]}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "default-cache"))


def _study(folder: Path, **overrides: Any) -> Any:
    settings = {
        "facets.prompt": ["builtin:direct"],
        "facets.scorer": ["exact_match"],
        "facets.replications": 1,
        "budget.dev_items": 16,
        "runtime.shard_size": 4,
        "runtime.compact": True,
        **overrides,
    }
    return load_study(write_study(folder, **settings))


def _rows(store: StudyStore, table: str, cid: str, *, dedup: bool) -> pa.Table:
    rows = store.read(table, [cid], dedup=dedup)
    order = pc.sort_indices(rows, [(k, "ascending") for k in KEYS[table]])
    return rows.take(order)


def _partitions(store: StudyStore) -> list[tuple[str, str]]:
    return [(t, cid) for t in ("solutions", "grades") for cid in store.condition_ids(t)]


def _logical_before_the_end(store_url: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The logical rows of every partition just before the run's end compaction."""
    seen: dict[tuple[str, str], pa.Table] = {}
    finish = _compaction.RunCompaction.finish

    def spy(self: Any, stopped: Any, skip: str | None = None) -> Any:
        for key in _partitions(self.store):
            seen[key] = _rows(self.store, *key, dedup=True)
            FRAGMENTS_BEFORE[key] = len(self.store.fragments(*key))
        return finish(self, stopped, skip=skip)

    monkeypatch.setattr(_compaction.RunCompaction, "finish", spy)
    return seen


def _compaction_processes() -> list[int]:
    """This process's compaction processes still running (`_compaction_process`)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if b"itemeval.runtime._compaction_process" not in handle.read():
                    continue
            with open(f"/proc/{entry}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid():
            found.append(int(entry))
    return found


def _gen_ids(store: StudyStore, cid: str) -> set[str]:
    rows = store.read("grades", [cid], columns=["gen_condition_id"], dedup=False)
    return set(rows.column("gen_condition_id").to_pylist())


def test_a_run_compacts_what_it_wrote_at_its_end(tmp_path, monkeypatch):
    study = _study(tmp_path)
    logical = _logical_before_the_end(study.store_url, monkeypatch)
    outcome = run_study(study, INLINE)
    assert outcome.status == "completed", outcome.message
    store = StudyStore.open(study.store_url)
    assert logical and all(FRAGMENTS_BEFORE[key] > 1 for key in logical)
    for (table, cid), before in logical.items():
        fragments = store.fragments(table, cid)
        # One fragment per unit: a solutions partition, a generate condition's grades.
        units = 1 if table == "solutions" else len(_gen_ids(store, cid))
        assert len(fragments) == units, (table, cid)
        summary = read_summary(store.partition(table, cid), store.stage(table), [])
        assert summary is not None and set(summary.fragments) == {f.name for f in fragments}
        # Physical rows now = the logical rows before: nothing lost, nothing left twice.
        assert _rows(store, table, cid, dedup=False).equals(before), (table, cid)
    manifest = latest_manifest(store)
    record = manifest.compaction
    assert record is not None and record.status == "compacted" and record.left == 0
    assert record.partitions == len(logical) and record.fragments_merged > len(logical)
    assert record.end_seconds > 0
    assert "Compaction:" in outcome.message


def test_a_run_with_compaction_off_leaves_its_fragments(tmp_path):
    study = _study(tmp_path, **{"runtime.compact": False})
    run_study(study, INLINE)
    store = StudyStore.open(study.store_url)
    for table, cid in _partitions(store):
        assert len(store.fragments(table, cid)) > 1
        assert read_summary(store.partition(table, cid), store.stage(table), []) is None
    record = latest_manifest(store).compaction
    assert record is not None and not record.enabled and record.status == "skipped"
    assert record.partitions == 0 and record.left > 0


def _ray_workers(context: Any) -> Any:
    from itemeval.runtime import RayExecutor, with_shares

    return RayExecutor(with_shares(context, 2), workers=2, per_worker=2, shared_limiters=False)


@pytest.mark.parametrize(
    "where", ["in-process", pytest.param("ray", marks=[pytest.mark.ray, pytest.mark.slow])]
)
def test_a_long_run_compacts_as_it_goes(tmp_path, monkeypatch, request, where):
    # A partition is compacted (by the driver's thread, in a process of its own) once it received
    # 3 fragments, while
    # shards are still dispatched (in this process, or to Ray's workers); the end merges the
    # rest.
    factory = None
    if where == "ray":
        request.getfixturevalue("ray_local")
        factory = _ray_workers
    calls: list[tuple[str, str, str]] = []  # (thread, table, condition) of each compaction done
    real = _compaction.RunCompaction._child

    def spy(self: Any, keys: list[tuple[str, str]], stopped: Any) -> Any:
        reports = real(self, keys, stopped)
        for key, (results, _) in reports.items():
            if results and any(r.summary_written for r in results):
                calls.append((threading.current_thread().name, *key))
        return reports

    monkeypatch.setattr(_compaction.RunCompaction, "_child", spy)
    study = _study(tmp_path, **{"runtime.compact_fragments": 3, "budget.dev_items": 24})
    logical = _logical_before_the_end(study.store_url, monkeypatch)
    options = RunOptions(yes=True, quiet=True, no_ray=factory is None)
    outcome = run_study(study, options, executor_factory=factory)
    assert outcome.status == "completed", outcome.message
    as_it_went = [c for c in calls if c[0] == "itemeval-compaction"]
    assert as_it_went  # while shards were dispatched
    store = StudyStore.open(study.store_url)
    for (table, cid), before in logical.items():
        assert _rows(store, table, cid, dedup=False).equals(before), (table, cid)
    record = latest_manifest(store).compaction
    assert record is not None and record.partitions == len(calls)


@pytest.mark.s3
def test_a_failing_compaction_fails_neither_the_run_nor_a_row(
    tmp_path, s3_server, s3_bucket, monkeypatch
):
    # The object store refuses every write of a summary: each compaction fails after it wrote
    # its new fragments; they are removed, the run completes, and its rows are all there.
    from s3_fault_proxy import s3_fault_proxy
    from s3_servers import S3_KEYS_BY_NAME

    with s3_fault_proxy(s3_server, fail_object_rate=1.0, only_paths="_summary") as proxy:
        options = {
            **S3_KEYS_BY_NAME,
            "client_kwargs": {"endpoint_url": proxy["url"], "region_name": "us-east-1"},
        }
        store_url = f"{s3_bucket}/studies/failing-compaction"
        study = _study(tmp_path, store=store_url, storage_options=options)
        logical = _logical_before_the_end(study.store_url, monkeypatch)
        outcome = run_study(study, INLINE)
        assert outcome.status == "completed" and outcome.exit_code == 0, outcome.message
        assert "compacting" in outcome.message and "failed" in outcome.message
        assert proxy["failed"] > 0
        store = StudyStore.open(study.store_url, options)
        for (table, cid), before in logical.items():
            after = _rows(store, table, cid, dedup=True)
            assert after.equals(before), (table, cid)
            # Nothing of the failed compactions is left: the rows as the run wrote them.
            assert _rows(store, table, cid, dedup=False).num_rows == before.num_rows
        record = latest_manifest(store).compaction
        assert record is not None and record.status == "failed"
        assert len(record.failed) == len(logical) == record.left


@pytest.mark.s3
def test_an_interrupted_run_records_its_manifest_promptly(
    tmp_path, s3_server, s3_bucket, monkeypatch
):
    # Interrupted while a partition is compacted (the object store takes 8 s to accept a
    # summary): the manifest says `interrupted` within seconds, the end's compaction is
    # skipped, and what the compaction leaves is consistent: every cell once.
    from s3_fault_proxy import s3_fault_proxy
    from s3_servers import S3_KEYS_BY_NAME

    monkeypatch.setenv("ITEMEVAL_STOP_GRACE_S", "0.5")
    with s3_fault_proxy(s3_server, put_delay_s=8.0, only_paths="_summary") as proxy:
        options = {
            **S3_KEYS_BY_NAME,
            "client_kwargs": {"endpoint_url": proxy["url"], "region_name": "us-east-1"},
        }
        sent: list[float] = []

        def interrupt() -> None:
            deadline = time.monotonic() + 300
            while not proxy["matching"] and time.monotonic() < deadline:
                time.sleep(0.05)  # until a compaction writes its summary
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=interrupt, daemon=True).start()
        study = _study(
            tmp_path,
            store=f"{s3_bucket}/studies/interrupted",
            storage_options=options,
            **{
                "runtime.compact_fragments": 2,
                "budget.dev_items": 24,
                "endpoints.sim.sim": {"latency": {"median_ms": 30}},
            },
        )
        outcome = run_study(study, INLINE)
        ended = time.monotonic()
        assert sent and outcome.status == "interrupted", outcome.message
        assert ended - sent[0] < 5.0  # the grace (0.5 s), not the compaction, is waited for
        store = StudyStore.open(study.store_url, options)
        manifest = latest_manifest(store)
        assert manifest.outcome == "interrupted"
        record = manifest.compaction
        assert record is not None and record.status == "skipped"
        assert record.reason == "interrupted"
        deadline = time.monotonic() + 60
        while _compaction_processes() and time.monotonic() < deadline:
            time.sleep(0.1)  # it ends on its own, once its summary is written
        assert not _compaction_processes()
        for table, cid in _partitions(store):
            physical = _rows(store, table, cid, dedup=False).num_rows
            assert physical == _rows(store, table, cid, dedup=True).num_rows


def test_judges_read_only_their_rows_of_compacted_solutions(tmp_path, monkeypatch):
    # The generate stage's solutions compacted into one fragment per condition; a judge's grade
    # shards then read only the row groups holding their cells (here every fragment counts as
    # large, in row groups of 5 rows) and grade every answer.
    monkeypatch.setattr("itemeval.store.fragments.ROW_GROUP_ROWS", 5)
    monkeypatch.setattr("itemeval.store._compact_merge.ROW_GROUP_ROWS", 5)
    monkeypatch.setattr("itemeval.runtime._shard_reads.WHOLE_FRAGMENT_ROWS", 3)
    from itemeval.runtime import _shard_reads

    read_rows = _shard_reads._rows_of
    large: list[int] = []

    def spy(parquet: Any, wanted: pa.Table) -> pa.Table:
        large.append(parquet.num_row_groups)
        rows = read_rows(parquet, wanted)
        assert rows.num_rows == wanted.num_rows  # exactly the shard's cells
        return rows

    monkeypatch.setattr(_shard_reads, "_rows_of", spy)
    study = _study(
        tmp_path,
        **{"facets.scorer": [], "facets.grader": ["judge"], "runtime.compact": False},
    )
    generated = run_study(
        study, RunOptions(no_ray=True, yes=True, quiet=True, stages=("generate",))
    )
    assert generated.status == "completed"
    store = StudyStore.open(study.store_url)
    compact(store, ["solutions"])  # here, with the row groups of 5 rows
    for cid in store.condition_ids("solutions"):
        assert len(store.fragments("solutions", cid)) == 1
    graded = run_study(study, RunOptions(no_ray=True, yes=True, quiet=True, stages=("grade",)))
    assert graded.status == "completed", graded.message
    counts = graded.stages["grade"].counts
    solutions = store.read("solutions", columns=["status"])
    ok = int(pc.sum(pc.equal(solutions.column("status"), "ok")).as_py())
    assert counts.done == ok and counts.planned == ok
    assert large and min(large) > 1  # compacted fragments of several row groups, read in part


@pytest.mark.parametrize("threshold", [1, _compaction.BEFORE_NEXT_STAGE_ROWS])
def test_the_grade_stage_reads_what_generate_wrote_compacted(tmp_path, monkeypatch, threshold):
    # Each partition the generate stage wrote with `BEFORE_NEXT_STAGE_ROWS` rows or more (here
    # every one, or none: the run has fewer) is compacted before the grade stage reads its
    # pending set: one fragment per unit, covered by its summary, its physical rows the logical
    # rows before; the judge then grades every answer.
    monkeypatch.setattr(_compaction, "BEFORE_NEXT_STAGE_ROWS", threshold)
    from itemeval.runtime import _driver

    before: dict[tuple[str, str], pa.Table] = {}
    at_pending: dict[tuple[str, str], tuple[int, bool, pa.Table]] = {}
    between = _compaction.RunCompaction.between_stages

    def spy_between(self: Any, stopped: Any, *, next_stage: bool = False) -> None:
        if next_stage:
            for key in _partitions(self.store):
                before[key] = _rows(self.store, *key, dedup=True)
                FRAGMENTS_BEFORE[key] = len(self.store.fragments(*key))
        between(self, stopped, next_stage=next_stage)

    pending_grade = _driver.pending_grade

    def spy_pending(store: StudyStore, *args: Any, **kwargs: Any) -> Any:
        for table, cid in before:
            names = {f.name for f in store.fragments(table, cid)}
            summary = read_summary(store.partition(table, cid), store.stage(table), [])
            covered = summary is not None and set(summary.fragments) == names
            physical = _rows(store, table, cid, dedup=False)
            at_pending[(table, cid)] = (len(names), covered, physical)
        return pending_grade(store, *args, **kwargs)

    monkeypatch.setattr(_compaction.RunCompaction, "between_stages", spy_between)
    monkeypatch.setattr(_driver, "pending_grade", spy_pending)
    study = _study(tmp_path, **{"facets.grader": ["judge"], "budget.dev_items": 24})
    outcome = run_study(study, INLINE)
    assert outcome.status == "completed", outcome.message
    assert before and set(at_pending) == set(before)
    assert {table for table, _ in before} == {"solutions", "grades"}  # the scorer's, inline
    store = StudyStore.open(study.store_url)
    for key, logical in before.items():
        fragments, covered, physical = at_pending[key]
        assert FRAGMENTS_BEFORE[key] > 1, key
        if threshold == 1:
            units = 1 if key[0] == "solutions" else len(_gen_ids(store, key[1]))
            assert fragments == units and covered, key
            assert physical.equals(logical), key  # nothing lost, nothing left twice
        else:  # fewer rows than the threshold: read as written
            assert fragments == FRAGMENTS_BEFORE[key] and not covered, key
    counts = outcome.stages["grade"].counts
    solutions = store.read("solutions", columns=["status"])
    ok = int(pc.sum(pc.equal(solutions.column("status"), "ok")).as_py())
    # The judge's cells and the scorer's (written with the solutions): every answer, twice.
    assert counts.done == counts.planned == 2 * ok and counts.errors == 0
    record = latest_manifest(store).compaction
    assert record is not None and record.status == "compacted" and record.left == 0
