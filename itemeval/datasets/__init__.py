"""Datasets: the item format, the adapters that read every other input into `WorkItem`s, and
the study's dataset locks.

    from itemeval.datasets import DatasetSource, open_source, read_dataset
    handle = open_source(DatasetSource(path="datasets/arithmetic"), base_dir=study_dir)
    for batch in handle.iter_batches(1000):
        ...

- `workitem.py`: the canonical work item (`WorkItem`) and the arrow schema of item tables
- `format/`: the item and dataset format (item spec and dataset spec v3.3): reader, writer,
  and its two dialects (the spec's and the reference reader's)
- `adapters/`: every input format to `WorkItem`s (the item format, mapped JSONL/CSV/parquet
  files, Hugging Face), fingerprints, ids unique across a study
- `locks.py`: `dataset_locks.json`, each dataset pinned at first use, changed data refused

Names are imported on first use, so importing one module of the package stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    # the work item
    "ITEM_SCHEMA": "workitem",
    "WorkItem": "workitem",
    "items_to_table": "workitem",
    "table_to_items": "workitem",
    # the item format
    "DatasetMeta": "format",
    "DatasetReader": "format",
    "DatasetReport": "format",
    "Dialect": "format",
    "Item": "format",
    "Modality": "format",
    "parse_item": "format",
    "read_dataset": "format",
    "write_dataset": "format",
    # adapters
    "DatasetHandle": "adapters",
    "DatasetSource": "adapters",
    "Fingerprint": "adapters",
    "MappingSpec": "adapters",
    "open_source": "adapters",
    # locks
    "DatasetLocks": "locks",
    "check_pins": "locks",
    "pin_datasets": "locks",
    "read_locks": "locks",
}

__all__ = [
    "ITEM_SCHEMA",
    "DatasetHandle",
    "DatasetLocks",
    "DatasetMeta",
    "DatasetReader",
    "DatasetReport",
    "DatasetSource",
    "Dialect",
    "Fingerprint",
    "Item",
    "MappingSpec",
    "Modality",
    "WorkItem",
    "check_pins",
    "items_to_table",
    "open_source",
    "parse_item",
    "pin_datasets",
    "read_dataset",
    "read_locks",
    "table_to_items",
    "write_dataset",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'itemeval.datasets' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"itemeval.datasets.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # pragma: no cover
    from itemeval.datasets.adapters import (
        DatasetHandle,
        DatasetSource,
        Fingerprint,
        MappingSpec,
        open_source,
    )
    from itemeval.datasets.format import (
        DatasetMeta,
        DatasetReader,
        DatasetReport,
        Dialect,
        Item,
        Modality,
        parse_item,
        read_dataset,
        write_dataset,
    )
    from itemeval.datasets.locks import DatasetLocks, check_pins, pin_datasets, read_locks
    from itemeval.datasets.workitem import ITEM_SCHEMA, WorkItem, items_to_table, table_to_items
