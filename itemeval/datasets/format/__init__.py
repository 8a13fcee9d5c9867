"""The item format: items and datasets (item spec, dataset spec v3.3), directories, dialects.

    from itemeval.datasets.format import read_dataset
    reader = read_dataset("s3://bucket/datasets/arithmetic")
    for batch in reader.iter_batches(1000):
        ...

Modules: `modality` (the closed modality set), `item` (`Item`, lenient `parse_item`), `dataset`
(`DatasetMeta`, the `hasPart` naming rule), `attributes` (case-insensitive names, lenient values),
`records` (streaming JSON Lines), `directory` (`read_dataset`), `writer` (`write_dataset`),
`dialect` (the spec's and the reference reader's), `attribute_files` (items' ad hoc attributes
beside the parts), `findings` (`Where`, `ProblemLog`).
"""

from itemeval.datasets.format.dataset import DatasetMeta, parse_dataset_meta, part_names
from itemeval.datasets.format.dialect import Dialect
from itemeval.datasets.format.directory import (
    DatasetReader,
    DatasetReport,
    find_meta_file,
    is_dataset_directory,
    read_dataset,
)
from itemeval.datasets.format.findings import ProblemLog, Where
from itemeval.datasets.format.item import Item, parse_item
from itemeval.datasets.format.modality import Modality
from itemeval.datasets.format.writer import write_dataset

__all__ = [
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
    "parse_dataset_meta",
    "parse_item",
    "part_names",
    "read_dataset",
    "write_dataset",
]
