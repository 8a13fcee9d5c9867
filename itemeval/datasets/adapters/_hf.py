"""Hugging Face `datasets` through a mapping (the optional `hf` extra, imported lazily).

Two kinds of source:

* a dataset saved with `Dataset.save_to_disk` / `DatasetDict.save_to_disk` (a local or fsspec
  directory): fingerprinted by the content of its files, like any other file source;
* a dataset on the Hub (`owner/name`): it must name a pinned `revision` (a commit sha), which is
  its fingerprint; it is streamed, never downloaded whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from itemeval._util.arrow_start import restore_pandas_probe
from itemeval.datasets.adapters._files import MappedHandle, MappedRowSource
from itemeval.datasets.adapters._handle import Fingerprint
from itemeval.datasets.adapters._mapping import MappingSpec
from itemeval.datasets.format import Where
from itemeval.datasets.format._directory import hash_file
from itemeval.errors import ConfigError, DatasetError, Problem
from itemeval.secrets import options_from_environment
from itemeval.storage import Location

if TYPE_CHECKING:
    from itemeval.datasets.adapters._source import DatasetSource

HF_ROWS_PER_BATCH = 1000
HF_SAVED_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")
_COMMIT_SHA = re.compile(r"^[0-9a-f]{40}\Z")


def import_datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            "the Hugging Face adapter needs the `datasets` package",
            hint="pip install 'itemeval[hf]'",
        ) from None
    restore_pandas_probe()  # `datasets` hands pyarrow pandas objects
    return datasets


def is_saved_hf_dataset(location: Location) -> bool:
    """True if `location` is a directory written by `save_to_disk`."""
    return location.isdir() and any(m in location.listdir() for m in HF_SAVED_MARKERS)


class HFHandle(MappedHandle):
    format = "hf"

    def __init__(
        self,
        source: DatasetSource,
        name: str,
        mapping: MappingSpec,
        *,
        local: Location | None,
        hub_id: str | None,
    ):
        super().__init__(source, name, local.url if local else f"hf:{hub_id}", mapping)
        self.local = local
        self.hub_id = hub_id

    def open_warnings(self) -> list[Problem]:
        revision = self.source.revision
        if self.hub_id and revision and not _COMMIT_SHA.match(revision):
            return [
                Problem(
                    f"revision {revision!r} is not a commit sha; a branch or tag can "
                    "move, and then the same study reads different data",
                    file=self.url,
                    field="revision",
                    severity="warning",
                    hint="pin the 40-character commit sha from the dataset's history",
                )
            ]
        return []

    def _rows(self) -> MappedRowSource:
        dataset, stem = self._load()
        names = getattr(dataset, "column_names", None)
        if names:
            missing = [(f, c) for f, c in self.mapping.referenced_columns() if c not in names]
            if missing:
                field, column = missing[0]
                where = Where(file=self.url)
                yield (
                    stem,
                    -1,
                    where,
                    where.error(
                        f"mapping.{field} names column {column!r}, which the dataset does not "
                        f"have (its columns: {', '.join(names)})",
                        field=f"mapping.{field}",
                        hint="fix the column name in the mapping",
                    ),
                )
                return
        for index, row in enumerate(_iter_rows(dataset)):
            yield stem, index, Where(file=self.url, line=index + 1), row

    def _load(self) -> tuple[Any, str]:
        datasets = import_datasets()
        split = self.source.split
        if self.local is None:
            loaded = datasets.load_dataset(
                self.hub_id,
                self.source.subset,
                split=split,
                revision=self.source.revision,
                streaming=True,
            )
            return loaded, split or "train"
        try:
            loaded = datasets.load_from_disk(
                self.local.url,
                storage_options=options_from_environment(self.source.storage_options) or None,
            )
        except (FileNotFoundError, ValueError) as exc:
            raise DatasetError(
                Problem(f"not a saved Hugging Face dataset: {exc}", file=self.local.url)
            ) from None
        if isinstance(loaded, datasets.DatasetDict):
            splits = list(loaded)
            if split is None and len(splits) == 1:
                split = splits[0]
            if split is None or split not in loaded:
                raise ConfigError(
                    Problem(
                        f"choose a split: {', '.join(splits)}"
                        if split is None
                        else f"no split {split!r}; the dataset has {', '.join(splits)}",
                        file=self.local.url,
                        field="split",
                    )
                )
            return loaded[split], split
        return loaded, split or self.local.name

    def _compute_fingerprint(self) -> Fingerprint:
        if self.local is None:
            source = self.source
            return Fingerprint(
                revision=f"{self.hub_id}@{source.revision}"
                + (f"/{source.subset}" if source.subset else "")
                + (f":{source.split}" if source.split else ""),
                mapping=self._mapping_hash(),
            )
        files = {}
        prefix = self.local.path.rstrip("/") + "/"
        for path in sorted(self.local.fs.find(self.local.path)):
            relative = str(path)[len(prefix) :] if str(path).startswith(prefix) else str(path)
            files[relative] = hash_file(self.local.join(relative))
        return Fingerprint(files=files, mapping=self._mapping_hash())


def _iter_rows(dataset: Any) -> Iterator[dict[str, Any]]:
    if hasattr(dataset, "iter") and hasattr(dataset, "num_rows"):  # a map-style Dataset
        for batch in dataset.iter(batch_size=HF_ROWS_PER_BATCH):
            keys = list(batch)
            for values in zip(*(batch[k] for k in keys), strict=True):
                yield dict(zip(keys, values, strict=True))
    else:  # an IterableDataset (streamed from the Hub)
        yield from dataset
