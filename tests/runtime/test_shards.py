"""Shards: cut at items-snapshot parts, conditions interleaved, every pending cell exactly
once, made lazily; grade shards name the fragment holding each solution."""

from __future__ import annotations

import pyarrow as pa
from lifetimes import alive_at_each_call

from itemeval.planning._item_index import ITEM_INDEX_SCHEMA, part_runs
from itemeval.runtime import _shards as shards_module
from itemeval.runtime._shards import BARRIER, generate_shards, grade_shards
from itemeval.store import StudyStore, pending_generate, pending_grade


def _index(rows: list[tuple[str, str, int]]) -> pa.Table:
    ids, datasets, parts = zip(*rows, strict=True)
    table = pa.table(
        {
            "item_id": list(ids),
            "dataset": pa.array(datasets).dictionary_encode(),
            "fingerprint": pa.array([f"fp-{d}" for d in datasets]).dictionary_encode(),
            "part": pa.array(parts, pa.int32()),
        }
    )
    return table.cast(ITEM_INDEX_SCHEMA)


INDEX = _index([("a1", "a", 0), ("a2", "a", 0), ("a3", "a", 1), ("b1", "b", 0), ("b2", "b", 0)])


def test_part_runs_cut_where_dataset_or_part_changes():
    runs = part_runs(INDEX)
    assert [(r.dataset, r.fingerprint, r.part, r.start, r.stop) for r in runs] == [
        ("a", "fp-a", 0, 0, 2),
        ("a", "fp-a", 1, 2, 3),
        ("b", "fp-b", 0, 3, 5),
    ]


def test_generate_shards_cover_every_cell_once_interleaved(tmp_path):
    store = StudyStore.open(str(tmp_path / "s"))
    items = INDEX.column("item_id").combine_chunks()
    pending = pending_generate(store, ["c1", "c2"], items, 3)
    shards = generate_shards(
        pending, part_runs(INDEX), shard_size=4, usd_per_cell={"c1": 0.5}, first_id=100
    )
    assert not isinstance(shards, list)  # made lazily
    made = list(shards)
    assert [s.shard_id for s in made] == list(range(100, 100 + len(made)))
    # part 0 of dataset a: 6 cells per condition -> chunks of 4 and 2, conditions in turn
    assert [(s.condition_id, s.part, s.dataset, s.size) for s in made[:4]] == [
        ("c1", 0, "a", 4), ("c2", 0, "a", 4), ("c1", 0, "a", 2), ("c2", 0, "a", 2),
    ]  # fmt: skip
    cells = [
        (s.condition_id, i, e)
        for s in made
        for i, e in zip(s.cells["item_id"].to_pylist(), s.cells["epoch"].to_pylist(), strict=True)
    ]
    assert len(cells) == len(set(cells)) == 2 * 5 * 3
    assert made[0].est_usd == 2.0 and made[1].est_usd == 0.0
    for shard in made:  # every shard's items sit in its part
        run = next(
            r for r in part_runs(INDEX) if (r.dataset, r.part) == (shard.dataset, shard.part)
        )
        assert set(shard.cells["item_id"].to_pylist()) <= set(
            items[run.start : run.stop].to_pylist()
        )


def test_grade_shards_name_the_solution_fragments(tmp_path):
    store = StudyStore.open(str(tmp_path / "s"))
    items = INDEX.column("item_id").combine_chunks()
    row = {"status": "ok", "model": "m", "run_id": "r", "request_hash": "h"}
    first = store.write_solutions(
        "gen", [{**row, "item_id": i, "epoch": 0, "text": i} for i in ("a1", "a3", "b2")]
    )
    second = store.write_solutions("gen", [{**row, "item_id": "b1", "epoch": 0, "text": "x"}])
    pending = pending_grade(store, ["judge", "auto"], ["gen"], items, 1)
    made = list(
        grade_shards(
            store,
            pending,
            ["gen"],
            ["judge", "auto"],
            part_runs(INDEX),
            shard_size=1,
            usd_per_cell={},
            scorers={"auto"},
        )
    )
    judge = [s for s in made if s.condition_id == "judge"]
    assert sorted(i for s in judge for i in s.cells["item_id"].to_pylist()) == [
        "a1",
        "a3",
        "b1",
        "b2",
    ]
    assert all(s.size == 1 for s in judge)  # judge shards: shard_size
    scorer = [s for s in made if s.condition_id == "auto"]
    assert [s.size for s in scorer] == [1, 1, 2]  # scorer shards 16x larger: one per part
    where = {
        i: f
        for s in made
        for i, f in zip(
            s.cells["item_id"].to_pylist(), s.cells["fragment"].to_pylist(), strict=True
        )
    }
    assert where == {"a1": first, "a3": first, "b2": first, "b1": second}
    assert all(s.gen_condition_id == "gen" for s in made)


def test_grade_shards_hold_one_solution_index_at_a_time(tmp_path, monkeypatch):
    """The index of a generate condition is garbage once its shards are made: the next
    condition's index is not made beside it (at a million solutions each is tens of MB)."""
    store = StudyStore.open(str(tmp_path / "s"))
    items = INDEX.column("item_id").combine_chunks()
    row = {"status": "ok", "model": "m", "run_id": "r", "request_hash": "h", "epoch": 0}
    for gen in ("g1", "g2", "g3"):
        store.write_solutions(gen, [{**row, "item_id": i, "text": i} for i in ("a1", "b1")])
    pending = pending_grade(store, ["auto"], ["g1", "g2", "g3"], items, 1)
    alive_at_each_index = alive_at_each_call(monkeypatch, shards_module, "solution_index")
    shards = grade_shards(
        store,
        pending,
        ["g1", "g2", "g3"],
        ["auto"],
        part_runs(INDEX),
        shard_size=8,
        usd_per_cell={},
        scorers={"auto"},
    )
    held = []  # the dispatcher holds shards while the next ones are made
    for shard in shards:
        held.append(shard)
    assert alive_at_each_index == [0, 0, 0]
    assert {s.gen_condition_id for s in held} == {"g1", "g2", "g3"}


def test_grade_shards_send_a_repeated_judge_request_after_a_barrier(tmp_path):
    """Two generate conditions with the same answer to a1 ask the judge the same request: the
    second one's cell comes after the barrier, in a shard that lists the cache afresh."""
    store = StudyStore.open(str(tmp_path / "s"))
    items = INDEX.column("item_id").combine_chunks()
    row = {"status": "ok", "model": "m", "run_id": "r", "request_hash": "h", "epoch": 0}
    store.write_solutions("g1", [{**row, "item_id": i, "text": t} for i, t in [("a1", "x")]])
    store.write_solutions("g2", [{**row, "item_id": i, "text": t} for i, t in [("a1", "x")]])
    store.write_solutions("g2", [{**row, "item_id": "b1", "text": "y"}])
    pending = pending_grade(store, ["judge", "auto"], ["g1", "g2"], items, 1)
    made = list(
        grade_shards(
            store,
            pending,
            ["g1", "g2"],
            ["judge", "auto"],
            part_runs(INDEX),
            shard_size=8,
            usd_per_cell={},
            scorers={"auto"},
        )
    )
    at = made.index(BARRIER)
    cells = [
        (s.condition_id, s.gen_condition_id, s.cells["item_id"].to_pylist(), s.repeats)
        for s in made
        if s is not BARRIER
    ]
    before, after = cells[:at], cells[at:]
    assert ("judge", "g1", ["a1"], False) in before and ("judge", "g2", ["b1"], False) in before
    assert all(c[0] == "judge" for c in after)  # scorers make no call: nothing to repeat
    assert after == [("judge", "g2", ["a1"], True)]
