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
