"""`commit_plan` writes the items snapshot from what `make_plan` read when the plan kept it
(one scan of the dataset per run, not two), and reads the dataset again when it was too
large to keep. Checked against the physical truth: the source is deleted between the two."""

from __future__ import annotations

import shutil

import pytest
from runtime_files import DATASETS, write_study

from itemeval.config import load_study
from itemeval.planning import _item_index as item_index
from itemeval.planning import _plan as planning
from itemeval.planning import commit_plan, make_plan
from itemeval.store import read_items_part


def _study_with_own_copies(tmp_path, store: str):
    """The sample datasets copied beside the study, so the test may delete them."""
    data = tmp_path / "data"
    for name in ("arithmetic", "science-mc"):
        shutil.copytree(DATASETS / name, data / name)
    path = write_study(
        tmp_path / store,
        **{
            "datasets": [
                {"name": "arithmetic", "path": str(data / "arithmetic")},
                {"name": "science-mc", "path": str(data / "science-mc")},
            ],
        },
    )
    return load_study(path), data


def _snapshot_rows(plan) -> dict[str, list[dict]]:
    out = {}
    for dataset in plan.datasets:
        info = dataset.snapshot
        assert info is not None
        out[dataset.name] = [
            row for part in range(info.parts) for row in read_items_part(info, part).to_pylist()
        ]
    return out


def test_a_kept_plan_writes_the_snapshot_without_reading_the_dataset_again(tmp_path):
    reference_study, _ = _study_with_own_copies(tmp_path / "a", "study")
    reference = make_plan(reference_study)  # not kept: commit reads the source again
    commit_plan(reference)

    study, data = _study_with_own_copies(tmp_path / "b", "study")
    plan = make_plan(study, keep_items=True)
    shutil.rmtree(data)  # gone: only what the plan kept can be written
    commit_plan(plan)

    rows = _snapshot_rows(plan)
    assert rows == _snapshot_rows(reference)
    # every item of each dataset, not only the dev selection the run uses
    assert len(rows["arithmetic"]) == plan.datasets[0].items > plan.datasets[0].selected
    assert all(d.kept is None for d in plan.datasets)  # handed over, not held for the run


def test_a_dataset_too_large_to_keep_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(planning, "KEPT_ITEMS_BYTES", 1)
    study, data = _study_with_own_copies(tmp_path, "study")
    plan = make_plan(study, keep_items=True)
    assert all(d.kept is None for d in plan.datasets)
    shutil.rmtree(data)
    with pytest.raises(FileNotFoundError):
        commit_plan(plan)


@pytest.mark.parametrize("limit", [4, 1000])
def test_the_item_index_names_the_snapshot_part_of_each_item(tmp_path, monkeypatch, limit):
    # The index's dataset, fingerprint and part columns are not read from the items: they
    # follow from each dataset's count. Small parts, so that items sit in several.
    monkeypatch.setattr(item_index, "ITEMS_PER_PART", 3)
    write = planning.write_items_snapshot
    monkeypatch.setattr(
        planning,
        "write_items_snapshot",
        lambda *args, **kwargs: write(*args, **kwargs, rows_per_part=3),
    )
    study, _ = _study_with_own_copies(tmp_path, "study")
    plan = make_plan(study, limit=limit, keep_items=True)
    commit_plan(plan)

    index = plan.items.to_pylist()
    by_dataset = {d.name: d for d in plan.datasets}
    for dataset in plan.datasets:
        ids = [row["item_id"] for row in index if row["dataset"] == dataset.name]
        stored = [r["item_id"] for r in _snapshot_rows(plan)[dataset.name]]
        assert ids == stored[: dataset.selected]  # its first `selected` items, in order
        assert len(ids) == min(limit, dataset.items)
    assert {d.snapshot.parts for d in plan.datasets} != {1}  # parts were cut
    for row in index:
        dataset = by_dataset[row["dataset"]]
        assert row["fingerprint"] == dataset.fingerprint
        part = read_items_part(dataset.snapshot, row["part"], ["item_id"])
        assert row["item_id"] in part.column("item_id").to_pylist()


def test_a_committed_plan_keeps_item_tables_the_next_plan_reads_instead_of_items(
    tmp_path, monkeypatch: pytest.MonkeyPatch
):
    """After a commit, planning reads the snapshot's ids and the item tables beside it: no item
    is parsed or rendered, and the estimate is the same to the digit."""
    study, _ = _study_with_own_copies(tmp_path, "study")
    first = make_plan(study, keep_items=True)
    commit_plan(first)
    again = make_plan(study)  # tables not yet there for a dataset too? they are: commit wrote them
    assert all(d.scan is None or d.scan.from_tables for d in again.datasets)

    def no_items(*args, **kwargs):
        raise AssertionError("an item was read item by item")

    monkeypatch.setattr(planning, "snapshot_batches", no_items)
    fast = make_plan(study)
    assert [line.__dict__ for line in fast.estimate.lines] == [
        line.__dict__ for line in first.estimate.lines
    ]
    assert fast.items.equals(first.items)
    assert [d.modalities for d in fast.datasets] == [d.modalities for d in first.datasets]
    # A reading command's plan: no estimate, the same items.
    reading = make_plan(study, with_pending=False, estimate=False)
    assert reading.items.equals(first.items) and reading.tokens is None
    # A new prompt shape has no table yet: that plan reads the items again, and agrees.
    monkeypatch.undo()
    for dataset in fast.datasets:
        assert dataset.snapshot is not None
        for table in dataset.snapshot.location.fs.glob(
            dataset.snapshot.location.path + "/_tables-*"
        ):
            dataset.snapshot.location.fs.rm(table)
    slow = make_plan(study)
    assert [line.__dict__ for line in slow.estimate.lines] == [
        line.__dict__ for line in first.estimate.lines
    ]
