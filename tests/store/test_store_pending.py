"""Resume sets: which generate and grade cells are still pending (as masks over the items),
`--force`, and where each solution is (the fragment a grading worker reads)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import itemeval.store._content_keys as content_keys
from itemeval.errors import InputError
from itemeval.store import (
    StudyStore,
    compact,
    pending_generate,
    pending_grade,
    solution_index,
    text_hash,
)
from itemeval.store._pending import GENERATE_CELL_SCHEMA, GRADE_CELL_SCHEMA

ITEMS = pa.array(["q1", "q2", "q3"])
GRADED = pa.array(["a", "b", "c", "d", "e", "f"])


def _cells(table: pa.Table) -> list[tuple]:
    return [tuple(row.values()) for row in table.to_pylist()]


def _of(masks, key) -> set[tuple[str, int]]:
    table = masks.cells(key)
    return set(zip(table["item_id"].to_pylist(), table["epoch"].to_pylist(), strict=True))


def test_empty_store_everything_pending(store: StudyStore) -> None:
    pending = pending_generate(store, ["c1", "c2"], ITEMS, 2)
    assert pending.num_rows == 12
    table = pending.to_table()
    assert table.schema.equals(GENERATE_CELL_SCHEMA)
    assert _cells(table)[:3] == [("c1", "q1", 0), ("c1", "q1", 1), ("c1", "q2", 0)]
    assert pending.per_item("c1").tolist() == [2, 2, 2]


def test_missing_and_errored_cells_are_pending(store: StudyStore, solution) -> None:
    store.write_solutions(
        "c1",
        [
            solution("q1", 0),
            solution("q1", 1, ok=False),
            solution("q2", 0, ok=False),
            solution("q2", 0),  # the retry succeeded: done
            solution("q3", 1),
            solution("other-item", 0),  # not in this run's items: ignored
            solution("q3", 5),  # beyond the epochs asked for: ignored
        ],
    )
    pending = pending_generate(store, ["c1"], ITEMS, 2)
    assert _cells(pending.to_table()) == [("c1", "q1", 1), ("c1", "q2", 1), ("c1", "q3", 0)]
    assert pending.per_item("c1").tolist() == [1, 1, 1]
    part = pending.cells("c1", 1, 3)  # a shard's slice: items 1 and 2
    assert part["item_id"].to_pylist() == ["q2", "q3"] and part["epoch"].to_pylist() == [1, 0]
    # An ok row followed by an error row stays done (ok beats error).
    store.write_solutions("c1", [solution("q1", 0, ok=False)])
    again = pending_generate(store, ["c1"], ITEMS, 2)
    assert _cells(again.to_table()) == _cells(pending.to_table())


def test_force_selects_everything(store: StudyStore, solution) -> None:
    store.write_solutions("c1", [solution(i, e) for i in ("q1", "q2", "q3") for e in (0, 1)])
    assert pending_generate(store, ["c1"], ITEMS, 2).num_rows == 0
    assert pending_generate(store, ["c1"], ITEMS, 2, force=True).num_rows == 6


def test_item_ids_must_be_unique(store: StudyStore) -> None:
    with pytest.raises(InputError, match="not unique"):
        pending_generate(store, ["c1"], ["q1", "q1"], 1)
    with pytest.raises(InputError, match="epochs"):
        pending_generate(store, ["c1"], ITEMS, 0)
    with pytest.raises(InputError, match="not unique"):
        pending_grade(store, ["g"], ["c1"], ["q1", "q1"], 1)


def test_grade_pending_rules(store: StudyStore, solution, grade) -> None:
    store.write_solutions(
        "gen",
        [
            solution("a", text="A"),  # graded ok: done
            solution("b", text="B"),  # judge parse failure: final
            solution("c", text="C"),  # provider error on the grade: pending
            solution("d", text="D-new"),  # graded, but the text changed since: pending
            solution("e", text="E"),  # never graded: pending
            solution("f", ok=False),  # no solution to grade
        ],
    )
    store.write_grades(
        "judge",
        [
            grade("gen", "a", solution_hash=text_hash("A")),
            grade("gen", "b", solution_hash=text_hash("B"), parse_ok=False),
            grade("gen", "c", solution_hash=text_hash("C"), ok=False),
            grade("gen", "d", solution_hash=text_hash("D-old")),
            grade("other-gen", "e", solution_hash=text_hash("E")),  # another gen condition
        ],
    )
    pending = pending_grade(store, ["judge"], ["gen"], GRADED, 1)
    table = pending.to_table()
    assert table.schema.equals(GRADE_CELL_SCHEMA)
    assert _cells(table) == [
        ("judge", "gen", "c", 0),
        ("judge", "gen", "d", 0),
        ("judge", "gen", "e", 0),
    ]
    # A second grade condition has graded nothing yet: every ok solution is pending.
    both = pending_grade(store, ["judge", "scorer"], ["gen"], GRADED, 1)
    assert both.count(("scorer", "gen")) == 5 and both.count(("judge", "gen")) == 3
    # --force re-grades every ok solution, parse failures included.
    assert pending_grade(store, ["judge"], ["gen"], GRADED, 1, force=True).num_rows == 5
    # Narrowed to some items.
    narrowed = pending_grade(store, ["judge"], ["gen"], ["a", "e"], 1)
    assert narrowed.to_table().column("item_id").to_pylist() == ["e"]


def test_grade_follows_the_current_solution(store: StudyStore, solution, grade) -> None:
    items = ["a"]
    store.write_solutions("gen", [solution("a", text="first", at=1)])
    store.write_grades("judge", [grade("gen", "a", solution_hash=text_hash("first"))])
    assert pending_grade(store, ["judge"], ["gen"], items, 1).num_rows == 0
    # A forced re-generation produced a different text: its grade is pending again.
    store.write_solutions("gen", [solution("a", text="second", at=2)])
    assert _of(pending_grade(store, ["judge"], ["gen"], items, 1), ("judge", "gen")) == {("a", 0)}
    index = solution_index(store, "gen", pa.array(items), 1)
    assert index.hashes.to_pylist() == [text_hash("second")]


def test_solution_index_names_hashes_and_fragments(store: StudyStore, solution) -> None:
    items = pa.array(["q1", "q2", "q3", "q4"])
    first = store.write_solutions("gen", [solution("q3", 0, text="a"), solution("q1", 1, text="b")])
    second = store.write_solutions("gen", [solution("q2", 0, text="c")])
    index = solution_index(store, "gen", items, 2, fragment_names=True)
    assert index.positions.tolist() == [1, 2, 4]  # q1/1, q2/0, q3/0 as item * epochs + epoch
    assert index.hashes.to_pylist() == [text_hash("b"), text_hash("c"), text_hash("a")]
    assert index.fragments.to_pylist() == [first, second, first]
    assert index.rows_between(2, 4) == slice(1, 2)
    assert solution_index(store, "gen", items, 2).fragments is None


@pytest.mark.parametrize("setting", ["on", "off"])
def test_the_solution_index_is_the_store_rule_with_and_without_summaries(
    store: StudyStore, solution, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    """Several `ok` rows per cell across fragments (a later `written_at`, a tie between
    fragments, an error row after an `ok` one), some summarised: the index names the hash and
    fragment of the row the store's rule picks, the same with its summary and without."""
    items = pa.array([f"q{i}" for i in range(5)] + ["unused"])
    store.write_solutions(
        "gen", [solution(f"q{i}", e, text=f"a{i}{e}", at=5) for i in range(5) for e in (0, 1)]
    )
    store.write_solutions(
        "gen", [solution("q0", 0, text="newer", at=9), solution("q1", 1, text="older", at=1)]
    )
    compact(store, ["solutions"])
    (compacted,) = [f.name for f in store.fragments("solutions", "gen")]
    tie = store.write_solutions(
        "gen", [solution("q2", 0, text="tie", at=5), solution("q3", 1, ok=False, at=99)]
    )
    store.write_solutions("gen", [solution("q9", 0, text="not selected")])
    monkeypatch.setenv("ITEMEVAL_SUMMARIES", setting)
    index = solution_index(store, "gen", items, 2, fragment_names=True)
    assert index.positions.tolist() == list(range(10))
    assert index.hashes[0].as_py() == text_hash("newer")
    assert index.hashes[3].as_py() == text_hash("a11")  # the older row lost
    assert index.hashes[4].as_py() == text_hash("tie")
    assert index.hashes[7].as_py() == text_hash("a31")  # an error does not beat it
    assert index.fragments.to_pylist() == [compacted] * 4 + [tie] + [compacted] * 5


def test_only_the_stores_own_hashes_are_rebuilt_from_their_keys() -> None:
    # Other texts (an older store's 64-digit hashes, capitals) make the index read whole.
    assert content_keys.are_key_texts(pa.array(["0123456789abcdef", "ffffffffffffffff"]))
    for texts in (["0123456789ABCDEF"], ["0123456789abcdef" * 4], ["0123456789abcdeg"], [None]):
        assert not content_keys.are_key_texts(pa.array(texts, pa.string())), texts
    keys = np.array([0, 1, 2**64 - 1], dtype=np.uint64)
    assert content_keys.key_texts(keys).to_pylist() == [
        "0000000000000000",
        "0000000000000001",
        "ffffffffffffffff",
    ]


def test_a_summary_that_counts_every_cell_ok_answers_without_reading_cells(
    store: StudyStore, solution, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every selected cell `ok` in a compacted partition (every item, 3 epochs where 2 are
    asked): nothing pending, from the summary's footer alone; an error cell, a newer fragment or
    another selection of items, and the cells are read (and agree with every row read)."""
    import itemeval.store._pending as pending_module

    real = pending_module.read_cells
    reads: list[str] = []

    def counted(*args, **kwargs):
        reads.append("read")
        return real(*args, **kwargs)

    monkeypatch.setattr(pending_module, "read_cells", counted)
    store.write_solutions("c1", [solution(i, e) for i in ("q1", "q2", "q3") for e in range(3)])
    store.write_solutions("c2", [solution(i, e) for i in ("q1", "q2", "q3") for e in range(3)])
    store.write_solutions("c2", [solution("q2", 1, ok=False, at=99)])  # ok beats error: done
    cells = [(i, e) for i in ("q1", "q2", "q3") for e in range(2)]
    store.write_solutions("c3", [solution(i, e) for i, e in cells if (i, e) != ("q3", 1)])
    store.write_solutions("c3", [solution("q3", 1, ok=False)])  # only an error: pending
    compact(store, ["solutions"])
    assert pending_generate(store, ["c1", "c2"], ITEMS, 2).num_rows == 0
    assert reads == []  # both from their footers
    c3 = pending_generate(store, ["c3"], ITEMS, 2)
    assert reads == ["read"] and _cells(c3.to_table()) == [("c3", "q3", 1)]
    monkeypatch.setenv("ITEMEVAL_SUMMARIES", "off")
    assert _cells(c3.to_table()) == _cells(pending_generate(store, ["c3"], ITEMS, 2).to_table())
    monkeypatch.delenv("ITEMEVAL_SUMMARIES")
    assert pending_generate(store, ["c1"], pa.array(["q1", "q2"]), 2).num_rows == 0
    assert reads == ["read"] * 3  # other items: the summary's layout is not theirs
    store.write_solutions("c1", [solution("q1", 0, ok=False, at=99)])
    assert pending_generate(store, ["c1"], ITEMS, 2).num_rows == 0
    assert reads == ["read"] * 4  # a fragment newer than the summary: read
