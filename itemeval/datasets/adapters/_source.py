"""`DatasetSource` (one entry of a study's `datasets:` list) and `open_source`, which turns it
into a `DatasetHandle` of the right format.

    datasets:
      - path: datasets/arithmetic                 # an item-format directory: nothing else needed
      - name: gsm8k
        path: s3://bench/gsm8k/test.jsonl
        mapping: mappings/gsm8k.yaml              # or the mapping fields inline
      - name: mmlu
        path: data/mmlu/test/*.csv                # a glob (or a directory) of files
        mapping: {columns: [question, A, B, C, D, answer], input: question, ...}

Relative paths (the data and a mapping file) resolve against the study file's folder. fsspec
options: an entry's own `storage_options`, else what the study's rules give each URL
(`storage.OptionsByUrl`: `storage_options` of the store's protocol, `storage_options_by_prefix`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from itemeval.datasets.adapters._files import FilesHandle
from itemeval.datasets.adapters._handle import DatasetHandle
from itemeval.datasets.adapters._hf import HFHandle, is_saved_hf_dataset
from itemeval.datasets.adapters._items import ItemsHandle
from itemeval.datasets.adapters._mapping import (
    MappingSpec,
    load_mapping_file,
    resolve_relative,
)
from itemeval.datasets.format import is_dataset_directory, read_dataset
from itemeval.errors import ConfigError, DatasetError, Problem
from itemeval.ids import slugify
from itemeval.secrets import option_problems
from itemeval.storage import Location, OptionsByUrl, resolve

DatasetFormat = Literal["items", "jsonl", "csv", "parquet", "hf"]
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*\Z")
SUFFIX_FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".yaml": "items",
    ".yml": "items",
}
MAPPED_FORMATS = ("jsonl", "csv", "parquet", "hf")
_GLOB_CHARS = re.compile(r"[*?\[]")


class DatasetSource(BaseModel):
    """Where a dataset is and how to read it (one entry of a study's `datasets:`)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(
        default=None,
        description="slug naming the dataset in the study and the store (default: from path)",
    )
    path: str = Field(description="directory, file, glob, fsspec URL, or Hub id (format: hf)")
    format: DatasetFormat | None = Field(
        default=None, description="items | jsonl | csv | parquet | hf (inferred when omitted)"
    )
    mapping: MappingSpec | str | None = Field(
        default=None, description="mapping fields, or the path of a mapping YAML file"
    )
    revision: str | None = Field(default=None, description="Hub commit sha (format: hf)")
    split: str | None = Field(default=None, description="split (format: hf)")
    subset: str | None = Field(default=None, description="configuration name (format: hf)")
    storage_options: dict[str, Any] = Field(
        default_factory=dict, repr=False, description="fsspec options (e.g. an S3 endpoint)"
    )

    @model_validator(mode="after")
    def _check(self) -> DatasetSource:
        if not self.path.strip():
            raise ValueError("`path` must not be empty")
        problems = option_problems(self.storage_options, "storage_options")
        if problems:
            raise ValueError("; ".join(problems))
        if self.name is None:
            self.name = default_name(self.path)
        if not NAME_PATTERN.match(self.name):
            raise ValueError(
                f"name {self.name!r} must be a slug: lower-case letters, digits, - _ . "
                f"(e.g. {slugify(self.name)!r})"
            )
        if self.format == "items" and self.mapping is not None:
            raise ValueError("a `mapping` is for jsonl, csv, parquet and hf sources, not items")
        if self.format in MAPPED_FORMATS and self.mapping is None:
            raise ValueError(f"format {self.format} needs a `mapping` (see docs/datasets.md)")
        if self.format != "hf" and self.format is not None:
            for key in ("revision", "split", "subset"):
                if getattr(self, key) is not None:
                    raise ValueError(f"`{key}` is for Hugging Face sources (format: hf)")
        return self


def default_name(path: str) -> str:
    """A dataset name from its path: the last component that is not a glob, without suffix."""
    parts = [p for p in re.split(r"[/\\]", path.rstrip("/")) if p and not _GLOB_CHARS.search(p)]
    last = parts[-1] if parts else "dataset"
    for suffix in SUFFIX_FORMATS:
        if last.lower().endswith(suffix):
            last = last[: -len(suffix)]
            break
    return slugify(last)


def open_source(
    source: DatasetSource,
    base_dir: str | Path | None = None,
    storage: OptionsByUrl | None = None,
) -> DatasetHandle:
    """Open `source` (relative paths resolve against `base_dir`, the study file's folder; a URL
    without the entry's own `storage_options` takes what `storage` gives it).

    Raises `ConfigError` when the entry cannot work (no mapping, unknown format, a Hub dataset
    without a revision) and `DatasetError` when the data or its metadata is invalid."""
    name = source.name or default_name(source.path)
    url = resolve_relative(source.path, base_dir)
    mapping_storage = storage if not source.storage_options else None
    source = _with_options(source, url, storage)
    options = source.storage_options or None
    if source.format == "hf":
        return _open_hf(source, name, base_dir, mapping_storage)
    directory, pattern = _split_glob(url)
    location = resolve(directory, options)
    location.invalidate()  # object stores cache listings; another process may have written
    fmt = source.format or infer_format(location, pattern, name)
    if fmt == "items":
        if pattern:
            raise ConfigError(
                _problem(name, "path", "an item-format dataset is a directory, not a glob")
            )
        return ItemsHandle(source, name, read_dataset(location.url, options))
    mapping = _load_mapping(source, name, base_dir, fmt, mapping_storage)
    if fmt == "hf":
        return HFHandle(source, name, mapping, local=location, hub_id=None)
    files = list_files(location, pattern, fmt)
    if not files:
        raise DatasetError(_problem(name, "path", f"no {fmt} files at {url}", file=url))
    base = location if location.isdir() or pattern else location.parent()
    return FilesHandle(source, name, url, mapping, format=fmt, files=files, base=base)


def infer_format(location: Location, pattern: str | None, name: str) -> str:
    """`items` for a directory holding `<id>.yaml` (or the yaml itself), `hf` for a directory
    written by `save_to_disk`, else by file suffix (of the path, the glob, or the files in a
    directory)."""
    suffix_source = pattern or location.name
    for suffix, fmt in SUFFIX_FORMATS.items():
        if suffix_source.lower().endswith(suffix):
            return fmt
    if pattern is None and location.isdir():
        if is_dataset_directory(location):
            return "items"
        if is_saved_hf_dataset(location):
            return "hf"
        found = {
            SUFFIX_FORMATS[s]
            for n in location.listdir()
            for s in SUFFIX_FORMATS
            if n.lower().endswith(s)
        } - {"items"}
        if len(found) == 1:
            return found.pop()
        if found:
            raise ConfigError(
                _problem(
                    name,
                    "format",
                    f"the directory holds {', '.join(sorted(found))} "
                    "files; set `format:` or use a glob",
                    file=location.url,
                )
            )
    if not location.exists():
        raise ConfigError(_problem(name, "path", "no such file or directory", file=location.url))
    raise ConfigError(
        _problem(
            name,
            "format",
            "cannot tell the format from the path; set "
            "`format:` (items, jsonl, csv, parquet or hf)",
            file=location.url,
        )
    )


def list_files(location: Location, pattern: str | None, fmt: str) -> list[Location]:
    """The data files of a source, sorted: the file itself, the matches of a glob, or the
    directory's files with a suffix of `fmt`."""
    if pattern is not None:
        paths = location.glob(pattern)
    elif location.isdir():
        suffixes = tuple(s for s, f in SUFFIX_FORMATS.items() if f == fmt)
        paths = [location.join(n).path for n in location.listdir() if n.lower().endswith(suffixes)]
    else:
        return [location] if location.exists() else []
    prefix = location.path.rstrip("/") + "/"
    return [location.join(p[len(prefix) :]) for p in sorted(paths) if p.startswith(prefix)]


def _with_options(source: DatasetSource, url: str, storage: OptionsByUrl | None) -> DatasetSource:
    """`source` with the options `storage` gives its URL, unless it names its own."""
    if source.storage_options or storage is None:
        return source
    options = storage.for_url(url)
    return source.model_copy(update={"storage_options": options}) if options else source


def _open_hf(
    source: DatasetSource,
    name: str,
    base_dir: str | Path | None,
    mapping_storage: OptionsByUrl | None,
) -> DatasetHandle:
    mapping = _load_mapping(source, name, base_dir, "hf", mapping_storage)
    candidate = resolve_relative(source.path, base_dir)
    local = resolve(candidate, source.storage_options or None)
    if "://" in source.path or source.path.startswith(("/", ".", "~")) or local.exists():
        if not local.exists():
            raise ConfigError(_problem(name, "path", "no such directory", file=local.url))
        return HFHandle(source, name, mapping, local=local, hub_id=None)
    if not source.revision:
        raise ConfigError(
            _problem(
                name,
                "revision",
                f"the Hub dataset {source.path!r} needs a pinned `revision` (a commit sha), so "
                "that every run reads the same data",
                hint="copy the commit sha from the dataset page's history",
            )
        )
    return HFHandle(source, name, mapping, local=None, hub_id=source.path)


def _load_mapping(
    source: DatasetSource,
    name: str,
    base_dir: str | Path | None,
    fmt: str,
    storage: OptionsByUrl | None = None,
) -> MappingSpec:
    """The entry's mapping; a mapping file is read with the entry's own options, else with
    what `storage` gives the file's URL (it may live elsewhere than the data)."""
    if source.mapping is None:
        raise ConfigError(
            _problem(
                name,
                "mapping",
                f"a {fmt} source needs a `mapping` (which column is the input, the target, ...)",
                hint="see docs/datasets.md, or configs/mappings/ for examples",
            )
        )
    if isinstance(source.mapping, MappingSpec):
        return source.mapping
    path = resolve_relative(source.mapping, base_dir)
    options = storage.for_url(path) if storage is not None else source.storage_options or None
    spec, _ = load_mapping_file(path, options)
    return spec


def _split_glob(url: str) -> tuple[str, str | None]:
    """("dir", "*.csv") for "dir/*.csv"; (url, None) without glob characters."""
    match = _GLOB_CHARS.search(url)
    if match is None:
        return url, None
    cut = url.rfind("/", 0, match.start())
    return url[:cut], url[cut + 1 :]


def _problem(
    name: str, field: str, message: str, *, file: str | None = None, hint: str | None = None
) -> Problem:
    return Problem(f"dataset {name!r}: {message}", file=file, field=field, hint=hint)
