"""The benchmark `Dataset` metadata (dataset spec v3.3): the `<id>.yaml` file as a model.

`parse_dataset_meta(raw, where)` reads the YAML mapping leniently, like `parse_item`: names matched
case-insensitively, ad hoc attributes kept (and written back) under their own names, unambiguous
deviations accepted with a warning. Published data leaves descriptive attributes out, `null` or
empty (`publisher: null`, `title: ''`): a required one not given is a warning naming it (`itemeval
validate --strict` refuses it), an optional one is simply absent (with a warning when empty).
Only `identifier` and `hasPart`, without which there is no dataset to read, stay errors.
The `hasPart` naming rule lives here too (`part_names`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from itemeval.datasets.format._attributes import (
    IDENTIFIER_HINT,
    IDENTIFIER_PATTERN,
    MISSING,
    read_identifier,
    read_text,
    read_text_or_list,
    split_attributes,
)
from itemeval.datasets.format._findings import Where
from itemeval.datasets.format._item import Item, parse_item
from itemeval.errors import Problem

# canonical name -> python field name, in the order `to_dict` writes them
DATASET_ATTRIBUTES = {
    "identifier": "identifier",
    "title": "title",
    "description": "description",
    "creator": "creator",
    "contributor": "contributor",
    "publisher": "publisher",
    "created": "created",
    "datePublished": "date_published",
    "version": "version",
    "metadataVersion": "metadata_version",
    "language": "language",
    "subject": "subject",
    "source": "source",
    "sourceProcess": "source_process",
    "license": "license",
    "licenseNotes": "license_notes",
    "taskPrompt": "task_prompt",
    "hasPart": "has_part",
    "items": "items",
    # not in the spec: an ad hoc attribute of itemeval's (the spec allows them), naming the
    # files that hold the items' ad hoc attributes, one per part (`format/attribute_files.py`)
    "itemAttributes": "item_attributes",
}
REQUIRED = (
    "identifier",
    "created",
    "creator",
    "description",
    "hasPart",
    "language",
    "license",
    "publisher",
    "source",
    "subject",
)
# Required, but descriptive: data can be read without them, so their absence is a warning.
DESCRIPTIVE_REQUIRED = tuple(name for name in REQUIRED if name not in ("identifier", "hasPart"))
_BY_CASEFOLD = {name.casefold(): name for name in DATASET_ATTRIBUTES}
_TEXT_OR_LIST = ("creator", "contributor", "publisher", "language", "subject")
_OPTIONAL_TEXT = ("title", "version", "metadataVersion", "sourceProcess", "licenseNotes")
_REQUIRED_TEXT = ("description", "license", "source")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")
PART_SUFFIXES = (".jsonl", ".json", ".yaml", ".yml")


class DatasetMeta(BaseModel):
    """The metadata of one dataset; `extras` holds ad hoc attributes under their own names."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    identifier: str
    has_part: list[str] = Field(alias="hasPart")
    # required by the spec; None when a file does not give them (read with a warning)
    created: str | None = None
    creator: str | list[str] | None = None
    description: str | None = None
    language: str | list[str] | None = None
    license: str | None = None
    publisher: str | list[str] | None = None
    source: str | None = None
    subject: str | list[str] | None = None
    contributor: str | list[str] | None = None
    date_published: str | None = Field(default=None, alias="datePublished")
    items: list[Item] | None = None
    license_notes: str | None = Field(default=None, alias="licenseNotes")
    metadata_version: str | None = Field(default=None, alias="metadataVersion")
    source_process: str | None = Field(default=None, alias="sourceProcess")
    task_prompt: str | None = Field(default=None, alias="taskPrompt")
    title: str | None = None
    version: str | None = None
    item_attributes: dict[str, str] | None = Field(default=None, alias="itemAttributes")
    extras: dict[str, Any] = Field(default_factory=dict)

    _spellings: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> DatasetMeta:
        if not IDENTIFIER_PATTERN.match(self.identifier):
            raise ValueError(f"identifier {self.identifier!r}: {IDENTIFIER_HINT}")
        if self.created is not None and not _is_date(self.created):
            raise ValueError(f"created must be a date YYYY-MM-DD, found {self.created!r}")
        return self

    def not_given(self) -> list[str]:
        """The spec's required attributes this metadata does not give."""
        return [n for n in DESCRIPTIVE_REQUIRED if getattr(self, DATASET_ATTRIBUTES[n]) is None]

    def task_prompt_for(self, item: Item) -> str | None:
        """The effective task prompt of `item`: its own, else the dataset's."""
        return item.task_prompt if item.task_prompt is not None else self.task_prompt

    def to_dict(self) -> dict[str, Any]:
        """The metadata as written to `<id>.yaml` (names spelled as read, extras untouched)."""
        out: dict[str, Any] = {}
        for name, attr in DATASET_ATTRIBUTES.items():
            value = getattr(self, attr)
            if value is None:
                continue
            if name == "items":
                value = [item.to_dict() for item in value]
            out[self._spellings.get(name, name)] = value
        # ad hoc attributes before the (possibly long) inline items
        items_key = self._spellings.get("items", "items")
        items = out.pop(items_key, None)
        out.update(self.extras)
        if items is not None:
            out[items_key] = items
        return out


def part_names(identifier: str, n_parts: int, suffix: str = ".jsonl") -> list[str]:
    """The `hasPart` naming rule: `<id>.jsonl` for one part, `<id>_000.jsonl`, ... for several."""
    if n_parts == 1:
        return [f"{identifier}{suffix}"]
    return [f"{identifier}_{i:03d}{suffix}" for i in range(n_parts)]


def parse_dataset_meta(raw: Any, where: Where) -> tuple[DatasetMeta | None, list[Problem]]:
    """Read the YAML mapping of `<id>.yaml` (see module doc)."""
    problems: list[Problem] = []
    if not isinstance(raw, Mapping):
        found = "nothing" if raw is None else f"a {type(raw).__name__}"
        problems.append(
            where.error(f"expected a YAML mapping of dataset attributes, found {found}")
        )
        return None, problems
    split = split_attributes(raw, _BY_CASEFOLD, where)
    problems.extend(split.problems)
    values = split.values
    fields: dict[str, Any] = {}

    def get(name: str) -> Any:
        return values.get(name, MISSING if name in REQUIRED else None)

    fields["identifier"] = read_identifier(get("identifier"), "identifier", where, problems)
    given = {
        name: _given(get(name), name, where, problems)
        for name in (*_TEXT_OR_LIST, *_REQUIRED_TEXT, *_OPTIONAL_TEXT, "created", "datePublished")
    }
    for name in _TEXT_OR_LIST:
        fields[name] = read_text_or_list(given[name], name, where, problems, required=False)
    for name in (*_REQUIRED_TEXT, *_OPTIONAL_TEXT):
        fields[DATASET_ATTRIBUTES[name]] = read_text(
            given[name], name, where, problems, required=False
        )
    fields["created"] = _read_date(given["created"], "created", where, problems, required=False)
    fields["date_published"] = _read_date(
        given["datePublished"], "datePublished", where, problems, required=False
    )
    task_prompt = read_text(
        get("taskPrompt"), "taskPrompt", where, problems, required=False, allow_empty=True
    )
    if task_prompt is not None and not task_prompt.strip():
        problems.append(where.warning("empty taskPrompt treated as absent", field="taskPrompt"))
        task_prompt = None
    fields["task_prompt"] = task_prompt
    fields["items"] = _read_inline_items(values.get("items"), where, problems)
    fields["has_part"] = _read_has_part(
        get("hasPart"), where, problems, has_inline_items=bool(fields["items"])
    )
    fields["item_attributes"] = _read_item_attributes(values.get("itemAttributes"), where, problems)
    if any(p.severity == "error" for p in problems):
        return None, problems
    meta = DatasetMeta.model_construct(**fields, extras=split.extras)
    meta._spellings = split.spellings
    return meta, problems


def _given(value: Any, name: str, where: Where, problems: list[Problem]) -> Any:
    """`value` if it says something; None (with a warning where one is due) if it is missing,
    null or empty. A required attribute not given is a warning naming it; an optional one is
    absent (a warning only when it is an empty text or list, which says nothing)."""
    empty = (isinstance(value, str) and not value.strip()) or (
        isinstance(value, list) and not value
    )
    if value is not MISSING and value is not None and not empty:
        return value
    if name in DESCRIPTIVE_REQUIRED:
        what = "missing" if value is MISSING else "null" if value is None else "empty"
        problems.append(
            where.warning(
                f"required attribute is {what}; read as not given",
                field=name,
                hint=f"give `{name}:` a value (itemeval validate --strict refuses this)",
            )
        )
    elif empty:
        problems.append(where.warning("empty; read as not given", field=name))
    return None


def _read_item_attributes(
    value: Any, where: Where, problems: list[Problem]
) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()
    ):
        problems.append(
            where.error(
                "expected a mapping of part file -> attributes file",
                field="itemAttributes",
                hint="e.g. itemAttributes: {demo.jsonl: demo.attributes.jsonl}",
            )
        )
        return None
    return dict(value)


def check_part_names(meta: DatasetMeta, where: Where) -> list[Problem]:
    """Errors for `hasPart` names that break the naming rule (each names the expected file)."""
    problems: list[Problem] = []
    n = len(meta.has_part)
    for index, name in enumerate(meta.has_part):
        _, dot, suffix = name.rpartition(".")
        suffix = dot + suffix
        if not dot or suffix.lower() not in PART_SUFFIXES:
            problems.append(
                where.error(
                    f"part {name!r} has an unsupported file type",
                    field="hasPart",
                    hint=f"name it {part_names(meta.identifier, n)[index]!r} (JSON Lines)",
                )
            )
            continue
        expected = part_names(meta.identifier, n, suffix)[index]
        if name.casefold() != expected.casefold():
            count = "one part" if n == 1 else f"{n} parts"
            problems.append(
                where.error(
                    f"part {index + 1} of {n} is named {name!r}; with {count} the spec "
                    f"expects {expected!r}",
                    field="hasPart",
                    hint=f"rename the file to {expected!r} and list it in hasPart",
                )
            )
    return problems


def _is_date(text: str) -> bool:
    if not _DATE.match(text):
        return False
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _read_date(
    value: Any, name: str, where: Where, problems: list[Problem], *, required: bool
) -> str | None:
    if isinstance(value, dt.datetime):
        problems.append(
            where.warning(
                "a date and time where a date is expected; the time is ignored", field=name
            )
        )
        return value.date().isoformat()
    if isinstance(value, dt.date):  # YAML reads an unquoted 2025-05-19 as a date
        return value.isoformat()
    text = read_text(value, name, where, problems, required=required)
    if text is None:
        return None
    if not _is_date(text.strip()):
        problems.append(
            where.error(
                f"expected a date YYYY-MM-DD, found {text!r}", field=name, hint="e.g. 2025-05-19"
            )
        )
        return None
    return text.strip()


def _read_has_part(
    value: Any, where: Where, problems: list[Problem], *, has_inline_items: bool
) -> list[str] | None:
    if value is MISSING or value is None:
        if has_inline_items:
            return []
        what = "missing" if value is MISSING else "null"
        problems.append(
            where.error(
                f"required attribute is {what}",
                field="hasPart",
                hint="list the item files, e.g. hasPart: [<id>.jsonl]",
            )
        )
        return None
    if isinstance(value, str):
        problems.append(
            where.warning(
                "a single file name where a list is expected; read as a list of one",
                field="hasPart",
            )
        )
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        problems.append(where.error("expected a list of file names", field="hasPart"))
        return None
    if not value and not has_inline_items:
        problems.append(
            where.error(
                "expected at least one file name (the dataset has no items)", field="hasPart"
            )
        )
        return None
    if len({v.casefold() for v in value}) != len(value):
        problems.append(where.error("a file is listed twice", field="hasPart"))
        return None
    return list(value)


def _read_inline_items(value: Any, where: Where, problems: list[Problem]) -> list[Item] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        problems.append(where.error("expected a list of items", field="items"))
        return None
    items: list[Item] = []
    for index, raw in enumerate(value):
        item, found = parse_item(raw, where.at(item=f"items[{index}]"))
        problems.extend(found)
        if item is not None:
            items.append(item)
    return items
