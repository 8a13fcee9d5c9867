"""Compaction: one deduplicated fragment per partition, safe beside writers and readers."""

from __future__ import annotations

import threading
import time

import pyarrow.compute as pc
import pytest

from itemeval.cli.main import main
from itemeval.store import StudyStore, compact
from itemeval.store._compact import compact_partition


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
