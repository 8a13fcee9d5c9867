"""Item identifiers unique across all datasets of a study, compared case-insensitively.

`StudyIds` remembers, for every identifier seen (casefolded), which dataset it came from: one
small dict entry per item, so a million identifiers take on the order of 100 MB. Duplicates
within one dataset are the dataset's own error (its handle reports them with line numbers);
this module reports identifiers that two datasets share.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from itemeval.adapters.handle import DatasetHandle
from itemeval.errors import DatasetError, Problem
from itemeval.workitem import WorkItem

MAX_REPORTED = 10


class StudyIds:
    """Tracks identifiers across datasets; `track` wraps a dataset's batches."""

    def __init__(self) -> None:
        self._datasets: list[str] = []
        self._owner: dict[str, int] = {}  # casefolded id -> index into _datasets

    def track(self, dataset: str, batches: Iterable[list[WorkItem]]) -> Iterator[list[WorkItem]]:
        """Yield `batches` unchanged; once they are exhausted, raise `DatasetError` if any id
        was already used by another dataset (naming both datasets and the ids)."""
        if dataset in self._datasets:
            raise ValueError(f"dataset {dataset!r} is tracked twice")
        self._datasets.append(dataset)
        mine = len(self._datasets) - 1
        clashes: list[tuple[str, int]] = []
        clash_count = 0
        for batch in batches:
            for item in batch:
                owner = self._owner.setdefault(item.id.casefold(), mine)
                if owner != mine:
                    clash_count += 1
                    if len(clashes) < MAX_REPORTED:
                        clashes.append((item.id, owner))
            yield batch
        if clashes:
            raise DatasetError(self._problems(dataset, clashes, clash_count))

    def _problems(self, dataset: str, clashes: list[tuple[str, int]], count: int) -> list[Problem]:
        problems = [
            Problem(
                f"item id {item_id!r} of dataset {dataset!r} is also an id of dataset "
                f"{self._datasets[owner]!r} (ids are compared case-insensitively)",
                item=item_id,
                field="identifier",
                hint=None
                if n
                else "item ids must be unique across all datasets of a study; give one "
                'dataset an id prefix (e.g. id_template: "<name>.{{ _index }}")',
            )
            for n, (item_id, owner) in enumerate(clashes)
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
