"""The item and dataset formats (item spec and dataset spec v3.3) and dataset directories.

    from itemeval.spec import read_dataset
    reader = read_dataset("s3://bucket/datasets/arithmetic")
    for batch in reader.iter_batches(1000):
        ...

Modules: `modality` (the closed modality set), `item` (`Item`, lenient `parse_item`), `dataset`
(`DatasetMeta`, the `hasPart` naming rule), `attributes` (case-insensitive names, lenient values),
`records` (streaming JSON Lines), `directory` (`read_dataset`), `writer` (`write_dataset`),
`dialect` (the spec's and the reference reader's), `attribute_files` (items' ad hoc attributes
beside the parts), `findings` (`Where`, `ProblemLog`).
"""

from itemeval.spec.dataset import DatasetMeta, parse_dataset_meta, part_names
from itemeval.spec.dialect import Dialect
from itemeval.spec.directory import (
    DatasetReader,
    DatasetReport,
    find_meta_file,
    is_dataset_directory,
    read_dataset,
)
from itemeval.spec.findings import ProblemLog, Where
from itemeval.spec.item import Item, parse_item
from itemeval.spec.modality import Modality
from itemeval.spec.writer import write_dataset

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
