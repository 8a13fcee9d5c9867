"""`write_dataset`: items and metadata to a dataset directory, in either dialect.

Parts are JSON Lines named by the spec's rule; each part is one atomic file (one PUT on an object
store) and the `<id>.yaml` is written last, so a reader never sees a half-written dataset; if
anything fails, the files written so far are removed again. Items stream: at most two parts are
in memory at once.

In the spec's dialect (the default) items carry only the spec's attributes and their ad hoc
attributes go to attributes files (`attribute_files.py`); in the reference reader's dialect they
go under `otherargs` (`dialect.py`). Inline items of the metadata are written to the parts.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Iterable
from typing import Any

import yaml

from itemeval._util.yaml_lines import safe_load
from itemeval.datasets.format._attribute_files import attributes_name, attributes_record
from itemeval.datasets.format._dataset import DatasetMeta, part_names
from itemeval.datasets.format._dialect import Dialect, item_record, meta_record
from itemeval.datasets.format._directory import DEFAULT_ITEMS_PER_PART, MAX_PARTS, DuplicateIds
from itemeval.datasets.format._findings import ProblemLog, Where
from itemeval.datasets.format._item import Item
from itemeval.errors import DatasetError, Problem
from itemeval.storage import Location, resolve


def write_dataset(
    url: str,
    meta: DatasetMeta,
    items: Iterable[Item],
    *,
    items_per_part: int = DEFAULT_ITEMS_PER_PART,
    storage_options: dict[str, Any] | None = None,
    overwrite: bool = False,
    dialect: Dialect | str = Dialect.SPEC,
    log: ProblemLog | None = None,
) -> DatasetMeta:
    """Write `meta` and `items` as a dataset directory at `url` in `dialect`; return the
    metadata as written (`hasPart` and `itemAttributes` filled in). Raises `DatasetError` if an
    item or the metadata cannot be written in `dialect` (nothing is left behind); warnings (what
    a dialect leaves out) go to `log`."""
    if items_per_part < 1:
        raise ValueError("items_per_part must be at least 1")
    dialect = Dialect(dialect)
    directory = resolve(url, storage_options)
    meta_location = directory.join(f"{meta.identifier}.yaml")
    where = Where(file=meta_location.url)
    # the metadata is checked for the dialect before anything is written
    named = meta.model_copy(update={"has_part": part_names(meta.identifier, 1)})
    _, problems = meta_record(named, dialect, where)
    _raise_errors(problems)
    previous = _previous_files(meta_location) if overwrite else []
    if not overwrite and meta_location.exists():
        raise DatasetError(
            Problem(
                "a dataset is already there",
                file=meta_location.url,
                hint="choose another directory, or overwrite it deliberately",
            )
        )
    directory.makedirs()
    writer = _PartWriter(directory, meta.identifier)
    ids = DuplicateIds()
    try:
        part, attributes = io.BytesIO(), io.BytesIO()
        count = 0
        for index, item in enumerate(_all_items(meta, items)):
            if not isinstance(item, Item):
                raise TypeError(f"items[{index}] is a {type(item).__name__}, not an Item")
            at = Where("items to write", line=index + 1, item=item.identifier)
            duplicates = ids.check(item.identifier, at)
            if duplicates:
                raise DatasetError(duplicates)
            written, problems = item_record(item, dialect, at)
            _raise_errors(problems)
            assert written is not None
            part.write(_json_line(written.record))
            if written.attributes:
                attributes.write(_json_line(attributes_record(item.identifier, written.attributes)))
            count += 1
            if count == items_per_part:
                writer.add(part.getvalue(), attributes.getvalue())
                part, attributes, count = io.BytesIO(), io.BytesIO(), 0
        duplicates = ids.finish()
        if duplicates:
            raise DatasetError(duplicates)
        if count:
            writer.add(part.getvalue(), attributes.getvalue())
        names, attribute_files = writer.finish()
        if not names:
            raise DatasetError(Problem("no items to write", file=directory.url))
        written_meta = meta.model_copy(
            update={"has_part": names, "items": None, "item_attributes": attribute_files or None}
        )
        record, problems = meta_record(written_meta, dialect, where)
        _raise_errors(problems)
        if log is not None:
            log.extend(problems)
        text = yaml.safe_dump(record, sort_keys=False, allow_unicode=True, width=100)
        meta_location.write_atomic(text.encode("utf-8"))
    except BaseException:
        writer.remove()
        raise
    now = set(names) | set(attribute_files.values())
    for stale in previous:
        if stale not in now:
            directory.join(stale).delete()
    return written_meta


def _all_items(meta: DatasetMeta, items: Iterable[Item]) -> Iterable[Item]:
    yield from meta.items or ()  # inline items first, as a reader reads them
    yield from items


def _raise_errors(problems: list[Problem]) -> None:
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise DatasetError(errors)


class _PartWriter:
    """Names parts by the spec's rule, which depends on whether there is more than one: the
    first full part is held back until the next one shows that there are several. A part's
    attributes file (if any of its items has ad hoc attributes) is written with it."""

    def __init__(self, directory: Location, identifier: str):
        self.directory = directory
        self.identifier = identifier
        self.held: tuple[bytes, bytes] | None = None
        self.names: list[str] = []
        self.attribute_files: dict[str, str] = {}

    def add(self, part: bytes, attributes: bytes) -> None:
        if self.held is not None:
            self._write(*self.held, f"{self.identifier}_{len(self.names):03d}.jsonl")
        self.held = (part, attributes)

    def finish(self) -> tuple[list[str], dict[str, str]]:
        if self.held is not None:
            name = (
                part_names(self.identifier, 1)[0]
                if not self.names
                else f"{self.identifier}_{len(self.names):03d}.jsonl"
            )
            self._write(*self.held, name)
            self.held = None
        return list(self.names), dict(self.attribute_files)

    def _write(self, part: bytes, attributes: bytes, name: str) -> None:
        if len(self.names) >= MAX_PARTS:
            raise DatasetError(
                Problem(
                    f"more than {MAX_PARTS} parts",
                    file=self.directory.url,
                    hint="write with a larger items_per_part",
                )
            )
        if attributes:
            self.directory.join(attributes_name(name)).write_atomic(attributes)
            self.attribute_files[name] = attributes_name(name)
        self.directory.join(name).write_atomic(part)
        self.names.append(name)

    def remove(self) -> None:
        for name in [*self.names, *self.attribute_files.values()]:
            self.directory.join(name).delete()


def _previous_files(meta_location: Location) -> list[str]:
    """The parts and attributes files of the dataset about to be overwritten."""
    if not meta_location.exists():
        return []
    try:
        raw = safe_load(meta_location.read_bytes().decode("utf-8-sig"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return []
    if not isinstance(raw, dict):
        return []
    files: list[str] = []
    for key, value in raw.items():
        if str(key).casefold() == "haspart" and isinstance(value, list):
            files.extend(str(v) for v in value)
        if str(key).casefold() == "itemattributes" and isinstance(value, dict):
            files.extend(str(v) for v in value.values())
    return files


def _json_line(record: dict[str, Any]) -> bytes:
    text = json.dumps(record, ensure_ascii=False, default=_json_default)
    return text.encode("utf-8") + b"\n"


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.date | dt.datetime):  # from YAML inline items
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
