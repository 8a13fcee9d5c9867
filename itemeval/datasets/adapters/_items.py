"""The item format (a dataset directory with `<id>.yaml`) as a `DatasetHandle`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from itemeval.datasets._workitem import WorkItem
from itemeval.datasets.adapters._handle import DatasetHandle, Fingerprint
from itemeval.datasets.format import DatasetReader, Item, ProblemLog
from itemeval.errors import Problem

if TYPE_CHECKING:
    from itemeval.datasets.adapters._source import DatasetSource


class ItemsHandle(DatasetHandle):
    """Items read through `itemeval.datasets.format.read_dataset`; each `Item` becomes a
    `WorkItem` with the dataset's `taskPrompt` where the item has none."""

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


def item_to_workitem(item: Item, dataset: str, dataset_task_prompt: str | None = None) -> WorkItem:
    """An item-format `Item` as the pipeline's `WorkItem`: input = prompt, target = response,
    task prompt = the item's own, else the dataset's; metadata holds `support` and every ad hoc
    attribute (an ad hoc `gradingScheme` becomes the grading scheme)."""
    metadata: dict[str, Any] = {}
    grading: str | None = None
    if item.support is not None:
        metadata["support"] = item.support
    for key, value in item.extras.items():
        if key.casefold() == "gradingscheme" and isinstance(value, str):
            grading = value
        else:
            metadata[key] = value
    return WorkItem(
        id=item.identifier,
        input=item.prompt,
        target=item.response,
        grading_scheme=grading,
        metadata=metadata,
        dataset=dataset,
        modality=item.modality.value,
        task_prompt=item.task_prompt if item.task_prompt is not None else dataset_task_prompt,
        difficulty=item.difficulty,
    )
