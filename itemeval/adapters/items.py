"""The item format (a dataset directory with `<id>.yaml`) as a `DatasetHandle`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from itemeval.adapters.handle import DatasetHandle, Fingerprint
from itemeval.adapters.rows import item_to_workitem
from itemeval.errors import Problem
from itemeval.spec.directory import DatasetReader
from itemeval.spec.findings import ProblemLog
from itemeval.workitem import WorkItem

if TYPE_CHECKING:
    from itemeval.adapters.source import DatasetSource


class ItemsHandle(DatasetHandle):
    """Items read through `itemeval.spec.read_dataset`; each `Item` becomes a `WorkItem` with
    the dataset's `taskPrompt` where the item has none."""

    format = "items"

    def __init__(self, source: DatasetSource, name: str, reader: DatasetReader):
        super().__init__(source, name, reader.location.url)
        self.reader = reader

    def open_warnings(self) -> list[Problem]:
        return list(self.reader.meta_warnings)

    def _scan(self, log: ProblemLog, counts: Counter[str] | None) -> Iterator[WorkItem]:
        task_prompt = self.reader.meta.task_prompt
        for item in self.reader.scan(log, counts):
            yield item_to_workitem(item, self.name, task_prompt)

    def _compute_fingerprint(self) -> Fingerprint:
        return Fingerprint(files=self.reader.file_hashes())
