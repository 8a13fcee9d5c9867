"""Datasets in Python: check them (`itemeval validate`) and adopt the item format
(`itemeval convert`); docs/python-api.md.

    report = itemeval.validate_dataset("configs/datasets/arithmetic")
    report.items, report.by_modality, report.invalid, report.errors, report.warnings
    written = itemeval.convert_dataset("data/gsm8k/test.jsonl", "gsm8k",
                                       mapping="configs/mappings/gsm8k.yaml")

`validate_dataset` reads everything and collects every problem (it never raises for a problem
of the dataset). `convert_dataset` reads the source twice: once to check every item (writing
nothing if one is invalid or cannot be written in the chosen dialect), once to write the
dataset directory, so memory stays flat whatever the size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from itemeval.datasets.adapters import (
    SUFFIX_FORMATS,
    ConvertSource,
    DatasetSource,
    complete_meta,
    default_name,
    open_convert_source,
    open_source,
    set_attribute,
    validation_problems,
)
from itemeval.datasets.format import (
    ATTRIBUTES_SUFFIX,
    DEFAULT_ITEMS_PER_PART,
    ITEM_ATTRIBUTES,
    Dialect,
    Item,
    Modality,
    ProblemLog,
    Where,
    is_dataset_directory,
    item_record,
    iter_records,
    meta_record,
    read_dataset,
    scan_item_file,
    write_dataset,
)
from itemeval.errors import ConfigError, DatasetError, InputError, Problem
from itemeval.storage import Location, resolve

#: What `validate_dataset(format=...)` accepts (default: inferred from the path).
VALIDATE_FORMATS: tuple[str, ...] = tuple(sorted(set(SUFFIX_FORMATS.values()) | {"hf"}))
#: What `convert_dataset(format=...)` accepts (default: an item-format directory, else the suffix).
CONVERT_FORMATS: tuple[str, ...] = ("items", "jsonl", "csv", "parquet")
#: The dialects `convert_dataset` writes: "spec" (the item spec) and "commoneval".
DIALECTS: tuple[str, ...] = tuple(d.value for d in Dialect)
__all__ = [
    "CONVERT_FORMATS",
    "DEFAULT_ITEMS_PER_PART",
    "DIALECTS",
    "VALIDATE_FORMATS",
    "ConvertedDataset",
    "DatasetValidation",
    "convert_dataset",
    "validate_dataset",
]

_ITEM_KEYS = {name.casefold() for name in ITEM_ATTRIBUTES}


@dataclass
class DatasetValidation:
    """What `validate_dataset` found at one path: what it holds (`title`, `items`,
    `by_modality`) and every problem (`log`; `errors`, `warnings`)."""

    path: str
    title: str = ""  # "dataset 'arithmetic'", "item file", "csv source 'qa'"; "" if unreadable
    items: int = 0
    by_modality: Counter[str] = field(default_factory=Counter)
    log: ProblemLog = field(default_factory=ProblemLog)
    strict: bool = False  # warnings make the path invalid

    @property
    def errors(self) -> list[Problem]:
        return list(self.log.errors)

    @property
    def warnings(self) -> list[Problem]:
        return list(self.log.warnings)

    @property
    def invalid(self) -> bool:
        """An error, or (with `strict`) a warning."""
        return bool(self.log.error_count or (self.strict and self.log.warning_count))

    def found(self, title: str, result: Any) -> None:
        """Take a dataset's or a source's validation result (`items`, `by_modality`, `log`)."""
        self.title = title
        self.items, self.by_modality, self.log = result.items, result.by_modality, result.log


@dataclass
class ConvertedDataset:
    """What `convert_dataset` wrote: the dataset's identifier, dialect, items by modality, part
    files and URL, and the warnings it accepted (`log`; `warnings`)."""

    identifier: str
    dialect: str
    url: str
    items: int
    by_modality: Counter[str]
    parts: list[str]
    log: ProblemLog

    @property
    def warnings(self) -> list[Problem]:
        return list(self.log.warnings)

    @property
    def extensions(self) -> list[str]:
        """The modalities written that are itemeval's extension of the item format
        (`choiceof6` .. `choiceof26`): readers of the spec v3.3 and commoneval stop at
        `choiceof5`. Only the spec dialect writes them; the commoneval one refuses them."""
        return sorted(
            (m for m in self.by_modality if Modality.parse(m).is_extension),
            key=lambda m: Modality.parse(m).n_choices or 0,
        )


def validate_dataset(
    path: str, *, mapping: str | None = None, format: str | None = None, strict: bool = False
) -> DatasetValidation:
    """Check a dataset directory (or its `<id>.yaml`), an item file (.jsonl) or, with
    `mapping`, a JSONL/CSV/parquet file or Hugging Face dataset (`format="hf"`). Problems go
    into the result, never raised; `strict`: a warning makes the path invalid."""
    report = DatasetValidation(path=path, strict=strict)
    try:
        _validate(report, mapping, format)
    except InputError as exc:
        report.log.extend(exc.problems)
    except ValidationError as exc:  # the DatasetSource built from the arguments
        report.log.extend(validation_problems(exc, file=path))
    return report


def _validate(report: DatasetValidation, mapping: str | None, fmt: str | None) -> None:
    path = report.path
    if mapping is not None or fmt in ("csv", "parquet", "hf"):
        source = DatasetSource(path=path, mapping=mapping, format=fmt)
        handle = open_source(source)
        report.found(f"{handle.format} source {handle.name!r}", handle.validate())
        return
    location = resolve(path)
    if fmt == "items" or is_dataset_directory(location):
        reader = read_dataset(path)
        report.found(f"dataset {reader.meta.identifier!r}", reader.validate())
        return
    if location.path.lower().endswith(ATTRIBUTES_SUFFIX) and location.exists():
        report.log.add(
            Problem(
                "this holds the ad hoc attributes of a part's items, not items",
                file=location.url,
                hint="validate the dataset directory; it checks this file with its part",
            )
        )
        return
    if location.path.lower().endswith((".jsonl", ".json")) and location.exists():
        report.title = "item file"
        if not _looks_like_items(location):
            report.log.add(
                Problem(
                    "this is not an item file: its first record has none of the item "
                    "attributes (identifier, modality, prompt, response)",
                    file=location.url,
                    line=1,
                    hint="to check a benchmark file, pass --mapping (see configs/mappings/)",
                )
            )
            return
        for _ in scan_item_file(location, report.log, report.by_modality):
            pass
        report.items = sum(report.by_modality.values())
        return
    if location.exists():
        report.log.add(
            Problem(
                "a tabular file needs --mapping (which column is what)",
                file=location.url,
                hint="see configs/mappings/ for examples",
            )
        )
    else:
        report.log.add(Problem("no such file or directory", file=location.url))


def convert_dataset(
    source: str,
    out: str,
    *,
    mapping: str | None = None,
    format: str | None = None,
    dialect: str = Dialect.SPEC.value,
    dataset_id: str | None = None,
    attributes: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None,
    items_per_part: int = DEFAULT_ITEMS_PER_PART,
    overwrite: bool = False,
    strict: bool = False,
) -> ConvertedDataset:
    """Write `source` (a JSONL/CSV/parquet file, folder, glob or URL with a `mapping` file; or
    an item-format dataset) as a dataset directory at `out` in `dialect`.

    Dataset attributes come from the mapping file's `dataset:` section (or the source's yaml),
    then `attributes` (a mapping, or (key, value) pairs applied in order: `--set KEY=VALUE`);
    required ones not given are filled in with a warning each, or refused with `strict`.
    Raises `DatasetError` / `ConfigError` and writes nothing if any item is invalid or cannot be
    written in `dialect`."""
    if items_per_part < 1:
        raise ConfigError(Problem("must be at least 1", field="items_per_part"))
    if dialect not in DIALECTS:
        raise ConfigError(
            Problem(f"unknown dialect {dialect!r}", field="dialect", hint=f"one of {DIALECTS}")
        )
    chosen = Dialect(dialect)
    opened = open_convert_source(source, mapping_file=mapping, fmt=format)
    given = dict(opened.attributes)
    pairs = attributes.items() if isinstance(attributes, Mapping) else attributes or ()
    for key, value in pairs:  # in order; names are case-insensitive: the last spelling wins
        set_attribute(given, key, value)
    identifier = dataset_id or _attribute(given, "identifier") or default_name(out)
    meta, notes = complete_meta(
        given,
        str(identifier),
        source=source,
        attributes_file=opened.attributes_file,
        from_mapping=mapping is not None,
    )
    opened.name_items(meta.identifier)

    checked = ProblemLog()
    checked.extend(notes)
    # what the dialect makes of the metadata (the parts are named when written)
    _, problems = meta_record(
        meta.model_copy(update={"has_part": [f"{meta.identifier}.jsonl"]}),
        chosen,
        Where(opened.attributes_file),
    )
    checked.extend(problems)
    counts: Counter[str] = Counter()
    unwritable = ProblemLog()  # apart, so that reading goes on past the first such item
    total = sum(1 for _ in _writable_items(opened, chosen, checked, unwritable, counts))
    checked.extend(unwritable.errors + unwritable.warnings)
    checked.raise_if_errors()  # nothing written yet
    if total == 0:
        raise DatasetError(Problem("no items to convert", file=opened.url))
    if strict and checked.warning_count:
        count = checked.warning_count
        raise DatasetError(
            [replace(w, severity="error") for w in checked.warnings]
            + [Problem(f"--strict: {count:,} warning{'' if count == 1 else 's'}; nothing written")]
        )

    written = ProblemLog()
    result = write_dataset(
        out,
        meta,
        _checked_items(opened, written),
        items_per_part=items_per_part,
        overwrite=overwrite,
        dialect=chosen,
    )
    return ConvertedDataset(
        identifier=meta.identifier,
        dialect=chosen.value,
        url=resolve(out).url,
        items=total,
        by_modality=counts,
        parts=list(result.has_part),
        log=checked,
    )


def _writable_items(
    source: ConvertSource,
    dialect: Dialect,
    log: ProblemLog,
    unwritable: ProblemLog,
    counts: Counter[str],
) -> Iterator[Item]:
    """The source's items (findings in `log`), each also checked against what `dialect` can
    write (findings in `unwritable`)."""
    for item in source.scan(log, counts):
        _, problems = item_record(item, dialect, Where(source.url, item=item.identifier))
        unwritable.extend(problems)
        yield item
        if unwritable.full:
            return


def _checked_items(source: ConvertSource, log: ProblemLog) -> Iterator[Item]:
    """The items again; if the source changed since the check and an item is now invalid,
    raise (the writer then removes what it wrote)."""
    yield from source.scan(log)
    log.raise_if_errors()


def _looks_like_items(location: Location) -> bool:
    """False if the first record is an object without any item attribute (a benchmark file)."""
    for _, record in iter_records(location):
        if isinstance(record, dict):
            return any(str(k).casefold() in _ITEM_KEYS for k in record)
        return True  # a problem or a non-object: let the item checks report it
    return True


def _attribute(attributes: dict[str, Any], name: str) -> Any:
    for key, value in attributes.items():
        if str(key).casefold() == name.casefold():
            return value
    return None
