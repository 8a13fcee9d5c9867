"""Reading a dataset directory the way the reference reader (commoneval 0.2.1) reads it.

`Dataset.read_yaml` builds the dataset from the yaml (`Dataset(**yaml)`: unknown keys are a
TypeError), and `Dataset.read_items(itemclass, basepath)` runs the reader's own loop over the
parts: it lifts `otherargs.choices`, turns a multiple-choice letter into an index, makes the
modality its enum and calls `itemclass(**record)`. The loop takes one class for every item; we
hand it a function that picks the reader's class for each item's modality, so each item is built
with `BooleanItem`, `TernaryItem`, `ClosedSetItem` or `OpenEndedItem`, as its modality needs.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from commoneval import dataset as reader_dataset
from commoneval import item as reader_item

CLASSES: dict[str, type] = {
    "boolean": reader_item.BooleanItem,
    "ternary": reader_item.TernaryItem,
    "choiceof2": reader_item.ClosedSetItem,
    "choiceof3": reader_item.ClosedSetItem,
    "choiceof4": reader_item.ClosedSetItem,
    "choiceof5": reader_item.ClosedSetItem,
    "cloze": reader_item.OpenEndedItem,
    "singlevalue": reader_item.OpenEndedItem,
    "shortprose": reader_item.OpenEndedItem,
    "longprose": reader_item.OpenEndedItem,
}


def build_item(**record: Any) -> Any:
    """The reader's class for this item's modality, built from the reader's record."""
    return CLASSES[record["modality"].value](**record)


def read_with_reference_reader(directory: Path) -> tuple[Any, list[Any]]:
    """The dataset and its items as commoneval 0.2.1 reads them (raises what it raises)."""
    (yaml_file,) = directory.glob("*.yaml")
    with yaml_file.open(encoding="utf-8") as handle:
        dataset = reader_dataset.Dataset.read_yaml(handle)
    with contextlib.redirect_stdout(io.StringIO()):  # it prints "Read N items from ..."
        dataset.read_items(build_item, basepath=directory)
    return dataset, dataset.items
