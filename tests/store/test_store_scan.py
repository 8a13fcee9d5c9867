"""Streamed reads (`StudyStore.scan`): batches in fragment order, no row missed while a
compaction rewrites the partition under the stream; and the pending sets, read from partition
cells: the same current solution as the store's rule (ties included), beside summaries, writers
and compactions."""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import pyarrow as pa
import pytest
from lifetimes import alive_at_each_call

import itemeval.store._pending as pending_module
import itemeval.store.fragments as fragments
from itemeval.store import StudyStore, pending_generate, pending_grade, solution_index, text_hash
from itemeval.store._compact import compact_partition
from itemeval.store._content_keys import hash_keys
from itemeval.store._pending import current_solution_keys
from itemeval.store._summary import SUMMARIES_ENV

COLUMNS = ["item_id", "epoch", "status"]


def test_scan_gives_fragments_in_order_in_batches(store: StudyStore, solution) -> None:
    for n in range(5):
        store.write_solutions("c1", [solution(f"q{n}-{j}") for j in range(2)])
    batches = list(store.scan("solutions", "c1", COLUMNS, batch_rows=3))
    assert [b.num_rows for b in batches] == [4, 4, 2]  # a batch closes at 3 rows or more
    ids = [i for b in batches for i in b.column("item_id").to_pylist()]
    assert ids == [f"q{n}-{j}" for n in range(5) for j in range(2)]
    assert list(store.scan("solutions", "absent", COLUMNS)) == []


def test_scan_reduces_each_batch_once(store: StudyStore, solution) -> None:
    """A run writes many small fragments: the stream reduces a batch at a time (one round of
    arrow compute calls per batch, not per fragment), with the rows a per-fragment reduce
    would give, in fragment order, ordinals included."""
    for n in range(6):
        store.write_solutions("c1", [solution(f"q{n}-{j}", ok=j != 1) for j in range(3)])
    calls: list[int] = []

    def ok_only(table: pa.Table) -> pa.Table:
        calls.append(table.num_rows)
        return pending_module.ok_rows(table)

    listed: list[str] = []
    batches = list(
        store.scan("solutions", "c1", COLUMNS, reduce=ok_only, batch_rows=9, fragment_names=listed)
    )
    assert calls == [9, 9]  # two batches of three fragments, each reduced once
    assert [b.num_rows for b in batches] == [6, 6]
    rows = pa.concat_tables(batches)
    assert rows.column("item_id").to_pylist() == [f"q{n}-{j}" for n in range(6) for j in (0, 2)]
    ordinals = rows.column(fragments.FRAGMENT_ORDINAL).to_pylist()
    assert ordinals == [n for n in range(6) for _ in "ab"]
    assert len(listed) == 6


@pytest.mark.parametrize(("cpus", "readers"), [(1, 2), (2, 2), (4, 4), (64, 8)])
def test_a_local_scan_reads_with_no_more_threads_than_cpus(
    store: StudyStore, solution, monkeypatch: pytest.MonkeyPatch, cpus: int, readers: int
) -> None:
    """Parsing a small fragment is CPU work: a local store is read by as many threads as the
    process has CPUs (at least 2, at most 8); an S3 store, which waits on the network, by 8."""
    for n in range(24):
        store.write_solutions("c1", [solution(f"q{n}")])
    monkeypatch.setattr(fragments.os, "sched_getaffinity", lambda _pid: set(range(cpus)))
    threads: set[int] = set()
    barrier = threading.Barrier(8, timeout=0.5)  # lets up to 8 readers be seen at once
    project = fragments._project

    def seen(*args, **kwargs):
        threads.add(threading.get_ident())
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()
        return project(*args, **kwargs)

    monkeypatch.setattr(fragments, "_project", seen)
    rows = sum(t.num_rows for t in store.scan("solutions", "c1", COLUMNS))
    assert rows == 24
    assert len(threads) == (readers if store.root.is_local else 8)


@pytest.fixture(params=["summaries", "every-row"])
def summaries(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Pending sets read partition cells: from summaries (half the partitions compacted), and
    from every row."""
    monkeypatch.setenv(SUMMARIES_ENV, "on" if request.param == "summaries" else "off")
    return str(request.param)


def _compact_some(store: StudyStore, stage: str, cid: str, summaries: str) -> None:
    if summaries == "summaries":
        compact_partition(store, stage, cid)


def test_current_solution_is_the_one_the_store_rule_picks(
    store: StudyStore, solution, summaries: str
) -> None:
    """Several `ok` rows per cell across fragments (and beside a summary): later `written_at`
    wins; on a tie the later fragment."""
    items = pa.array([f"q{i}" for i in range(6)])
    store.write_solutions(
        "gen", [solution(f"q{i}", e, text=f"a{i}{e}", at=5) for i in range(6) for e in (0, 1)]
    )
    store.write_solutions(
        "gen", [solution("q0", 0, text="newer", at=9), solution("q1", 1, text="older", at=1)]
    )
    _compact_some(store, "solutions", "gen", summaries)
    store.write_solutions(
        "gen", [solution("q2", 0, text="tie-later", at=5), solution("q3", 1, ok=False)]
    )
    store.write_solutions(
        "gen", [solution("q4", 0, text="tie-last", at=5), solution("q9", 0, at=99)]
    )
    current = current_solution_keys(store, "gen", items, 2)
    index = solution_index(store, "gen", items, 2)
    assert current.present.tolist() == [True] * 12
    assert current.keys[index.positions].tolist() == hash_keys(index.hashes).tolist()
    expected = {0: "newer", 3: "a11", 4: "tie-later", 8: "tie-last", 7: "a31"}
    for position, text in expected.items():
        assert current.keys[position] == hash_keys(pa.array([text_hash(text)]))[0], position


def test_grade_pending_checks_grades_against_the_current_solution(
    store: StudyStore, solution, grade, summaries: str
) -> None:
    items = ["a", "b", "c"]
    store.write_solutions("gen", [solution("a", text="A1", at=1), solution("b", text="B", at=1)])
    store.write_solutions("gen", [solution("a", text="A2", at=1)])  # tie: the later fragment
    store.write_grades("judge", [grade("gen", "a", solution_hash=text_hash("A1"))])
    _compact_some(store, "grades", "judge", summaries)
    store.write_grades("judge", [grade("gen", "b", solution_hash=text_hash("B"))])
    pending = pending_grade(store, ["judge"], ["gen"], items, 1)
    assert pending.cells(("judge", "gen"))["item_id"].to_pylist() == ["a"]
    store.write_grades("judge", [grade("gen", "a", solution_hash=text_hash("A2"))])
    assert pending_grade(store, ["judge"], ["gen"], items, 1).num_rows == 0


def test_grade_pending_of_several_conditions_and_graders(
    store: StudyStore, solution, grade, summaries: str
) -> None:
    """Two generate and two grade conditions; a few cells graded (the current solution or an
    earlier one), most not graded at all: only the first are done."""
    items = [f"q{i}" for i in range(8)]
    for gen in ("g1", "g2"):
        store.write_solutions(gen, [solution(i, text=f"{gen}{i}", at=1) for i in items])
        _compact_some(store, "solutions", gen, summaries)
        store.write_solutions(
            gen, [solution("q1", text=f"{gen}-new", at=2), solution("q2", ok=False)]
        )
    store.write_grades(
        "judge",
        [
            grade("g1", "q0", solution_hash=text_hash("g1q0")),
            grade("g2", "q0", solution_hash=text_hash("g2q0")),
            grade("g1", "q1", solution_hash=text_hash("g1q1")),  # an earlier solution's
            grade("g1", "q9", solution_hash=text_hash("g1q9")),  # not a selected item
        ],
    )
    _compact_some(store, "grades", "judge", summaries)
    store.write_grades(
        "scorer",
        [
            grade("g2", "q3", solution_hash=text_hash("g2q3")),
            grade("g2", "q1", solution_hash=text_hash("g2-new")),
            grade("g2", "q4", solution_hash=text_hash("g1q4")),  # the other condition's text
        ],
    )
    pending = pending_grade(store, ["judge", "scorer"], ["g1", "g2"], items, 1)
    left = {key: set(pending.cells(key)["item_id"].to_pylist()) for key in pending.masks}
    assert list(left) == [("judge", "g1"), ("judge", "g2"), ("scorer", "g1"), ("scorer", "g2")]
    assert left[("judge", "g1")] == set(items) - {"q0"}
    assert left[("judge", "g2")] == set(items) - {"q0"}
    assert left[("scorer", "g1")] == set(items)
    assert left[("scorer", "g2")] == set(items) - {"q1", "q3"}


def test_grade_pending_beside_a_compaction_and_a_writer(
    store: StudyStore, solution, grade, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grades partition compacted, and a grade written, after the first generate
    condition's grades were read and before the second's: each condition's set is what the
    store held when it was read."""
    items = ["q0", "q1", "q2"]
    for gen in ("g1", "g2"):
        store.write_solutions(gen, [solution(i, text=f"{gen}{i}") for i in items])
    store.write_grades("judge", [grade("g1", "q0", solution_hash=text_hash("g1q0"))])
    store.write_grades("judge", [grade("g2", "q1", solution_hash=text_hash("g2q1"))])
    store.write_grades("judge", [grade("g1", "q2", solution_hash=text_hash("g1q2"), ok=False)])
    real_keys = pending_module.current_solution_keys
    done: list[str] = []

    def meanwhile(store_, gen, *args, **kwargs):
        if gen == "g2" and not done:
            compact_partition(store, "grades", "judge")
            store.write_grades("judge", [grade("g2", "q2", solution_hash=text_hash("g2q2"))])
            done.append(gen)
        return real_keys(store_, gen, *args, **kwargs)

    monkeypatch.setattr(pending_module, "current_solution_keys", meanwhile)
    pending = pending_grade(store, ["judge"], ["g1", "g2"], items, 1)
    left = {key: set(pending.cells(key)["item_id"].to_pylist()) for key in pending.masks}
    assert left == {("judge", "g1"): {"q1", "q2"}, ("judge", "g2"): {"q0"}}


def test_grade_pending_holds_one_conditions_keys_at_a_time(
    store: StudyStore, solution, grade, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A condition's solution keys (8 bytes a cell) are garbage before the next condition's
    are folded: with twenty models, twenty sets of keys at once would be the grade stage's
    peak."""
    items = ["q0", "q1"]
    gens = ["g1", "g2", "g3"]
    for gen in gens:
        store.write_solutions(gen, [solution(i, text=f"{gen}{i}") for i in items])
        store.write_grades("judge", [grade(gen, "q0", solution_hash=text_hash(f"{gen}q0"))])
    alive_at_each_fold = alive_at_each_call(monkeypatch, pending_module, "current_solution_keys")
    pending = pending_grade(store, ["judge"], gens, items, 1)
    assert alive_at_each_fold == [0, 0, 0]
    assert {key: pending.count(key) for key in pending.masks} == {("judge", g): 1 for g in gens}


def test_a_stream_misses_no_row_while_the_partition_is_compacted(
    store: StudyStore, solution, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fragments, "SCAN_BATCH_ROWS", 7)
    items = [f"k{i:03d}" for i in range(150)]
    for start in range(0, len(items), 10):
        store.write_solutions("c1", [solution(k) for k in items[start : start + 10]])
    problems: list[str] = []
    scans: list[int] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set() or len(scans) < 3:
                left = pending_generate(store, ["c1"], items, 1, unique_ids=True).num_rows
                present = current_solution_keys(store, "c1", pa.array(items), 1).present
                if left or not bool(np.all(present)):
                    problems.append(f"{left} cells pending, {int((~present).sum())} absent")
                scans.append(left)
        except Exception as exc:  # pragma: no cover - reported by the assertion below
            problems.append(repr(exc))

    thread = threading.Thread(target=reader)
    thread.start()
    for n in range(12):  # more fragments to merge, then merge them, under the reader
        store.write_solutions("c1", [solution(items[n], text=f"again {n}")])
        compact_partition(store, "solutions", "c1")
    stop.set()
    thread.join(timeout=120)
    assert not problems, problems[:5]
    assert len(scans) >= 3


def test_a_stream_reads_again_when_what_it_listed_was_compacted(
    store: StudyStore, solution, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic: the partition is compacted right after the stream's first listing, so
    every fragment it listed is gone when it reads; the compacted file still gives every row."""
    items = [f"k{i:02d}" for i in range(30)]
    for start in range(0, len(items), 10):
        store.write_solutions("c1", [solution(k) for k in items[start : start + 10]])
    listings: list[int] = []
    real_list = fragments.list_fragments

    def list_then_compact(partition):  # type: ignore[no-untyped-def]
        listed = real_list(partition)
        listings.append(len(listed))
        if len(listings) == 1:
            compact_partition(store, "solutions", "c1")
        return listed

    monkeypatch.setattr(fragments, "list_fragments", list_then_compact)
    assert pending_generate(store, ["c1"], items, 1, unique_ids=True).num_rows == 0
    assert listings[0] == 3 and len(listings) >= 2  # listed again after the compaction
