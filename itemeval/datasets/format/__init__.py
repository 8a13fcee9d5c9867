"""The item format: items and datasets (item spec, dataset spec v3.3), directories, dialects.

    from itemeval.datasets.format import read_dataset
    reader = read_dataset("s3://bucket/datasets/arithmetic")
    for batch in reader.iter_batches(1000):
        ...

The public names are `__all__` below; the modules are private: `_modality` (the closed
modality set), `_item` (`Item`, lenient `parse_item`), `_dataset` (`DatasetMeta`, the `hasPart`
naming rule), `_attributes` (case-insensitive names, lenient values), `_records` (streaming JSON
Lines), `_directory` (`read_dataset`), `_writer` (`write_dataset`), `_dialect` (the spec's and the
reference reader's), `_attribute_files` (items' ad hoc attributes beside the parts), `_findings`
(`Where`, `ProblemLog`).
"""

from itemeval.datasets.format._attribute_files import ATTRIBUTES_SUFFIX
from itemeval.datasets.format._dataset import DatasetMeta, parse_dataset_meta, part_names
from itemeval.datasets.format._dialect import Dialect, item_record, meta_record
from itemeval.datasets.format._directory import (
    DEFAULT_ITEMS_PER_PART,
    DatasetReader,
    DatasetReport,
    find_meta_file,
    is_dataset_directory,
    read_dataset,
    scan_item_file,
)
from itemeval.datasets.format._findings import ProblemLog, Where
from itemeval.datasets.format._item import ITEM_ATTRIBUTES, Item, parse_item
from itemeval.datasets.format._modality import (
    CHOICE_LETTERS,
    MAX_CHOICES,
    MIN_CHOICES,
    SPEC_MAX_CHOICES,
    Modality,
)
from itemeval.datasets.format._records import iter_records
from itemeval.datasets.format._writer import write_dataset

__all__ = [
    "ATTRIBUTES_SUFFIX",
    "CHOICE_LETTERS",
    "DEFAULT_ITEMS_PER_PART",
    "ITEM_ATTRIBUTES",
    "MAX_CHOICES",
    "MIN_CHOICES",
    "SPEC_MAX_CHOICES",
    "DatasetMeta",
    "DatasetReader",
    "DatasetReport",
    "Dialect",
    "Item",
    "Modality",
    "ProblemLog",
    "Where",
    "find_meta_file",
    "is_dataset_directory",
    "item_record",
    "iter_records",
    "meta_record",
    "parse_dataset_meta",
    "parse_item",
    "part_names",
    "read_dataset",
    "scan_item_file",
    "write_dataset",
]
