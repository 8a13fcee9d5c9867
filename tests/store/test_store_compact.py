"""Compaction: one deduplicated fragment per partition, safe beside writers and readers."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from itemeval.cli.main import main
from itemeval.store import GRADES, StudyStore, compact
from itemeval.store._compact import compact_partition
from itemeval.store._summary import SUMMARIES_ENV, read_cells
from itemeval.store._summary_file import (
    SUMMARY_FILE,
    PartitionSummary,
    encode_summary,
    open_summary,
    read_summary,
)


def test_compaction_keeps_the_best_row_of_every_key(store: StudyStore, solution) -> None:
    store.write_solutions("c1", [solution("q1", ok=False, at=1), solution("q2", text="old", at=1)])
    store.write_solutions(
        "c1", [solution("q1", text="fixed", at=2), solution("q2", text="new", at=2)]
    )
    store.write_solutions("c1", [solution("q1", ok=False, at=3), solution("q3", at=3)])
    before = store.read_solutions(["c1"])
    result = compact_partition(store, "solutions", "c1")
    assert (result.fragments_read, result.rows_read, result.rows_written) == (3, 6, 3)
    assert result.duplicates_dropped == 3
    fragments = store.fragments("solutions", "c1")
    assert [f.name for f in fragments] == [result.fragment_written]
    after = store.read_solutions(["c1"])
    assert after.equals(before)
    assert after.column("text").to_pylist() == ["fixed", "new", "answer to q3/0"]
    # Already compact: nothing is rewritten.
    again = compact_partition(store, "solutions", "c1")
    assert again.fragment_written is None and again.rows_read == 0  # the summary covers it


def test_compact_selects_stages_and_conditions(store: StudyStore, solution, grade) -> None:
    for _ in range(2):
        store.write_solutions("gen-a--000000000001", [solution("q1")])
        store.write_solutions("gen-b--000000000002", [solution("q1")])
        store.write_grades(
            "judge--000000000003", [grade("gen-a--000000000001", "q1", solution_hash="h")]
        )
    results = compact(store, conditions=["gen-a", "judge"])
    assert sorted((r.stage, r.condition_id) for r in results) == [
        ("grades", "judge--000000000003"),
        ("solutions", "gen-a--000000000001"),
    ]
    assert len(store.fragments("solutions", "gen-b--000000000002")) == 2
    assert [r.stage for r in compact(store, stages=["solutions"])] == ["solutions"] * 2


def test_cli_compact(store: StudyStore, solution, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(3):
        store.write_solutions("c1", [solution(f"q{i}"), solution("q0")])
    assert main(["compact", store.root.url, "--stage", "solutions"]) == 0
    out = capsys.readouterr().out
    assert "solutions/c1: 3 fragments, 6 rows -> 1 fragment, 3 rows" in out
    assert len(store.fragments("solutions", "c1")) == 1
    assert main(["compact", store.root.url, "--condition", "nope"]) == 2
    assert "matches no condition" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [[], ["--rebuild-summaries"]])
def test_cli_compact_refuses_what_is_not_a_store(
    tmp_path, flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    study = tmp_path / "study.yaml"
    study.write_text("study: x\n")
    for given, what in ((study, "a file"), (tmp_path / "nowhere", "nothing")):
        assert main(["compact", str(given), *flag]) == 2
        err = capsys.readouterr().err
        assert f"no study store here ({what}" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.yaml"]  # nothing written


def test_writer_and_reader_during_compaction_see_every_row_once(
    store: StudyStore, solution
) -> None:
    base = [f"base-{i:03d}" for i in range(120)]
    errored = set(base[::7])
    for start in range(0, len(base), 10):  # 12 fragments, some keys errored, fixed later
        chunk = base[start : start + 10]
        store.write_solutions("c1", [solution(k, ok=k not in errored) for k in chunk])
    store.write_solutions("c1", [solution(k) for k in sorted(errored)])
    written: list[str] = []
    problems: list[str] = []
    reads: list[int] = []
    stop = threading.Event()

    def writer() -> None:
        try:
            for n in range(25):
                keys = [f"new-{n:02d}-{j}" for j in range(4)]
                store.write_solutions("c1", [solution(k) for k in keys])
                written.extend(keys)
                time.sleep(0.005)
        except Exception as exc:  # pragma: no cover - reported by the assertion below
            problems.append(f"writer: {exc!r}")

    def reader() -> None:
        seen_new = 0
        try:
            while not stop.is_set():
                table = store.read_solutions(["c1"], columns=["item_id", "status"])
                ids = table.column("item_id").to_pylist()
                if len(ids) != len(set(ids)):
                    problems.append("a key appeared twice")
                if not set(base) <= set(ids):
                    problems.append("a compacted row was missing")
                if pc.any(pc.equal(table["status"], "error")).as_py():
                    problems.append("an error row beat an ok row")
                new = sum(1 for i in ids if i.startswith("new-"))
                if new < seen_new:
                    problems.append("a written row disappeared")
                seen_new = new
                reads.append(len(ids))
        except Exception as exc:  # pragma: no cover
            problems.append(f"reader: {exc!r}")

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    compactions = 0
    # Keep compacting while the writer writes and until the reader has read a few times
    # (reads on S3 are slower, and a read overlapping a compaction takes an extra pass).
    while (threads[0].is_alive() or len(reads) < 3) and compactions < 40:
        compact_partition(store, "solutions", "c1")
        compactions += 1
    threads[0].join(timeout=60)
    stop.set()
    threads[1].join(timeout=60)
    assert not problems, problems[:5]
    assert compactions >= 2 and len(reads) >= 3, (compactions, len(reads))
    final = store.read_solutions(["c1"]).column("item_id").to_pylist()
    assert sorted(final) == sorted(base + written)
    assert len(written) == 100
    compact_partition(store, "solutions", "c1")
    assert len(store.fragments("solutions", "c1")) == 1
    assert sorted(
        store.read_solutions(["c1"], dedup=False).column("item_id").to_pylist()
    ) == sorted(base + written)


# -- compaction in bounded memory (`_compact_merge.py`) ---------------------------------------


def _physical(store: StudyStore, stage: str, cid: str) -> pa.Table:
    """Every physical row of the partition, sorted by key (no deduplication)."""
    rows = store.read(stage, [cid], dedup=False)
    keys = ["gen_condition_id", "item_id", "epoch"] if stage == "grades" else ["item_id", "epoch"]
    return rows.take(pc.sort_indices(rows, [(k, "ascending") for k in keys]))


def _parquet(store: StudyStore, cid: str) -> pq.ParquetFile:
    """The partition's only fragment, opened."""
    (only,) = store.fragments("solutions", cid)
    data = store.partition("solutions", cid).join(only.name).read_bytes()
    return pq.ParquetFile(pa.BufferReader(data))


def test_large_fragments_are_merged_a_row_group_at_a_time(
    store: StudyStore, solution, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Row groups of 7 rows and every fragment "large": both passes read row group by row group,
    # and the winners of a fragment span several of its row groups.
    monkeypatch.setattr("itemeval.store._compact_merge.ROW_GROUP_ROWS", 7)
    monkeypatch.setattr("itemeval.store.fragments.ROW_GROUP_ROWS", 7)
    monkeypatch.setattr("itemeval.store._compact_merge.LARGE_BYTES", 1)
    store.write_solutions("c1", [solution(f"q{i:02d}", ok=i % 4 != 0, at=1) for i in range(30)])
    store.write_solutions(
        "c1", [solution(f"q{i:02d}", text="again", at=2) for i in range(0, 30, 4)]
    )
    store.write_solutions("c1", [solution(f"q{i:02d}", at=3) for i in range(30, 45)])
    logical = store.read_solutions(["c1"])
    result = compact_partition(store, "solutions", "c1")
    assert (result.fragments_read, result.rows_read, result.rows_written) == (3, 53, 45)
    assert _parquet(store, "c1").num_row_groups == 7  # 45 rows in groups of 7
    physical = _physical(store, "solutions", "c1")
    assert physical.select(logical.column_names).equals(logical)  # one row per key: the best


def test_rows_keep_the_order_they_were_written_in(store: StudyStore, solution) -> None:
    # A grade shard's solutions (one items part) lie together in the compacted fragment.
    store.write_solutions("c1", [solution(f"z{i}") for i in range(5)])
    store.write_solutions("c1", [solution(f"a{i}") for i in range(5)])
    compact_partition(store, "solutions", "c1")
    ids = _parquet(store, "c1").read(columns=["item_id"]).column("item_id").to_pylist()
    assert ids == [f"z{i}" for i in range(5)] + [f"a{i}" for i in range(5)]


@pytest.mark.parametrize("range_cells", [1 << 18, 3])
def test_the_streamed_summary_is_the_summary_format(
    store: StudyStore, grade, monkeypatch: pytest.MonkeyPatch, range_cells: int
) -> None:
    # Written a generate condition at a time (and a range of item ids at a time), it reads back
    # as `encode_summary` writes it: same cells in the same order, same fragments, spent,
    # groups and layout (gen-a and gen-b: every item with epochs 0 and 1; gen-c: not).
    monkeypatch.setattr("itemeval.store._compact_summary.SUMMARY_GROUP_ROWS", 4)
    monkeypatch.setattr("itemeval.store._compact_summary.RANGE_CELLS", range_cells)
    for gen in ("gen-b", "gen-a", "gen-c"):
        for part in range(2):
            rows = [
                grade(gen, f"q{i}", epoch, solution_hash="h", ok=(i + part) % 3 != 0)
                for i in range(part * 5, part * 5 + 9)
                for epoch in ((0,) if gen == "gen-c" and i % 4 else (0, 1))
            ]
            store.write_grades("judge", rows)
    compact_partition(store, "grades", "judge")
    partition = store.partition("grades", "judge")
    streamed = read_summary(partition, GRADES)
    assert streamed is not None
    streamed_summary = open_summary(partition, GRADES)
    assert streamed_summary is not None
    layout = streamed_summary.summary.layout
    assert [layout[g]["epochs"] for g in ("gen-a", "gen-b", "gen-c")] == [2, 2, None]
    expected = encode_summary(
        PartitionSummary(GRADES, streamed.cells, streamed.fragments, streamed.spent)
    )
    partition.join(SUMMARY_FILE).write_atomic(expected)
    reference = read_summary(partition, GRADES)
    assert reference is not None
    assert streamed.cells.equals(reference.cells)
    assert streamed.cells.equals(_sorted_cells(streamed.cells))
    assert streamed.groups is not None and streamed.groups.equals(reference.groups)
    written = open_summary(partition, GRADES)
    assert written is not None and layout == written.summary.layout
    assert (streamed.fragments, streamed.spent.equals(reference.spent)) == (
        reference.fragments,
        True,
    )


def _sorted_cells(cells: pa.Table) -> pa.Table:
    keys = ["gen_condition_id", "item_id", "epoch"]
    return cells.take(pc.sort_indices(cells, [(k, "ascending") for k in keys]))


@pytest.mark.parametrize("range_cells", [1 << 18, 2])
def test_a_grades_partition_compacts_one_condition_beside_the_others(
    store: StudyStore, grade, monkeypatch: pytest.MonkeyPatch, range_cells: int
) -> None:
    # Only gen-b gets new fragments: its unit is merged with its summary cells, the others'
    # cells are carried over from the summary (a range of item ids at a time with 2-cell
    # ranges); reads with and without it agree.
    monkeypatch.setattr("itemeval.store._compact_summary.RANGE_CELLS", range_cells)
    for gen in ("gen-a", "gen-b"):
        store.write_grades("judge", [grade(gen, f"q{i}", solution_hash="h") for i in range(6)])
    compact_partition(store, "grades", "judge")
    store.write_grades("judge", [grade("gen-b", "q0", solution_hash="h2")])
    store.write_grades("judge", [grade("gen-b", "q9", solution_hash="h")])
    result = compact_partition(store, "grades", "judge")
    assert result.fragments_read == 3 and len(result.fragments_written) == 1
    partition = store.partition("grades", "judge")
    monkeypatch.setenv(SUMMARIES_ENV, "on")
    used = read_cells(GRADES, partition)
    monkeypatch.setenv(SUMMARIES_ENV, "off")
    every = read_cells(GRADES, partition)
    assert used.summary_used and used.read_in_full == 0
    assert _sorted_cells(used.cells).equals(_sorted_cells(every.cells))
    assert used.cells.num_rows == 13


def test_a_stopped_compaction_leaves_the_partition_as_it_was(
    store: StudyStore, grade, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Asked to stop after it wrote one condition's fragment: it removes that fragment and
    # writes no summary; the partition reads as before and compacts later.
    monkeypatch.setattr("itemeval.store._compact_merge.BATCH_FRAGMENTS", 1)
    for gen in ("gen-a", "gen-b"):
        for _ in range(2):
            store.write_grades("judge", [grade(gen, f"q{i}", solution_hash="h") for i in range(4)])
    before = sorted(f.name for f in store.fragments("grades", "judge"))
    logical = store.read_grades(["judge"])
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 4  # pass 1 and 2 of the first unit, then stop

    result = compact_partition(store, "grades", "judge", stop=stop)
    assert result.stopped and result.fragment_written is None
    assert sorted(f.name for f in store.fragments("grades", "judge")) == before
    assert not store.partition("grades", "judge").join(SUMMARY_FILE).exists()
    assert store.read_grades(["judge"]).equals(logical)
    assert len(compact_partition(store, "grades", "judge").fragments_written) == 2
