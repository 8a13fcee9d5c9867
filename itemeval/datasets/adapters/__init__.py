"""Every input format to the pipeline's `WorkItem`: the item format, JSONL, CSV and parquet files
through a mapping, and Hugging Face datasets (optional `hf` extra).

    from itemeval.datasets.adapters import DatasetSource, open_source
    handle = open_source(DatasetSource(path="datasets/arithmetic"), base_dir=study_dir)
    for batch in handle.iter_batches(1000):
        ...

The public names are `__all__` below; the modules are private: `_source` (`DatasetSource`,
`open_source`, format inference), `_mapping` (`MappingSpec`), `_rows` (a mapping applied to a
row), `_tables` (streaming JSONL/CSV/parquet rows), `_handle` (`DatasetHandle`, `Fingerprint`),
`_items`, `_files`, `_hf` (one handle per format), `_unique` (ids unique across a study),
`_convert` (`itemeval convert`: any source to the item format).
"""

from itemeval.datasets.adapters._convert import (
    ConvertSource,
    complete_meta,
    open_convert_source,
    set_attribute,
)
from itemeval.datasets.adapters._files import FilesHandle, MappedHandle
from itemeval.datasets.adapters._handle import DatasetHandle, Fingerprint
from itemeval.datasets.adapters._hf import HFHandle
from itemeval.datasets.adapters._items import ItemsHandle, item_to_workitem
from itemeval.datasets.adapters._mapping import (
    ChoicesSpec,
    MappingSpec,
    load_mapping_file,
    parse_mapping,
    validation_problems,
)
from itemeval.datasets.adapters._source import (
    SUFFIX_FORMATS,
    DatasetSource,
    default_name,
    open_source,
)
from itemeval.datasets.adapters._unique import StudyIds, check_unique_ids

__all__ = [
    "SUFFIX_FORMATS",
    "ChoicesSpec",
    "ConvertSource",
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
    "complete_meta",
    "default_name",
    "item_to_workitem",
    "load_mapping_file",
    "open_convert_source",
    "open_source",
    "parse_mapping",
    "set_attribute",
    "validation_problems",
]
