"""How items and dataset metadata are written: the spec's dialect, or the reference reader's.

The item and dataset specs (v3.3) and their reference reader, the `commoneval` package (0.2.1),
disagree in places. itemeval reads both; it writes one of them:

* modality: `single-value`, `short-prose`, `long-prose` (spec) or `singlevalue`, `shortprose`,
  `longprose` (commoneval);
* boolean response: JSON `true` / `false` in both;
* ternary response: "True", "False", "I don't know" (spec) or "True", "False", "Unknown";
* multiple choice: the letter; commoneval also needs the choices, under `otherargs.choices`;
  `choiceof6` .. `choiceof26` are itemeval's extension: the spec dialect writes them as they
  are, the commoneval dialect refuses them (commoneval 0.2.1's `Dataset.read_items` raises
  "'choiceof10' is not a valid Modality" and reads none of the dataset's items);
* ad hoc item attributes: an attributes file beside the part (spec, `attribute_files.py`) or
  under `otherargs` in the item (commoneval);
* dataset attributes: as read, ad hoc ones kept (spec), or the reader's fields only, under their
  canonical names (commoneval).

The reader builds each item with `BooleanItem`, `TernaryItem`, `ClosedSetItem` or
`OpenEndedItem` and a dataset with `Dataset(**yaml)`, so the `commoneval` dialect also refuses
what those constructors would (an identifier with `~`, a `created` date in the future, a list
of languages, a multiple-choice item whose choices cannot be found, more than five choices) with
a problem that names the item and the attribute, before anything is written.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from itemeval.datasets.format._attribute_files import ATTRIBUTES_KEY
from itemeval.datasets.format._dataset import DATASET_ATTRIBUTES, DatasetMeta
from itemeval.datasets.format._findings import Where
from itemeval.datasets.format._item import OTHERARGS, Item
from itemeval.datasets.format._modality import (
    DONT_KNOW,
    LETTERS,
    READER_SPELLINGS,
    SPEC_MAX_CHOICES,
    Modality,
)
from itemeval.errors import Problem


class Dialect(StrEnum):
    """Which dialect of the item format to write (see the module doc)."""

    SPEC = "spec"
    COMMONEVAL = "commoneval"


# commoneval's `BaseItem` and `Dataset` accept these identifiers (no "~", unlike the spec)
_READER_IDENTIFIER = re.compile(r"^[-a-zA-Z0-9_.]+\Z")
_READER_MODALITY = {Modality(spec): reader for reader, spec in READER_SPELLINGS.items()}
_READER_TERNARY = {"True": "True", "False": "False", DONT_KNOW: "Unknown"}
# the fields of commoneval's `Dataset` that a yaml may set, and the ones without a default
_READER_DATASET_FIELDS = (
    "identifier",
    "created",
    "creator",
    "description",
    "hasPart",
    "source",
    "subject",
    "contributor",
    "datePublished",
    "language",
    "license",
    "licenseNotes",
    "metadataVersion",
    "publisher",
    "sourceProcess",
    "taskPrompt",
    "title",
    "version",
)
_READER_DATASET_REQUIRED = ("created", "creator", "description", "source", "subject")
# lettered choices in a prompt, one a line: "A. text", "A) text", "(A) text", "A: text"
_CHOICE_LINE = re.compile(r"^\s*\(?([A-Z])[.):]\)?\s+(\S.*?)\s*$")


@dataclass
class ItemRecord:
    """An item as written: the part's record, and (spec dialect) its ad hoc attributes."""

    record: dict[str, Any]
    attributes: dict[str, Any] = field(default_factory=dict)


def item_record(
    item: Item, dialect: Dialect, where: Where
) -> tuple[ItemRecord | None, list[Problem]]:
    """`item` as `dialect` writes it; None with errors if that dialect cannot express it."""
    if dialect is Dialect.SPEC:
        record = item.spec_attributes()
        if item.modality is Modality.BOOLEAN:
            key = next(k for k in record if k.casefold() == "response")
            record[key] = item.response == "True"
        return ItemRecord(record, dict(item.extras)), []
    return _reader_item(item, where.at(item=item.identifier))


def meta_record(
    meta: DatasetMeta, dialect: Dialect, where: Where
) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The dataset yaml as `dialect` writes it (inline items are never in it: the writer puts
    them in the parts). Warnings for what the reader's dialect leaves out."""
    if dialect is Dialect.SPEC:
        out = meta.to_dict()
        for key in list(out):
            if key.casefold() == "items":
                del out[key]
        return out, []
    return _reader_meta(meta, where)


def choices_in_prompt(prompt: str, n_choices: int) -> list[str] | None:
    """The texts of the choices a multiple-choice prompt lists (as the spec asks it to): the
    last run of lines lettered A, B, C, ... that has exactly `n_choices` lines. Blank lines may
    stand between them. None if there is no such run."""
    runs: list[list[str]] = []
    run: list[str] = []
    for line in prompt.splitlines():
        if not line.strip():
            continue
        match = _CHOICE_LINE.match(line)
        letter, text = match.groups() if match else ("", "")
        if run and len(run) < len(LETTERS) and letter == LETTERS[len(run)]:
            run.append(text)
            continue
        if run:
            runs.append(run)
        run = [text] if letter == "A" else []
    if run:
        runs.append(run)
    matching = [r for r in runs if len(r) == n_choices]
    return matching[-1] if matching else None


# -- the reference reader's dialect ------------------------------------------------------------


def _reader_item(item: Item, where: Where) -> tuple[ItemRecord | None, list[Problem]]:
    problems: list[Problem] = []
    if not _READER_IDENTIFIER.match(item.identifier):
        problems.append(
            where.error(
                "the commoneval reader accepts only letters, digits, - _ . in identifiers",
                field="identifier",
                hint="rename the item (a mapping's sanitize_ids: true does it), or write the spec",
            )
        )
    if item.modality.is_extension:
        problems.append(
            where.error(
                f"{item.modality.value} is itemeval's extension of the item format: the "
                f"commoneval 0.2.1 reader knows choiceof2 .. choiceof{SPEC_MAX_CHOICES} only, and "
                f"one {item.modality.value} item makes it read none of the dataset",
                field="modality",
                hint="write the spec dialect (--dialect spec; itemeval reads it), or leave the "
                f"items with more than {SPEC_MAX_CHOICES} choices out of the source",
            )
        )
        return None, problems
    record: dict[str, Any] = {
        "identifier": item.identifier,
        "modality": _READER_MODALITY.get(item.modality, item.modality.value),
        "prompt": item.prompt,
    }
    otherargs = dict(item.extras)
    n_choices = item.modality.n_choices
    if item.modality is Modality.BOOLEAN:
        record["response"] = item.response == "True"
    elif item.modality is Modality.TERNARY:
        record["response"] = _READER_TERNARY[item.response]
    else:
        record["response"] = item.response
    if n_choices is not None:
        choices = _choices(item, n_choices, where, problems)
        if choices is not None:
            otherargs["choices"] = choices
    for key, value in (
        ("difficulty", item.difficulty),
        ("support", item.support),
        ("taskPrompt", item.task_prompt),
    ):
        if value is not None:
            record[key] = value
    if otherargs:
        record[OTHERARGS] = otherargs
    if problems:
        return None, problems
    return ItemRecord(record), []


def _choices(item: Item, n: int, where: Where, problems: list[Problem]) -> list[str] | None:
    """The choice texts of a multiple-choice item: its `choices` attribute, else the lettered
    lines of its prompt."""
    given = next((v for k, v in item.extras.items() if k.casefold() == "choices"), None)
    if given is None:
        found = choices_in_prompt(item.prompt, n)
        if found is None:
            problems.append(
                where.error(
                    f"the commoneval reader needs the {n} choices of a {item.modality.value} "
                    f"item: it has no `choices` attribute and its prompt has no lines lettered "
                    f"A to {LETTERS[n - 1]}",
                    field="choices",
                    hint='add "choices": [...] to the item, or list them in the prompt as '
                    '"A. ..." lines',
                )
            )
        return found
    if not isinstance(given, list) or len(given) != n or not all(isinstance(c, str) for c in given):
        shown = f"{len(given)} entries" if isinstance(given, list) else type(given).__name__
        problems.append(
            where.error(
                f"`choices` must be a list of {n} texts for {item.modality.value}, found {shown}",
                field="choices",
            )
        )
        return None
    return list(given)


def _reader_meta(meta: DatasetMeta, where: Where) -> tuple[dict[str, Any] | None, list[Problem]]:
    problems: list[Problem] = []
    values = {name: getattr(meta, DATASET_ATTRIBUTES[name]) for name in _READER_DATASET_FIELDS}
    if not _READER_IDENTIFIER.match(meta.identifier):
        problems.append(
            where.error(
                "the commoneval reader accepts only letters, digits, - _ . in identifiers",
                field="identifier",
            )
        )
    for name in _READER_DATASET_REQUIRED:
        if values[name] is None:
            problems.append(
                where.error(
                    "the commoneval reader needs this attribute",
                    field=name,
                    hint=f"give it a value (itemeval convert: --set {name}=...)",
                )
            )
    language = values["language"]
    if isinstance(language, list):
        if len(language) == 1:
            values["language"] = language[0]
        else:
            problems.append(
                where.error(
                    f"the commoneval reader takes one language, found a list of {len(language)}",
                    field="language",
                    hint="choose the main one (itemeval convert: --set language=eng)",
                )
            )
    today = dt.date.today().isoformat()
    created, published = values["created"], values["datePublished"]
    if created is not None and created > today:
        problems.append(
            where.error(
                f"the commoneval reader refuses a created date in the future ({created})",
                field="created",
            )
        )
    if published is not None and not ((created or "") <= published <= today):
        problems.append(
            where.error(
                f"the commoneval reader needs datePublished ({published}) between created "
                f"({created}) and today",
                field="datePublished",
            )
        )
    dropped = [*meta.extras, *([ATTRIBUTES_KEY] if meta.item_attributes else [])]
    for name in dropped:
        problems.append(
            where.warning(
                "not written: the commoneval reader accepts no ad hoc dataset attributes",
                field=name,
            )
        )
    if any(p.severity == "error" for p in problems):
        return None, problems
    # None means "not given": the reader's default applies (language eng, publisher None, ...)
    return {k: v for k, v in values.items() if v is not None}, problems
