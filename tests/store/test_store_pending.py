"""Resume sets: which generate and grade cells are still pending, and `--force`."""

from __future__ import annotations

import pyarrow as pa
import pytest

from itemeval.errors import InputError
from itemeval.store import (
    GENERATE_CELL_SCHEMA,
    StudyStore,
    pending_generate,
    pending_grade,
    text_hash,
)

ITEMS = pa.array(["q1", "q2", "q3"])


def _cells(table: pa.Table) -> list[tuple]:
    return [tuple(row.values()) for row in table.to_pylist()]


def test_empty_store_everything_pending(store: StudyStore) -> None:
    pending = pending_generate(store, ["c1", "c2"], ITEMS, 2)
    assert pending.schema.equals(GENERATE_CELL_SCHEMA)
    assert pending.num_rows == 12
    assert _cells(pending)[:3] == [("c1", "q1", 0), ("c1", "q1", 1), ("c1", "q2", 0)]


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
    assert _cells(pending) == [("c1", "q1", 1), ("c1", "q2", 1), ("c1", "q3", 0)]
    # An ok row followed by an error row stays done (ok beats error).
    store.write_solutions("c1", [solution("q1", 0, ok=False)])
    assert _cells(pending_generate(store, ["c1"], ITEMS, 2)) == _cells(pending)


def test_force_selects_everything(store: StudyStore, solution) -> None:
    store.write_solutions("c1", [solution(i, e) for i in ("q1", "q2", "q3") for e in (0, 1)])
    assert pending_generate(store, ["c1"], ITEMS, 2).num_rows == 0
    assert pending_generate(store, ["c1"], ITEMS, 2, force=True).num_rows == 6


def test_item_ids_must_be_unique(store: StudyStore) -> None:
    with pytest.raises(InputError, match="not unique"):
        pending_generate(store, ["c1"], ["q1", "q1"], 1)
    with pytest.raises(InputError, match="epochs"):
        pending_generate(store, ["c1"], ITEMS, 0)


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
    pending = pending_grade(store, ["judge"], ["gen"])
    assert _cells(pending) == [
        ("judge", "gen", "c", 0, text_hash("C")),
        ("judge", "gen", "d", 0, text_hash("D-new")),
        ("judge", "gen", "e", 0, text_hash("E")),
    ]
    # A second grade condition has graded nothing yet: every ok solution is pending.
    both = pending_grade(store, ["judge", "scorer"], ["gen"])
    assert both.filter(pa.compute.equal(both["grade_condition_id"], "scorer")).num_rows == 5
    # --force re-grades every ok solution, parse failures included.
    assert pending_grade(store, ["judge"], ["gen"], force=True).num_rows == 5
    # Narrowed to some items.
    narrowed = pending_grade(store, ["judge"], ["gen"], item_ids=pa.array(["a", "e"]))
    assert narrowed.column("item_id").to_pylist() == ["e"]


def test_grade_follows_the_current_solution(store: StudyStore, solution, grade) -> None:
    store.write_solutions("gen", [solution("a", text="first", at=1)])
    store.write_grades("judge", [grade("gen", "a", solution_hash=text_hash("first"))])
    assert pending_grade(store, ["judge"], ["gen"]).num_rows == 0
    # A forced re-generation produced a different text: its grade is pending again.
    store.write_solutions("gen", [solution("a", text="second", at=2)])
    pending = pending_grade(store, ["judge"], ["gen"])
    assert pending.column("solution_hash").to_pylist() == [text_hash("second")]


def test_grade_cells_name_the_fragment_holding_their_solution(store: StudyStore, solution) -> None:
    first = store.write_solutions("c1", [solution("q1", 0), solution("q2", 0, ok=False)])
    second = store.write_solutions("c1", [solution("q2", 0), solution("q3", 0)])
    cells = pending_grade(store, ["g1"], ["c1"], fragment_names=True)
    where = {row["item_id"]: row["fragment"] for row in cells.to_pylist()}
    assert where == {"q1": first, "q2": second, "q3": second}
    plain = pending_grade(store, ["g1"], ["c1"])
    assert "fragment" not in plain.column_names
    assert plain.num_rows == cells.num_rows
