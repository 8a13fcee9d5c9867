"""What `itemeval convert` reads: a source of items, and the dataset attributes to write.

A source is a benchmark file read through a mapping (JSONL, CSV, parquet, a saved Hugging Face
dataset) or a dataset already in the item format (either dialect), which is then re-written, so
any dataset can be written in the spec's dialect or the reference reader's.

The attributes come from the mapping file's `dataset:` section (or the source dataset's yaml),
then `--set`. The spec requires ten of them; a throwaway conversion should not have to invent
nine, so `complete_meta` fills what is not given (from the source where it can: `source` is the
path converted) with a warning for each, and a strict conversion refuses instead.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from itemeval.datasets.adapters._files import MappedHandle
from itemeval.datasets.adapters._mapping import load_mapping_file
from itemeval.datasets.adapters._source import DatasetSource, default_name, open_source
from itemeval.datasets.format import (
    DatasetMeta,
    DatasetReader,
    Item,
    ProblemLog,
    Where,
    is_dataset_directory,
    parse_dataset_meta,
    read_dataset,
)
from itemeval.datasets.format._dataset import DESCRIPTIVE_REQUIRED
from itemeval.errors import ConfigError, Problem
from itemeval.storage import resolve

# What a required attribute becomes when nothing gives it. "und" is ISO 639-3 for
# "undetermined"; NOASSERTION is SPDX's "no license information given".
UNKNOWN = "unknown"
DEFAULTS: dict[str, str] = {
    "creator": UNKNOWN,
    "publisher": UNKNOWN,
    "subject": UNKNOWN,
    "language": "und",
    "license": "NOASSERTION",
}
# what the writer decides, never carried over from the source's yaml
_NOT_CARRIED = {"haspart", "items", "itemattributes"}


@dataclass
class ConvertSource:
    """An opened source: its items (readable more than once) and the attributes it brings."""

    url: str
    attributes: dict[str, Any]  # from the mapping's `dataset:` or the source dataset's yaml
    attributes_file: str | None  # where they came from (for messages)
    mapped: MappedHandle | None = None
    reader: DatasetReader | None = None

    def scan(self, log: ProblemLog, counts: Counter[str] | None = None) -> Iterator[Item]:
        """Every item once; findings go to `log` (nothing is yielded after an error)."""
        if self.mapped is not None:
            return self.mapped.scan_items(log, counts)
        assert self.reader is not None
        # a required attribute the source does not give is filled in, with its own warning
        log.extend([w for w in self.reader.meta_warnings if w.field not in DESCRIPTIVE_REQUIRED])
        return self.reader.scan(log, counts)

    def name_items(self, dataset_id: str) -> None:
        """A mapping's `{{ _dataset }}` is the identifier being written."""
        if self.mapped is not None:
            self.mapped.name = dataset_id


def open_convert_source(
    path: str, *, mapping_file: str | None = None, fmt: str | None = None
) -> ConvertSource:
    """Open `path` for conversion: through `mapping_file`, or as an item-format dataset."""
    location = resolve(path)
    is_items = fmt == "items" or (fmt is None and _is_item_directory(location))
    if is_items:
        if mapping_file is not None:
            raise ConfigError(
                Problem(
                    "this is a dataset in the item format: it needs no mapping",
                    file=location.url,
                    hint="drop --mapping to re-write it (e.g. in another --dialect)",
                )
            )
        reader = read_dataset(path)
        attributes = {
            k: v for k, v in reader.meta.to_dict().items() if k.casefold() not in _NOT_CARRIED
        }
        return ConvertSource(
            reader.location.url, attributes, reader.meta_location.url, reader=reader
        )
    if mapping_file is None:
        raise ConfigError(
            Problem(
                "a JSONL, CSV or parquet source needs --mapping (which column is what)",
                file=location.url,
                hint="see configs/mappings/ for examples; an item-format dataset (a directory "
                "with <id>.yaml) needs none",
            )
        )
    mapping, attributes = load_mapping_file(mapping_file)
    source = DatasetSource(name=default_name(path), path=path, mapping=mapping, format=fmt)
    handle = open_source(source)
    if not isinstance(handle, MappedHandle):
        raise ConfigError(Problem("convert reads JSONL, CSV or parquet files", file=path))
    return ConvertSource(handle.url, dict(attributes), resolve(mapping_file).url, mapped=handle)


def set_attribute(attributes: dict[str, Any], key: str, value: Any) -> None:
    """Set `key`, replacing the same attribute under another spelling (names are
    case-insensitive)."""
    for existing in [k for k in attributes if str(k).casefold() == key.casefold()]:
        del attributes[existing]
    attributes[key] = value


def complete_meta(
    attributes: dict[str, Any],
    dataset_id: str,
    *,
    source: str,
    attributes_file: str | None,
    from_mapping: bool = True,
) -> tuple[DatasetMeta, list[Problem]]:
    """The metadata to write: `attributes` with the identifier, and every required attribute
    that is not given filled in (from `source` or `DEFAULTS`), with a warning each. Raises
    `ConfigError` for attributes that are given but wrong."""
    raw = {
        k: v
        for k, v in attributes.items()
        if str(k).casefold() not in _NOT_CARRIED and str(k).casefold() != "identifier"
    }
    raw["identifier"] = dataset_id
    raw["hasPart"] = [f"{dataset_id}.jsonl"]  # replaced by the parts actually written
    where = Where(file=attributes_file)
    meta, problems = parse_dataset_meta(raw, where)
    errors = [p for p in problems if p.severity == "error"]
    if meta is None or errors:
        raise ConfigError([_in_cli_terms(p, attributes_file) for p in errors])
    # "not given" warnings are replaced by what was filled in
    notes = [p for p in problems if p.field not in DESCRIPTIVE_REQUIRED]
    defaults = {
        **DEFAULTS,
        "created": dt.date.today().isoformat(),
        "source": source,
        "description": f"{dataset_id}: items converted from {source}",
    }
    filled: dict[str, str] = {}
    for name in meta.not_given():
        filled[name] = defaults[name]
        notes.append(
            Problem(
                f"required attribute not given; wrote {defaults[name]!r}",
                file=attributes_file,
                field=f"dataset.{name}" if from_mapping else name,
                hint=_where_to_give(name, from_mapping),
                severity="warning",
            )
        )
    if filled:
        raw.update(filled)
        meta, _ = parse_dataset_meta(raw, where)
        assert meta is not None
    return meta, notes


def _is_item_directory(location: Any) -> bool:
    return location.path.lower().endswith((".yaml", ".yml")) or (
        location.isdir() and is_dataset_directory(location)
    )


def _where_to_give(name: str, from_mapping: bool) -> str:
    if from_mapping:
        return f"add `{name}:` under `dataset:` in the mapping file, or pass --set {name}=..."
    return f"pass --set {name}=..."


def _in_cli_terms(problem: Problem, attributes_file: str | None) -> Problem:
    return Problem(
        f"dataset attribute: {problem.message}",
        file=attributes_file,
        field=f"dataset.{problem.field}" if problem.field else "dataset",
        hint=problem.hint,
    )
