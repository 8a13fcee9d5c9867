"""Writing fragments and reading them back deduplicated, on local disk and on S3."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from itemeval.errors import StoreError
from itemeval.store import SOLUTION_SCHEMA, StudyStore
from itemeval.store import _dedup as dedup_module
from itemeval.store import fragments as fragments_module
from itemeval.store._schemas import build_table
from itemeval.store.fragments import encode_fragment, list_fragments, read_fragments


def _keys(table: pa.Table) -> list[tuple]:
    cols = [c for c in ("condition_id", "item_id", "epoch") if c in table.column_names]
    return sorted(zip(*(table.column(c).to_pylist() for c in cols), strict=True))


def test_layout_under_the_root(store: StudyStore, solution) -> None:
    name = store.write_solutions("gen-a--000000000001", [solution("q1")])
    assert name is not None and name.endswith(".parquet")
    assert store.partition("solutions", "gen-a--000000000001").url.endswith(
        "/solutions/condition_id=gen-a--000000000001"
    )
    assert store.dataset_locks.url.endswith("/dataset_locks.json")
    assert store.manifests.url.endswith("/manifests")
    assert store.condition_ids("solutions") == ["gen-a--000000000001"]
    assert store.condition_ids("grades") == []


def test_fragment_does_not_store_the_partition_column(store: StudyStore, solution) -> None:
    store.write_solutions("c1", [solution("q1")])
    (info,) = store.fragments("solutions", "c1")
    with store.root.fs.open(info.path, "rb") as handle:
        schema = pq.read_schema(handle)
    assert "condition_id" not in schema.names
    assert schema.equals(SOLUTION_SCHEMA, check_metadata=False)


def test_fragments_are_plain_encoded_and_older_dictionary_fragments_still_read(
    store: StudyStore, solution
) -> None:
    # Fragments carry no dictionary pages (smaller and quicker here, see encode_fragment);
    # a store written before has dictionary-encoded fragments, read beside the new ones.
    store.write_solutions("c1", [solution("q1"), solution("q2")])
    (info,) = store.fragments("solutions", "c1")
    with store.root.fs.open(info.path, "rb") as handle:
        metadata = pq.ParquetFile(handle).metadata
    chunks = [metadata.row_group(0).column(i) for i in range(metadata.num_columns)]
    assert not [c.path_in_schema for c in chunks if c.has_dictionary_page]
    older = build_table(SOLUTION_SCHEMA, [solution("q3")])
    sink = pa.BufferOutputStream()
    pq.write_table(older, sink, compression="zstd", use_dictionary=True)
    store.partition("solutions", "c1").join("00000000T000000.000000Z-old.parquet").write_atomic(
        sink.getvalue().to_pybytes()
    )
    assert [k[1] for k in _keys(store.read_solutions(["c1"]))] == ["q1", "q2", "q3"]


def test_round_trip_with_partition_column(store: StudyStore, solution) -> None:
    store.write_solutions("c1", [solution("q1"), solution("q2", 1)])
    store.write_solutions("c2", [solution("q1")])
    table = store.read_solutions()
    assert table.column_names[0] == "condition_id"
    assert _keys(table) == [("c1", "q1", 0), ("c1", "q2", 1), ("c2", "q1", 0)]
    only_c2 = store.read_solutions(["c2"], columns=["item_id", "text"])
    assert only_c2.column_names == ["condition_id", "item_id", "text"]
    assert only_c2.to_pylist() == [
        {"condition_id": "c2", "item_id": "q1", "text": "answer to q1/0"}
    ]


def test_ok_beats_error_even_when_the_error_is_newer(store: StudyStore, solution) -> None:
    store.write_solutions("c1", [solution("q1", text="good", at=1)])
    store.write_solutions("c1", [solution("q1", ok=False, at=2)])
    table = store.read_solutions(["c1"])
    assert table.num_rows == 1
    assert table.column("status").to_pylist() == ["ok"]
    assert store.read_solutions(["c1"], dedup=False).num_rows == 2


def test_later_written_at_wins_then_later_fragment(store: StudyStore, solution) -> None:
    # Written in this order, but the first fragment's row is the newer one.
    store.write_solutions("c1", [solution("q1", text="newer", at=20)])
    store.write_solutions("c1", [solution("q1", text="older", at=10)])
    assert store.read_solutions(["c1"]).column("text").to_pylist() == ["newer"]
    # Same written_at: the later fragment (name order = write order) wins.
    store.write_solutions("c1", [solution("q2", text="first", at=30)])
    store.write_solutions("c1", [solution("q2", text="second", at=30)])
    texts = dict(zip(*store.read_solutions(["c1"], ["item_id", "text"]).columns[1:], strict=True))
    assert texts[pa.scalar("q2")].as_py() == "second"


def test_dedup_is_per_key_across_many_fragments(store: StudyStore, solution) -> None:
    for round_ in range(3):
        store.write_solutions(
            "c1",
            [
                solution(f"q{i}", e, ok=(round_ == 2 or i % 2 == 0))
                for i in range(20)
                for e in (0, 1)
            ],
        )
    table = store.read_solutions(["c1"])
    assert table.num_rows == 40
    assert len(set(_keys(table))) == 40
    assert set(table.column("status").to_pylist()) == {"ok"}


@pytest.mark.parametrize("collide", [False, True], ids=["own-hashes", "one-shared-hash"])
def test_unordered_dedup_keeps_the_same_rows_as_the_ordered_one(
    store: StudyStore, solution, monkeypatch: pytest.MonkeyPatch, collide: bool
) -> None:
    """Keys written once, keys written several times (error then ok, later written_at, a tie
    between fragments), and, with `collide`, every key's hash the same: the rows kept are
    the ordered reader's, whatever the order."""
    if collide:
        monkeypatch.setattr(
            dedup_module, "key_hashes", lambda table, keys: np.zeros(table.num_rows, np.uint64)
        )
    store.write_solutions(
        "c1", [solution(f"q{i}", e, text=f"a{i}{e}", at=5) for i in range(9) for e in (0, 1)]
    )
    store.write_solutions(
        "c1", [solution("q1", 0, ok=False, at=9), solution("q2", 1, text="newer", at=7)]
    )
    store.write_solutions(
        "c1", [solution("q3", 0, text="tie-later", at=5), solution("q7", ok=False)]
    )
    columns = ["item_id", "epoch", "status", "text"]
    ordered = store.read_by_condition("solutions", ["c1"], columns)["c1"]
    unordered = store.read_by_condition("solutions", ["c1"], columns, ordered=False)["c1"]
    assert unordered.num_rows == ordered.num_rows == 18
    assert sorted(_rows(unordered)) == _rows(ordered)
    texts = {(r[0], r[1]): r[3] for r in _rows(unordered)}
    assert texts[("q1", 0)] == "a10" and texts[("q2", 1)] == "newer"
    assert texts[("q3", 0)] == "tie-later" and texts[("q7", 0)] == "a70"


@pytest.mark.parametrize("collide", [False, True], ids=["own-hashes", "one-shared-hash"])
def test_keys_present_is_exact_whatever_the_hashes(
    monkeypatch: pytest.MonkeyPatch, collide: bool
) -> None:
    if collide:
        monkeypatch.setattr(
            dedup_module, "key_hashes", lambda table, keys: np.zeros(table.num_rows, np.uint64)
        )
    among = pa.table({"item_id": ["a", "b", "c", "d"], "epoch": pa.array([0, 1, 0, 0], pa.int32())})
    table = pa.table(
        {
            "item_id": ["a", "a", "b", "b", "e", "d", "c"],
            "epoch": pa.array([0, 1, 1, 0, 0, 0, 0], pa.int32()),
        }
    )
    present = dedup_module.keys_present(table, among, ["item_id", "epoch"])
    assert present.tolist() == [True, False, True, False, False, True, True]
    assert not dedup_module.keys_present(table, among.slice(0, 0), ["item_id"]).any()


def _rows(table: pa.Table) -> list[tuple]:
    return list(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def test_a_reducer_sees_each_fragment_and_dedup_still_picks_the_best_row(
    store: StudyStore, solution
) -> None:
    seen: list[int] = []

    def ok_texts(table: pa.Table) -> pa.Table:
        seen.append(table.num_rows)
        ok = table.filter(pc.equal(table.column("status"), "ok"))
        return ok.drop_columns(["status"])

    store.write_solutions("c1", [solution("q1", text="old", at=10), solution("q2", ok=False)])
    store.write_solutions("c1", [solution("q1", text="new", at=20), solution("q3", at=5)])
    store.write_solutions("c1", [solution("q1", ok=False, at=30)])
    table = store.read_by_condition(
        "solutions", ["c1"], ["item_id", "status", "text"], reduce=ok_texts
    )["c1"]
    # fragment by fragment, never the partition whole (and an empty table, for the schema)
    assert sorted(seen) == [0, 1, 2, 2]
    assert table.column_names == ["item_id", "text"]  # what the reducer kept
    texts = dict(zip(table["item_id"].to_pylist(), table["text"].to_pylist(), strict=True))
    assert sorted(texts) == ["q1", "q3"] and texts["q1"] == "new"
    # An empty partition gives the reducer's schema too.
    empty = store.read_by_condition("solutions", ["none"], ["item_id", "status"], reduce=ok_texts)
    assert empty["none"].num_rows == 0 and empty["none"].column_names == ["item_id"]


def test_reads_only_the_partitions_asked_for(store: StudyStore, solution) -> None:
    store.write_solutions("good", [solution("q1")])
    store.partition("solutions", "bad").join("broken.parquet").write_atomic(b"not parquet")
    assert store.read_solutions(["good"]).num_rows == 1
    with pytest.raises(StoreError) as info:
        store.read_solutions(["bad"])
    assert "condition_id=bad/broken.parquet" in str(info.value)


def test_corrupt_fragment_is_named(store: StudyStore, solution) -> None:
    store.write_solutions("c1", [solution("q1")])
    store.partition("solutions", "c1").join("zzz-truncated.parquet").write_atomic(
        encode_fragment(build_table(SOLUTION_SCHEMA, [solution("q2")]))[:-20]
    )
    with pytest.raises(StoreError, match=r"zzz-truncated\.parquet"):
        store.read_solutions(["c1"])


def test_foreign_files_are_errors_hidden_files_are_ignored(store: StudyStore, solution) -> None:
    store.write_solutions("c1", [solution("q1")])
    partition = store.partition("solutions", "c1")
    partition.join(".tmp-abc.part").write_atomic(b"half a fragment")
    partition.join("_SUCCESS").write_atomic(b"")
    assert store.read_solutions(["c1"]).num_rows == 1
    partition.join("notes.txt").write_atomic(b"hello")
    with pytest.raises(StoreError, match=r"notes\.txt"):
        store.read_solutions(["c1"])


def test_fragment_with_another_schema_is_refused(store: StudyStore, solution) -> None:
    store.write_solutions("c1", [solution("q1")])
    table = build_table(SOLUTION_SCHEMA, [solution("q2")])
    wrong = table.set_column(1, "epoch", table.column("epoch").cast(pa.int64()))
    store.partition("solutions", "c1").join("z-foreign.parquet").write_atomic(
        encode_fragment(wrong)
    )
    with pytest.raises(StoreError) as info:
        store.read_solutions(["c1"], columns=["item_id"])
    assert "z-foreign.parquet" in str(info.value) and "epoch" in str(info.value)


def test_writing_a_wrong_table_writes_nothing(store: StudyStore, solution) -> None:
    table = build_table(SOLUTION_SCHEMA, [solution("q1")]).drop_columns(["usd"])
    with pytest.raises(StoreError, match="missing column"):
        store.write_solutions("c1", table)
    assert store.fragments("solutions", "c1") == []
    assert store.write_solutions("c1", []) is None


def test_bad_condition_id_is_refused(store: StudyStore, solution) -> None:
    for bad in ("../escape", "a/b", ".hidden", "x=y", "a+b", "50%"):
        with pytest.raises(StoreError, match="cannot name a partition"):
            store.write_solutions(bad, [solution("q1")])


def test_vanished_fragment_is_reported_not_raised(store: StudyStore, solution) -> None:
    store.write_solutions("c1", [solution("q1")])
    partition = store.partition("solutions", "c1")
    listed = list_fragments(partition)
    partition.join(listed[0].name).delete()
    assert read_fragments(partition, listed, SOLUTION_SCHEMA) == [None]


def test_read_relists_when_a_listed_fragment_was_compacted(
    store: StudyStore, solution, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader whose listing predates a compaction finds every row exactly once."""
    from itemeval.store._compact import compact_partition

    for i in range(4):
        store.write_solutions("c1", [solution(f"q{i}"), solution("shared", ok=i == 3)])
    partition = store.partition("solutions", "c1")
    stale = list_fragments(partition)
    compact_partition(store, "solutions", "c1")
    real = fragments_module.list_fragments
    calls = []

    def listing_that_is_stale_once(location):
        calls.append(location)
        return stale if len(calls) == 1 else real(location)

    monkeypatch.setattr(fragments_module, "list_fragments", listing_that_is_stale_once)
    table = store.read_solutions(["c1"])
    assert len(calls) == 2
    assert sorted(table.column("item_id").to_pylist()) == ["q0", "q1", "q2", "q3", "shared"]
    assert table.filter(pa.compute.equal(table["item_id"], "shared"))["status"][0].as_py() == "ok"


def test_large_remote_fragments_are_read_by_ranges(
    store: StudyStore, solution, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fragments above the whole-fetch size (compacted files) are read through a file handle."""
    store.write_solutions("c1", [solution(f"q{i}") for i in range(50)])
    store.write_solutions("c1", [solution("q0", text="newer", at=10**9)])
    monkeypatch.setattr(fragments_module, "WHOLE_FETCH_BYTES", 0)
    table = store.read_solutions(["c1"], columns=["item_id", "text"])
    assert table.num_rows == 50
    assert table.filter(pa.compute.equal(table["item_id"], "q0"))["text"][0].as_py() == "newer"
