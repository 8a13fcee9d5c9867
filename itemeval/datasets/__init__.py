"""Datasets: the item format, the adapters that read every other input into `WorkItem`s, and
the study's dataset locks.

    from itemeval.datasets import DatasetSource, open_source, read_dataset
    handle = open_source(DatasetSource(path="datasets/arithmetic"), base_dir=study_dir)
    for batch in handle.iter_batches(1000):
        ...

- `_workitem`: the canonical work item (`WorkItem`) and the arrow schema of item tables
- `format/`: the item and dataset format (item spec and dataset spec v3.3): reader, writer,
  and its two dialects (the spec's and the reference reader's)
- `adapters/`: every input format to `WorkItem`s (the item format, mapped JSONL/CSV/parquet
  files, Hugging Face), fingerprints, ids unique across a study
- `_locks`: `dataset_locks.json`, each dataset pinned at first use, changed data refused

`format` and `adapters` are public packages; the modules are private. The public names are
`__all__`, imported on first use, so importing one module of the package stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _workitem: ITEM_SCHEMA WorkItem items_to_table table_to_items
    format: DatasetMeta DatasetReader DatasetReport Dialect Item Modality parse_item read_dataset
        write_dataset
    adapters: DatasetHandle DatasetSource Fingerprint MappingSpec open_source
    _locks: DatasetLocks check_pins pin_datasets read_locks
    """,
)


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from itemeval.datasets._locks import DatasetLocks as DatasetLocks
    from itemeval.datasets._locks import check_pins as check_pins
    from itemeval.datasets._locks import pin_datasets as pin_datasets
    from itemeval.datasets._locks import read_locks as read_locks
    from itemeval.datasets._workitem import ITEM_SCHEMA as ITEM_SCHEMA
    from itemeval.datasets._workitem import WorkItem as WorkItem
    from itemeval.datasets._workitem import items_to_table as items_to_table
    from itemeval.datasets._workitem import table_to_items as table_to_items
    from itemeval.datasets.adapters import DatasetHandle as DatasetHandle
    from itemeval.datasets.adapters import DatasetSource as DatasetSource
    from itemeval.datasets.adapters import Fingerprint as Fingerprint
    from itemeval.datasets.adapters import MappingSpec as MappingSpec
    from itemeval.datasets.adapters import open_source as open_source
    from itemeval.datasets.format import DatasetMeta as DatasetMeta
    from itemeval.datasets.format import DatasetReader as DatasetReader
    from itemeval.datasets.format import DatasetReport as DatasetReport
    from itemeval.datasets.format import Dialect as Dialect
    from itemeval.datasets.format import Item as Item
    from itemeval.datasets.format import Modality as Modality
    from itemeval.datasets.format import parse_item as parse_item
    from itemeval.datasets.format import read_dataset as read_dataset
    from itemeval.datasets.format import write_dataset as write_dataset
