"""Pending cells as masks agree exactly with the table forms (`pending_generate`,
`pending_grade`), and a solution index says where each solution is."""

from __future__ import annotations

import pyarrow as pa

from itemeval.store import (
    StudyStore,
    generate_pending,
    grade_pending,
    pending_generate,
    pending_grade,
    solution_index,
    text_hash,
)

ITEMS = pa.array(["q1", "q2", "q3", "q4"])


def _cells(masks, key) -> set[tuple[str, int]]:
    table = masks.cells(key)
    return set(zip(table["item_id"].to_pylist(), table["epoch"].to_pylist(), strict=True))


def test_generate_masks_match_the_table(store: StudyStore, solution) -> None:
    store.write_solutions(
        "c1", [solution("q1", 0), solution("q2", 1, ok=False), solution("q3", 1), solution("zz", 0)]
    )
    masks = generate_pending(store, ["c1", "c2"], ITEMS, 2)
    table = pending_generate(store, ["c1", "c2"], ITEMS, 2)
    assert masks.num_rows == table.num_rows == 8 - 2 + 8
    for cid in ("c1", "c2"):
        rows = table.filter(pa.compute.equal(table["condition_id"], cid))
        expected = set(zip(rows["item_id"].to_pylist(), rows["epoch"].to_pylist(), strict=True))
        assert _cells(masks, cid) == expected
    assert masks.per_item("c1").tolist() == [1, 2, 1, 2]
    assert _cells(masks, "c1") >= {("q2", 1)}  # an error row is still pending
    part = masks.cells("c2", 1, 3)
    assert part["item_id"].to_pylist() == ["q2", "q2", "q3", "q3"]
    assert generate_pending(store, ["c1"], ITEMS, 2, force=True).num_rows == 8


def test_grade_masks_match_the_table(store: StudyStore, solution, grade) -> None:
    store.write_solutions("gen", [solution(i, 0, text=f"t-{i}") for i in ("q1", "q2", "q3")])
    store.write_grades(
        "judge",
        [
            grade("gen", "q1", 0, solution_hash=text_hash("t-q1")),  # graded: done
            grade("gen", "q2", 0, solution_hash=text_hash("old text")),  # stale: pending
            grade("gen", "q3", 0, solution_hash=text_hash("t-q3"), ok=False),  # error: pending
        ],
    )
    masks = grade_pending(store, ["judge", "auto"], ["gen"], ITEMS, 1)
    table = pending_grade(store, ["judge", "auto"], ["gen"], item_ids=ITEMS)
    assert masks.num_rows == table.num_rows == 2 + 3
    assert _cells(masks, ("judge", "gen")) == {("q2", 0), ("q3", 0)}
    assert _cells(masks, ("auto", "gen")) == {("q1", 0), ("q2", 0), ("q3", 0)}
    assert grade_pending(store, ["judge"], ["gen"], ITEMS, 1, force=True).num_rows == 3


def test_solution_index_names_hashes_and_fragments(store: StudyStore, solution) -> None:
    first = store.write_solutions("gen", [solution("q3", 0, text="a"), solution("q1", 1, text="b")])
    second = store.write_solutions("gen", [solution("q2", 0, text="c")])
    index = solution_index(store, "gen", ITEMS, 2, fragment_names=True)
    assert index.positions.tolist() == [1, 2, 4]  # q1/1, q2/0, q3/0 as item * epochs + epoch
    assert index.hashes.to_pylist() == [text_hash("b"), text_hash("c"), text_hash("a")]
    assert index.fragments.to_pylist() == [first, second, first]
    assert index.rows_between(2, 4) == slice(1, 2)
