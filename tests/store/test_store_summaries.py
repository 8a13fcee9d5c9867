"""Partition summaries: derived, exact beside new fragments, compaction and crashes.

The physical truth every test compares with is the store's rows read without a summary
(`ITEMEVAL_SUMMARIES=off`: every fragment, deduplicated by the store's rule)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from itemeval.store import GRADES, SOLUTIONS, StudyStore
from itemeval.store._compact import SMALL_ROWS, compact_partition
from itemeval.store._summary import SUMMARIES_ENV, read_cells, read_groups
from itemeval.store._summary_file import SUMMARY_FILE, read_summary


def _sorted(stage: Any, table: pa.Table) -> pa.Table:
    return table.take(pc.sort_indices(table, [(k, "ascending") for k in stage.keys]))


def both_ways(
    store: StudyStore, stage: Any, cid: str, monkeypatch: pytest.MonkeyPatch, **kwargs: Any
) -> tuple[Any, Any]:
    """The partition read with its summary and without (every row)."""
    partition = store.partition(stage, cid)
    monkeypatch.setenv(SUMMARIES_ENV, "on")
    with_summary = read_cells(stage, partition, **kwargs)
    monkeypatch.setenv(SUMMARIES_ENV, "off")
    every_row = read_cells(stage, partition, **kwargs)
    monkeypatch.delenv(SUMMARIES_ENV)
    return with_summary, every_row


def assert_same(stage: Any, a: Any, b: Any) -> None:
    assert _sorted(stage, a.cells).equals(_sorted(stage, b.cells))
    assert a.spent.equals(b.spent)


def test_summary_and_newer_fragments_read_as_every_row(
    store: StudyStore, solution: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store.write_solutions("c1", [solution(f"q{i}", ok=i % 3 != 0, at=1) for i in range(30)])
    store.write_solutions("c1", [solution(f"q{i}", text="second", at=2) for i in range(0, 30, 3)])
    compact_partition(store, SOLUTIONS, "c1")
    summary = read_summary(store.partition(SOLUTIONS, "c1"), SOLUTIONS)
    assert summary is not None and summary.cells.num_rows == 30
    # After the summary: a retried error, a re-run of an ok cell (a later text wins), a new
    # cell, and an error that must not beat an ok row.
    store.write_solutions(
        "c1",
        [
            solution("q1", text="forced", at=5),
            solution("q30", at=5),
            solution("q2", ok=False, at=6),
        ],
    )
    used, every = both_ways(store, SOLUTIONS, "c1", monkeypatch)
    assert used.summary_used and used.read_in_full == 1 and used.fragments == 2
    assert not every.summary_used and every.read_in_full == 2
    assert_same(SOLUTIONS, used, every)
    cells = _sorted(SOLUTIONS, used.cells)
    assert cells.num_rows == 31
    assert pc.all(cells.column("ok")).as_py()


def test_superseded_rows_stay_counted_after_compaction(
    store: StudyStore, solution: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store.write_solutions("c1", [solution("q1", ok=False, at=1, usd=0.25)])
    store.write_solutions("c1", [solution("q1", at=2, usd=0.5), solution("q2", at=2, usd=1.0)])
    before = read_cells(SOLUTIONS, store.partition(SOLUTIONS, "c1"))
    assert before.spent.column("usd").to_pylist() == [1.75]
    compact_partition(store, SOLUTIONS, "c1")
    assert len(store.fragments(SOLUTIONS, "c1")) == 1  # the error row is gone from the rows
    used, every = both_ways(store, SOLUTIONS, "c1", monkeypatch)
    assert_same(SOLUTIONS, used, every)
    assert used.spent.column("usd").to_pylist() == [1.75]  # ... but not from what was paid
    assert used.read_in_full == 0
    # Compacting the compacted file with newer ones carries the count on.
    store.write_solutions("c1", [solution("q2", at=3, usd=2.0)])
    compact_partition(store, SOLUTIONS, "c1", full=True)
    used, every = both_ways(store, SOLUTIONS, "c1", monkeypatch)
    assert_same(SOLUTIONS, used, every)
    assert used.spent.column("usd").to_pylist() == [3.75]


def test_groups_come_from_the_footer_when_nothing_is_newer(
    store: StudyStore,
    solution: Callable[..., dict[str, Any]],
    grade: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [solution(f"q{i}", ok=i % 4 != 0, cached=i % 5 == 0) for i in range(40)]
    store.write_solutions("c1", rows[:20])
    store.write_solutions("c1", rows[20:])
    for gen in ("gen-a", "gen-b"):
        store.write_grades(
            "judge",
            [grade(gen, f"q{i}", solution_hash="h", parse_ok=i % 6 != 0) for i in range(12)],
        )
    for stage, cid in ((SOLUTIONS, "c1"), (GRADES, "judge")):
        partition = store.partition(stage, cid)
        monkeypatch.setenv(SUMMARIES_ENV, "off")
        expected = read_groups(stage, partition)
        monkeypatch.delenv(SUMMARIES_ENV)
        compact_partition(store, stage, cid)
        fast = read_groups(stage, partition)
        assert fast.summary_used and fast.read_in_full == 0
        assert fast.groups.equals(expected.groups)
        assert fast.spent.equals(expected.spent)
    one = read_groups(GRADES, store.partition(GRADES, "judge"), generate=["gen-b"])
    assert set(one.groups.column("gen_condition_id").to_pylist()) == {"gen-b"}


def test_a_stale_or_damaged_summary_is_not_used(
    store: StudyStore, solution: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        store.write_solutions("c1", [solution(f"q{i}")])
    partition = store.partition(SOLUTIONS, "c1")
    compact_partition(store, SOLUTIONS, "c1")
    kept = partition.join(SUMMARY_FILE).read_bytes()
    store.write_solutions("c1", [solution("q9")])
    compact_partition(store, SOLUTIONS, "c1")  # merges the small fragments: q9's is gone
    partition.join(SUMMARY_FILE).write_atomic(kept)  # a summary naming a vanished fragment
    used, every = both_ways(store, SOLUTIONS, "c1", monkeypatch)
    assert not used.summary_used
    assert_same(SOLUTIONS, used, every)
    partition.join(SUMMARY_FILE).write_atomic(b"not parquet")
    used, every = both_ways(store, SOLUTIONS, "c1", monkeypatch)
    assert not used.summary_used and used.cells.num_rows == 4
    assert_same(SOLUTIONS, used, every)


def test_compaction_merges_small_fragments_and_leaves_large_ones(
    store: StudyStore, solution: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("itemeval.store._compact.SMALL_ROWS", 10)
    store.write_solutions("c1", [solution(f"q{i}") for i in range(20)])
    store.write_solutions("c1", [solution(f"q{i}") for i in range(20, 40)])
    first = compact_partition(store, SOLUTIONS, "c1")
    assert first.fragments_read == 2  # no summary yet: everything
    (large,) = store.fragments(SOLUTIONS, "c1")
    for i in range(3):
        store.write_solutions("c1", [solution(f"n{i}")])
    second = compact_partition(store, SOLUTIONS, "c1")
    assert second.fragments_read == 3 and second.rows_read == 3
    names = [f.name for f in store.fragments(SOLUTIONS, "c1")]
    assert large.name in names and len(names) == 2
    used, every = both_ways(store, SOLUTIONS, "c1", monkeypatch)
    assert_same(SOLUTIONS, used, every)
    assert used.cells.num_rows == 43
    assert SMALL_ROWS >= 10_000  # the default keeps a run's fragments small


def test_grades_compact_into_one_fragment_per_generate_condition(
    store: StudyStore, grade: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for gen in ("gen-a", "gen-b", "gen-c"):
        for part in range(2):
            rows = [grade(gen, f"q{i}", solution_hash="h") for i in range(part * 5, part * 5 + 8)]
            store.write_grades("judge", rows)
    result = compact_partition(store, GRADES, "judge")
    assert len(result.fragments_written) == 3 and result.rows_written == 3 * 13
    used, every = both_ways(store, GRADES, "judge", monkeypatch)
    assert_same(GRADES, used, every)
    one, one_every = both_ways(store, GRADES, "judge", monkeypatch, generate=["gen-b"])
    assert_same(GRADES, one, one_every)
    assert set(one.cells.column("gen_condition_id").to_pylist()) == {"gen-b"}


_KILLED_COMPACTION = textwrap.dedent(
    """
    import os, signal, sys
    from itemeval.store import StudyStore
    from itemeval.store import _compact

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    # The compacted fragment is written; the writer dies before the summary that covers it.
    _compact.write_summary = die
    _compact.compact_partition(StudyStore.open(sys.argv[1]), "solutions", "c1")
    """
)


@pytest.mark.parametrize("root_url", ["local"], indirect=True)
def test_a_writer_killed_between_fragment_and_summary_loses_no_count(
    store: StudyStore, solution: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(4):
        store.write_solutions(
            "c1", [solution(f"q{j}", ok=(i + j) % 3 != 0, at=i, usd=0.1) for j in range(25)]
        )
    compact_partition(store, SOLUTIONS, "c1")  # a summary of the four
    store.write_solutions("c1", [solution(f"q{j}", at=9, usd=0.2) for j in range(0, 30, 2)])
    store.write_solutions("c1", [solution("q99", ok=False, at=9, usd=0.3)])
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_COMPACTION, store.root.url], env=env, timeout=120
    )
    assert done.returncode == -signal.SIGKILL
    # The killed compaction wrote its fragment (not covered by any summary) and deleted nothing.
    assert len(store.fragments(SOLUTIONS, "c1")) == 4
    raw = store.read_solutions(["c1"], dedup=False)
    # q0..q24, q26, q28 and q99: the killed compaction's fragment holds their best rows again.
    assert raw.num_rows == 25 + 15 + 1 + 28
    used, every = both_ways(store, SOLUTIONS, "c1", monkeypatch)
    # The summary's cost would count the killed compaction's copy again: the reader sees the
    # fragment that merged a covered one and counts from every row instead.
    assert not used.summary_used and used.read_in_full == 4
    assert_same(SOLUTIONS, used, every)
    cells = used.cells
    assert cells.num_rows == 28
    ok = int(pc.sum(cells.column("ok")).as_py())
    truth = store.read_solutions(["c1"])  # the store's own dedup of every row
    assert ok == int(pc.sum(pc.equal(truth.column("status"), "ok")).as_py())
    # What was paid: every physical row, the compacted copy not counted twice.
    assert used.spent.column("usd").to_pylist() == [pytest.approx(4 * 25 * 0.1 + 15 * 0.2 + 0.3)]
    # The next compaction repairs it: one covered fragment, the same cells.
    compact_partition(store, SOLUTIONS, "c1")
    again, every = both_ways(store, SOLUTIONS, "c1", monkeypatch)
    assert again.summary_used and again.read_in_full == 0
    assert_same(SOLUTIONS, again, every)
    assert (
        _sorted(SOLUTIONS, again.cells)
        .select(["item_id", "epoch", "ok"])
        .equals(_sorted(SOLUTIONS, cells).select(["item_id", "epoch", "ok"]))
    )


def test_a_summary_of_every_selected_cell_places_them_without_reading_an_id(
    store: StudyStore, solution: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cells that are every selected item's, with epochs 0 and 1 each: the summary's layout
    says so, and a reader given the selection gets each row's item position (the same as a
    look-up of its id) and the same cells; another selection, or a newer fragment, is read the
    plain way."""
    from itemeval.store import ItemLookup

    ids = [f"q{i}" for i in (4, 0, 3, 1, 2)]
    store.write_solutions("c1", [solution(i, e, at=1) for i in ids for e in (0, 1)])
    store.write_solutions("c1", [solution("q3", 1, text="again", at=2)])
    compact_partition(store, SOLUTIONS, "c1")
    partition = store.partition(SOLUTIONS, "c1")
    lookup = ItemLookup(pa.array(ids))
    placed = read_cells(SOLUTIONS, partition, ["item_id", "epoch", "text_hash"], items=lookup)
    assert placed.item_positions is not None
    plain = read_cells(SOLUTIONS, partition, ["item_id", "epoch", "text_hash"])
    assert placed.cells.equals(plain.cells)
    assert placed.item_positions.tolist() == lookup.positions(plain.cells["item_id"]).tolist()
    other = ItemLookup(pa.array([*ids, "q9"]))
    assert read_cells(SOLUTIONS, partition, ["epoch"], items=other).item_positions is None
    store.write_solutions("c1", [solution("q0", 0, text="newer", at=3)])
    assert read_cells(SOLUTIONS, partition, ["epoch"], items=lookup).item_positions is None
