"""Every input format to the pipeline's `WorkItem`: the item format, JSONL, CSV and parquet files
through a mapping, and Hugging Face datasets (optional `hf` extra).

    from itemeval.datasets.adapters import DatasetSource, open_source
    handle = open_source(DatasetSource(path="datasets/arithmetic"), base_dir=study_dir)
    for batch in handle.iter_batches(1000):
        ...

Modules: `source` (`DatasetSource`, `open_source`, format inference), `mapping` (`MappingSpec`),
`rows` (a mapping applied to a row), `tables` (streaming JSONL/CSV/parquet rows), `handle`
(`DatasetHandle`, `Fingerprint`), `items`, `files`, `hf` (one handle per format), `unique`
(ids unique across a study).
"""

from itemeval.datasets.adapters.files import FilesHandle, MappedHandle
from itemeval.datasets.adapters.handle import DatasetHandle, Fingerprint
from itemeval.datasets.adapters.hf import HFHandle
from itemeval.datasets.adapters.items import ItemsHandle, item_to_workitem
from itemeval.datasets.adapters.mapping import (
    ChoicesSpec,
    MappingSpec,
    load_mapping_file,
    parse_mapping,
)
from itemeval.datasets.adapters.source import DatasetSource, open_source
from itemeval.datasets.adapters.unique import StudyIds, check_unique_ids

__all__ = [
    "ChoicesSpec",
    "DatasetHandle",
    "DatasetSource",
    "FilesHandle",
    "Fingerprint",
    "HFHandle",
    "ItemsHandle",
    "MappedHandle",
    "MappingSpec",
    "StudyIds",
    "check_unique_ids",
    "item_to_workitem",
    "load_mapping_file",
    "open_source",
    "parse_mapping",
]
