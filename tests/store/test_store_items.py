"""The items snapshot: streamed parts of 10,000 rows, `_complete.json` last, read by part."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pyarrow as pa
import pytest

from itemeval.datasets import ITEM_SCHEMA, WorkItem, items_to_table
from itemeval.errors import StoreError
from itemeval.store import (
    StudyStore,
    read_item_ids,
    read_items_part,
    read_snapshot_info,
    write_items_snapshot,
)
from itemeval.store._items import read_items

FINGERPRINT = "sha256:" + "ab12" * 16


def _batches(total: int, size: int) -> Iterator[pa.Table]:
    for start in range(0, total, size):
        yield items_to_table(
            WorkItem(id=f"ds-{i:06d}", input=f"question {i}", target=str(i), dataset="ds")
            for i in range(start, min(start + size, total))
        )


def test_snapshot_parts_marker_and_reads(store: StudyStore) -> None:
    info = write_items_snapshot(store, "ds", FINGERPRINT, _batches(23_456, 3_000))
    assert (info.parts, info.rows) == (3, 23_456)
    assert info.location.url.endswith("/items/ds/ab12ab12ab12ab12")
    names = info.location.listdir()
    assert names == [
        "_complete.json",
        "part-00000.parquet",
        "part-00001.parquet",
        "part-00002.parquet",
    ]
    marker = json.loads(info.location.join("_complete.json").read_text())
    assert marker["rows"] == 23_456 and marker["fingerprint"] == FINGERPRINT

    part1 = read_items_part(info, 1)
    assert part1.schema.equals(ITEM_SCHEMA, check_metadata=False)
    assert part1.num_rows == 10_000
    assert part1.column("item_id")[0].as_py() == "ds-010000"
    assert read_items_part(info, 2).num_rows == 3_456

    ids = read_item_ids(info)
    assert len(ids) == 23_456 and ids[23_455].as_py() == "ds-023455"
    assert read_items(info, ["item_id", "target"]).column("target")[5].as_py() == "5"
    with pytest.raises(StoreError, match="part 3 does not exist"):
        read_items_part(info, 3)


def test_incomplete_snapshot_is_not_usable(store: StudyStore) -> None:
    def failing() -> Iterator[pa.Table]:
        yield from _batches(12_000, 6_000)
        raise RuntimeError("adapter failed mid-way")

    with pytest.raises(RuntimeError):
        write_items_snapshot(store, "ds", FINGERPRINT, failing())
    assert read_snapshot_info(store, "ds", FINGERPRINT) is None
    # The same command again completes it.
    info = write_items_snapshot(store, "ds", FINGERPRINT, _batches(12_000, 6_000))
    assert (info.parts, info.rows) == (2, 12_000)


def test_second_writer_of_the_same_fingerprint_is_harmless(store: StudyStore) -> None:
    results = []
    errors = []

    def writer() -> None:
        try:
            results.append(write_items_snapshot(store, "ds", FINGERPRINT, _batches(15_000, 4_000)))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert [(r.parts, r.rows) for r in results] == [(2, 15_000), (2, 15_000)]
    assert len(read_item_ids(results[0])) == 15_000
    # A later call finds the snapshot and writes nothing.
    again = write_items_snapshot(store, "ds", FINGERPRINT, iter(()))
    assert again.rows == 15_000


def test_batches_of_another_schema_are_refused(store: StudyStore) -> None:
    bad = pa.table({"item_id": ["a"], "input": ["x"]})
    with pytest.raises(StoreError, match="missing column"):
        write_items_snapshot(store, "ds", FINGERPRINT, [bad])
    assert read_snapshot_info(store, "ds", FINGERPRINT) is None


def test_names_are_checked(store: StudyStore) -> None:
    with pytest.raises(StoreError, match="cannot name a directory"):
        write_items_snapshot(store, "../x", FINGERPRINT, [])
    with pytest.raises(StoreError, match="not a content fingerprint"):
        write_items_snapshot(store, "ds", "short", [])
