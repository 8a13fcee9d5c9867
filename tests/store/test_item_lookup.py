"""`ItemLookup`: stored rows placed among the selected items exactly, hash collisions
included (ids that differ only in the middle of a long id hash alike on purpose)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.store import ItemLookup
from itemeval.store._positions import string_hashes


def _index_in(values: pa.Array | pa.ChunkedArray, items: pa.Array) -> list[int]:
    """The oracle: arrow's own hash lookup (-1 where a value is not an item)."""
    return pc.index_in(values, value_set=items).fill_null(-1).to_pylist()


def _check(items: pa.Array, values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    found = ItemLookup(items).positions(values)
    assert found.tolist() == _index_in(values, items)
    return found


def test_places_ids_and_rejects_strangers() -> None:
    items = pa.array(["q1", "q2", "", "é-item", "q10"])
    values = pa.chunked_array([["q10", "nope", "q1"], ["", "é-item", "q1 ", "Q1"]])
    assert _check(items, values).tolist() == [4, -1, 0, 2, 3, -1, -1]
    assert ItemLookup(items).positions(pa.array([], pa.string())).tolist() == []
    assert ItemLookup(pa.array([], pa.string())).positions(pa.array(["q1"])).tolist() == [-1]


def test_many_ids_in_random_order() -> None:
    rng = np.random.default_rng(3)
    items = pa.array([f"gsm8k-{i:06d}" for i in rng.permutation(50_000)])
    values = items.take(pa.array(rng.integers(0, len(items), 20_000)))
    found = _check(items, pa.concat_arrays([values, pa.array(["gsm8k-x"])]))
    assert (found[:-1] >= 0).all() and found[-1] == -1


def test_ids_that_share_a_hash_are_placed_exactly() -> None:
    # Only the first and last bytes of a long id are hashed: these ids all hash alike.
    items = pa.array(["x" * 60 + f"{i:04d}" + "y" * 60 for i in range(300)] + ["short"])
    assert len(set(string_hashes(items[:300]).tolist())) == 1
    rng = np.random.default_rng(5)
    values = items.take(pa.array(rng.integers(0, len(items), 400)))
    stranger = pa.array(["x" * 60 + "9999" + "y" * 60, "x" * 60 + "00" + "y" * 60])
    found = _check(items, pa.concat_arrays([values, stranger]))
    assert (found[:-2] >= 0).all() and found[-2:].tolist() == [-1, -1]


def test_hashes_do_not_depend_on_the_slicing(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import itemeval.store._positions as positions

    ids = pa.array([f"id-{i}" * (1 + i % 30) for i in range(5000)])
    whole = string_hashes(ids)
    monkeypatch.setattr(positions, "_HASH_SLICE", 777)
    assert string_hashes(ids).tolist() == whole.tolist()
    assert (
        string_hashes(pa.chunked_array([ids.slice(0, 10), ids.slice(10)])).tolist()
        == whole.tolist()
    )
    _check(ids, ids.take(pa.array(np.arange(0, 5000, 7))))


def test_placing_a_slice_at_a_time_places_every_value(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import itemeval.store._positions as positions

    monkeypatch.setattr(positions, "_PLACE_SLICE", 3)
    items = pa.array(["x" * 60 + f"{i:04d}" + "y" * 60 for i in range(40)] + ["q1", "q2"])
    values = pa.chunked_array(
        [items.slice(0, 5), ["q2", "nope"], items.slice(30, 12), ["x" * 60 + "9999" + "y" * 60]]
    )
    found = _check(items, values)
    assert (found >= 0).sum() == len(values) - 2


def test_every_item_in_id_order_is_placed_by_one_comparison(monkeypatch) -> None:
    """A batch that is every item in id order, each repeated (a partition's sorted cells, two
    epochs), is placed without hashing, and the same as by hashing; a batch that differs in one
    value is placed by hashing, exactly."""
    import itemeval.store._positions as positions_module

    ids = pa.array([f"item-{i}" for i in (5, 3, 9, 1, 7)])
    lookup = ItemLookup(ids)
    ordered = pa.array(sorted(ids.to_pylist() * 2))
    hashed = ItemLookup(ids)
    hashed._in_sorted_order = lambda values: None  # type: ignore[method-assign]
    monkeypatch.setattr(
        positions_module, "string_hashes", lambda values: (_ for _ in ()).throw(AssertionError)
    )
    fast = lookup.positions(ordered)
    monkeypatch.undo()
    assert fast.tolist() == hashed.positions(ordered).tolist() == [3, 3, 1, 1, 0, 0, 4, 4, 2, 2]
    off = pa.array([*sorted(ids.to_pylist())[:-1], "not-an-item"])
    assert lookup.positions(off).tolist() == [3, 1, 0, 4, -1]
