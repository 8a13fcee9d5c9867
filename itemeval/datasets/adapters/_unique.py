"""Item identifiers unique across all datasets of a study, compared case-insensitively.

`StudyIds` keeps the identifiers of the datasets read so far as sorted `id_keys` (18 bytes per
item with the dataset it came from, so a million identifiers take 18 MB) and checks each batch
of the next dataset against them with one binary search. Duplicates within one dataset are the
dataset's own error (its handle reports them with line numbers); this module reports
identifiers that two datasets share.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from itemeval.datasets._workitem import WorkItem
from itemeval.datasets.adapters._handle import DatasetHandle
from itemeval.datasets.format._directory import ID_KEY, find_keys, id_keys
from itemeval.errors import DatasetError, Problem

MAX_REPORTED = 10


class StudyIds:
    """Tracks identifiers across datasets; `track` wraps a dataset's batches."""

    def __init__(self) -> None:
        self._datasets: list[str] = []
        self._keys = np.zeros(0, dtype=ID_KEY)  # every earlier dataset's ids, sorted
        self._owners = np.zeros(0, dtype=np.int16)  # which dataset each key came from

    def track(
        self, dataset: str, batches: Iterable[list[WorkItem]], *, last: bool = False
    ) -> Iterator[list[WorkItem]]:
        """Yield `batches` unchanged; once they are exhausted, raise `DatasetError` if any id
        was already used by another dataset (naming both datasets and the ids). `last`: no
        dataset comes after, so this one's ids need not be kept."""
        if dataset in self._datasets:
            raise ValueError(f"dataset {dataset!r} is tracked twice")
        mine: list[np.ndarray] = []
        clashes: list[tuple[str, str]] = []  # (id, the earlier dataset that has it)
        clash_count = 0
        for batch in batches:
            keys = id_keys([item.id for item in batch])
            if not last:
                mine.append(keys)
            at = find_keys(self._keys, keys)
            shared = np.flatnonzero(at >= 0)
            clash_count += len(shared)
            for index in shared[: MAX_REPORTED - len(clashes)]:
                owner = self._datasets[int(self._owners[at[index]])]
                clashes.append((batch[int(index)].id, owner))
            yield batch
        self._datasets.append(dataset)
        if mine:
            keys = np.concatenate([self._keys, *mine])
            owners = np.concatenate(
                [self._owners, np.full(len(keys) - len(self._keys), len(self._datasets) - 1)]
            )
            order = np.argsort(keys, kind="stable")
            self._keys, self._owners = keys[order], owners[order].astype(np.int16)
        if clashes:
            raise DatasetError(self._problems(dataset, clashes, clash_count))

    @staticmethod
    def _problems(dataset: str, clashes: list[tuple[str, str]], count: int) -> list[Problem]:
        problems = [
            Problem(
                f"item id {item_id!r} of dataset {dataset!r} is also an id of dataset "
                f"{owner!r} (ids are compared case-insensitively)",
                item=item_id,
                field="identifier",
                hint="item ids must be unique across all datasets of a study; give one "
                'dataset an id prefix (e.g. id_template: "<name>.{{ _index }}")',
            )
            for item_id, owner in clashes
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
