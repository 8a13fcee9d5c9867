"""Planning's pass over the items: ids, modalities and token counts of every dataset.

A dataset with an items snapshot and the item tables a run kept beside it (`_item_tables.py`)
is not read item by item: its ids come from the snapshot's id column, its modalities and token
counts from the tables. Any other dataset is read item by item, from its snapshot or from its
source through its adapter (validating every item), and its items rendered through every prompt
and rubric to count tokens (`_tokens.token_tables`). Ids must be unique across the study either
way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.datasets import WorkItem, table_to_items
from itemeval.datasets.adapters import StudyIds
from itemeval.errors import DatasetError, Problem
from itemeval.planning._design import Design
from itemeval.planning._item_keys import KeyCounts
from itemeval.planning._item_tables import read_item_table, table_key, write_item_table
from itemeval.planning._tokens import TokenColumns, TokenTables, solver_shape, token_tables
from itemeval.store import SnapshotInfo, read_item_ids, read_items_part, string_hashes

SCAN_BATCH = 5_000
_MODALITY = "modality"


@dataclass
class DatasetScan:
    """What the pass learned of one dataset: its selected ids, every item's modality count,
    and the per-item tables of the selected items (None without an estimate)."""

    ids: pa.Array
    items: int
    modalities: Counter[str]
    tables: TokenTables | None = None
    from_tables: bool = False  # read from the item tables, not item by item
    #: Every item's id (selected or not), for the check across datasets.
    every_id: pa.Array | None = field(default=None, repr=False)
    key_counts: KeyCounts = field(default_factory=KeyCounts)


def generate_key(design: Design, shape: tuple) -> str:
    cond = next(c for c in design.generate if solver_shape(c) == shape)
    return table_key("generate", cond.prompt.sha256, *shape[1:])


def judge_key(judge: object) -> str:
    rubric = judge.rubric  # type: ignore[attr-defined]
    return table_key("judge", rubric.sha256)


def modality_key() -> str:
    return table_key(_MODALITY)


def scan_from_tables(
    design: Design,
    snapshot: SnapshotInfo,
    selected: int,
    *,
    estimate: bool,
    need_keys: bool = False,
) -> DatasetScan | None:
    """The dataset's scan from its snapshot's ids and item tables; None when a table it needs
    is missing or covers fewer items (`need_keys`: or its key counts are of another
    selection)."""
    modality = read_item_table(snapshot, modality_key(), selected)
    if modality is None:
        return None
    columns_read, meta = modality
    codes = columns_read[_MODALITY]
    names = [str(n) for n in meta.get("names", [])]
    counts = Counter({str(k): int(v) for k, v in dict(meta.get("counts", {})).items()})
    try:
        key_counts = KeyCounts.from_json(meta["keys"])
    except (KeyError, TypeError, ValueError):
        return None
    if need_keys and key_counts.selected != selected:
        return None
    tables = None
    if estimate:
        tables = TokenTables(
            generate={s: TokenColumns("input", "output", "visible") for s in _shapes(design)},
            judge={j.id: TokenColumns("input") for j in design.judges},
        )
        for shape, columns in tables.generate.items():
            read = read_item_table(snapshot, generate_key(design, shape), selected)
            if read is None:
                return None
            columns.add(**read[0])
        for judge in design.judges:
            read = read_item_table(snapshot, judge_key(judge), selected)
            if read is None:
                return None
            tables.judge[judge.id].add(input=read[0]["input"])
        tables.items = selected
        tables.modalities = {name: code for code, name in enumerate(names)}
        tables._meta.add(modality=codes)
    every = read_item_ids(snapshot)
    return DatasetScan(
        every.slice(0, selected),
        snapshot.rows,
        counts,
        tables=tables,
        from_tables=True,
        every_id=every,
        key_counts=key_counts,
    )


def _shapes(design: Design) -> dict[tuple, object]:
    return {solver_shape(c): c for c in reversed(design.generate)}


def scan_items(
    design: Design,
    name: str,
    batches: Iterator[list[WorkItem]],
    per_dataset: int | None,
    ids: StudyIds,
    *,
    last: bool,
    estimate: bool,
    keep_every: bool = False,
    on_batch: Callable[[list[WorkItem]], None] | None = None,
) -> DatasetScan:
    """The dataset's scan, item by item (validating each as it is read); `keep_every`: keep
    every item's id (for `check_unique_across`)."""
    modalities: Counter[str] = Counter()
    key_counts = KeyCounts()
    id_chunks: list[pa.Array] = []
    every_chunks: list[pa.Array] = []
    count = 0

    def selected() -> Iterator[list[WorkItem]]:
        nonlocal count
        for batch in ids.track(name, batches, last=last):
            if on_batch is not None:
                on_batch(batch)
            start = count
            count += len(batch)
            if keep_every:
                every_chunks.append(pa.array([item.id for item in batch], pa.string()))
            for item in batch:
                modalities[item.modality or "unknown"] += 1
            keep = batch if per_dataset is None else batch[: max(0, per_dataset - start)]
            key_counts.see(batch, len(keep))
            if keep:
                id_chunks.append(pa.array([item.id for item in keep], pa.string()))
                yield keep

    if estimate:
        tables = token_tables(design, selected())
    else:
        tables = None
        for _ in selected():
            pass
    ids_array = pa.concat_arrays(id_chunks) if id_chunks else pa.array([], pa.string())
    every = pa.concat_arrays(every_chunks) if every_chunks else None
    return DatasetScan(
        ids_array, count, modalities, tables=tables, every_id=every, key_counts=key_counts
    )


def snapshot_batches(snapshot: SnapshotInfo) -> Iterator[list[WorkItem]]:
    """A snapshot's items, part by part, as work items."""
    for index in range(snapshot.parts):
        table = read_items_part(snapshot, index)
        for offset in range(0, table.num_rows, SCAN_BATCH):
            yield table_to_items(table.slice(offset, SCAN_BATCH))


def check_unique_across(scans: Sequence[tuple[str, DatasetScan]]) -> None:
    """Ids of datasets read from their tables must not repeat another dataset's (compared
    case-insensitively, like `StudyIds`): a dataset read item by item was checked as read."""
    if len(scans) < 2:
        return
    lowered = [
        pc.utf8_lower(scan.every_id if scan.every_id is not None else scan.ids) for _, scan in scans
    ]
    hashes = np.concatenate([string_hashes(ids) for ids in lowered])
    owners = np.repeat(np.arange(len(scans)), [len(ids) for ids in lowered])
    order = np.argsort(hashes, kind="stable")
    same = np.flatnonzero(hashes[order][1:] == hashes[order][:-1])
    if not len(same):
        return
    every = pa.concat_arrays(
        [ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids for ids in lowered]
    )
    problems = []
    for at in same:
        a, b = int(order[at]), int(order[at + 1])
        if owners[a] == owners[b] or every[a].as_py() != every[b].as_py():
            continue  # one dataset's own (checked when it was written), or a hash collision
        first, second = scans[int(owners[a])][0], scans[int(owners[b])][0]
        problems.append(
            Problem(
                f"item id {every[b].as_py()!r} of dataset {second!r} is also an id of dataset "
                f"{first!r} (ids are compared case-insensitively)",
                item=every[b].as_py(),
                field="identifier",
                hint="item ids must be unique across all datasets of a study; give one "
                'dataset an id prefix (e.g. id_template: "<name>.{{ _index }}")',
            )
        )
        if len(problems) >= 10:
            break
    if problems:
        raise DatasetError(problems)


def merge_tables(scans: Sequence[DatasetScan], design: Design) -> TokenTables:
    """One `TokenTables` over every dataset's selected items, in dataset order."""
    merged = TokenTables(
        generate={s: TokenColumns("input", "output", "visible") for s in _shapes(design)},
        judge={j.id: TokenColumns("input") for j in design.judges},
    )
    for scan in scans:
        tables = scan.tables
        assert tables is not None
        merged.items += tables.items
        names = {code: name for name, code in tables.modalities.items()}
        remap = np.array(
            [
                merged.modalities.setdefault(names[c], len(merged.modalities))
                for c in range(len(names))
            ]
            or [0],
            dtype=np.int32,
        )
        codes = tables.modality
        merged._meta.add(modality=remap[codes] if len(codes) else codes)
        for shape, columns in merged.generate.items():
            theirs = tables.generate[shape]
            columns.add(**{c: theirs[c] for c in ("input", "output", "visible")})
        for judge_id, columns in merged.judge.items():
            columns.add(input=tables.judge[judge_id]["input"])
    return merged


def write_tables(design: Design, snapshot: SnapshotInfo, scan: DatasetScan) -> None:
    """Keep the scan's item tables beside the dataset's snapshot (a run's commit)."""
    tables = scan.tables
    if tables is None or scan.from_tables:
        return
    names = [name for name, _ in sorted(tables.modalities.items(), key=lambda kv: kv[1])]
    write_item_table(
        snapshot,
        modality_key(),
        {_MODALITY: tables.modality},
        {"names": names, "counts": dict(scan.modalities), "keys": scan.key_counts.as_json()},
    )
    for shape, columns in tables.generate.items():
        write_item_table(
            snapshot,
            generate_key(design, shape),
            {c: columns[c] for c in ("input", "output", "visible")},
        )
    for judge in design.judges:
        write_item_table(snapshot, judge_key(judge), {"input": tables.judge[judge.id]["input"]})
