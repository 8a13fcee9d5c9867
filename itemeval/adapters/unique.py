"""Item identifiers unique across all datasets of a study, compared case-insensitively.

`StudyIds` keeps every dataset's casefolded identifiers as arrow arrays (tens of bytes per item,
so a million identifiers take tens of megabytes) and checks each batch against the datasets
seen before with one vectorised membership test. Duplicates within one dataset are the
dataset's own error (its handle reports them with line numbers); this module reports
identifiers that two datasets share.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from itemeval.adapters.handle import DatasetHandle
from itemeval.errors import DatasetError, Problem
from itemeval.workitem import WorkItem

MAX_REPORTED = 10


class StudyIds:
    """Tracks identifiers across datasets; `track` wraps a dataset's batches."""

    def __init__(self) -> None:
        self._datasets: list[str] = []
        self._ids: list[pa.Array] = []  # casefolded ids of each finished dataset, one array each

    def track(self, dataset: str, batches: Iterable[list[WorkItem]]) -> Iterator[list[WorkItem]]:
        """Yield `batches` unchanged; once they are exhausted, raise `DatasetError` if any id
        was already used by another dataset (naming both datasets and the ids)."""
        if dataset in self._datasets:
            raise ValueError(f"dataset {dataset!r} is tracked twice")
        earlier = pa.chunked_array(self._ids, pa.string()).combine_chunks() if self._ids else None
        mine: list[pa.Array] = []
        clashes: list[str] = []
        clash_count = 0
        for batch in batches:
            folded = pa.array([item.id.casefold() for item in batch], pa.string())
            mine.append(folded)
            if earlier is not None and len(earlier):
                shared = pc.is_in(folded, value_set=earlier).to_numpy(zero_copy_only=False)
                if shared.any():
                    clash_count += int(shared.sum())
                    for index in shared.nonzero()[0][: MAX_REPORTED - len(clashes)]:
                        clashes.append(batch[int(index)].id)
            yield batch
        self._datasets.append(dataset)
        self._ids.append(pa.chunked_array(mine, pa.string()).combine_chunks())
        if clashes:
            raise DatasetError(self._problems(dataset, clashes, clash_count))

    def _owner(self, item_id: str) -> str:
        folded = pa.array([item_id.casefold()], pa.string())
        for name, ids in zip(self._datasets, self._ids, strict=True):
            if pc.any(pc.is_in(ids, value_set=folded)).as_py():
                return name
        return "another dataset"

    def _problems(self, dataset: str, clashes: list[str], count: int) -> list[Problem]:
        problems = [
            Problem(
                f"item id {item_id!r} of dataset {dataset!r} is also an id of dataset "
                f"{self._owner(item_id)!r} (ids are compared case-insensitively)",
                item=item_id,
                field="identifier",
                hint="item ids must be unique across all datasets of a study; give one "
                'dataset an id prefix (e.g. id_template: "<name>.{{ _index }}")',
            )
            for item_id in clashes
        ]
        if count > len(clashes):
            problems.append(Problem(f"... {count - len(clashes)} more shared ids"))
        return problems


def check_unique_ids(handles: Iterable[DatasetHandle], batch_size: int = 10_000) -> int:
    """Read every handle once and raise `DatasetError` if two datasets share an item id;
    returns the number of items read."""
    ids = StudyIds()
    total = 0
    for handle in handles:
        for batch in ids.track(handle.name, handle.iter_batches(batch_size)):
            total += len(batch)
    return total
