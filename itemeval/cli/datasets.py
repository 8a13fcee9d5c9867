"""`itemeval validate` and `itemeval convert`: check datasets, and adopt the item format.

    itemeval validate configs/datasets/arithmetic data/test.jsonl [--strict]
    itemeval validate data/mmlu/test/anatomy_test.csv --mapping configs/mappings/mmlu.yaml
    itemeval convert data/gsm8k/test.jsonl --mapping configs/mappings/gsm8k.yaml --out gsm8k
    itemeval convert datasets/facts --out facts-ce --dialect commoneval     # re-write a dataset

`validate` reads everything and lists every problem (exit code 2 when any path is invalid, or,
with --strict, has a warning). `convert` reads the source twice: once to check every item
(writing nothing if one is invalid or cannot be written in the chosen dialect), once to write
the dataset directory, so memory stays flat whatever the size.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from itemeval.cli.options import counted
from itemeval.datasets.adapters import DatasetSource, open_source
from itemeval.datasets.adapters.convert import (
    ConvertSource,
    complete_meta,
    open_convert_source,
    set_attribute,
)
from itemeval.datasets.adapters.mapping import validation_problems
from itemeval.datasets.adapters.source import SUFFIX_FORMATS, default_name
from itemeval.datasets.format import Dialect, ProblemLog, Where, read_dataset, write_dataset
from itemeval.datasets.format.attribute_files import ATTRIBUTES_SUFFIX
from itemeval.datasets.format.dialect import item_record, meta_record
from itemeval.datasets.format.directory import (
    DEFAULT_ITEMS_PER_PART,
    is_dataset_directory,
    scan_item_file,
)
from itemeval.datasets.format.item import ITEM_ATTRIBUTES, Item
from itemeval.datasets.format.records import iter_records
from itemeval.errors import ConfigError, DatasetError, ExitCode, InputError, Problem
from itemeval.storage import Location, resolve

MAX_WARNING_LINES = 20
_ITEM_KEYS = {name.casefold() for name in ITEM_ATTRIBUTES}


def register(subparsers: argparse._SubParsersAction) -> None:
    validate = subparsers.add_parser(
        "validate",
        help="check dataset directories and data files, and summarise them",
        description="Check item-format dataset directories (or their <id>.yaml), item files "
        "(.jsonl) and, with --mapping, JSONL/CSV/parquet files. Prints items by modality and "
        "every warning and error; exits with 2 if anything is invalid.",
    )
    validate.add_argument("paths", nargs="+", metavar="PATH", help="directory, file or URL")
    validate.add_argument("--mapping", metavar="FILE", help="mapping YAML for tabular files")
    validate.add_argument(
        "--format",
        choices=sorted(set(SUFFIX_FORMATS.values()) | {"hf"}),
        help="the format of the paths (default: inferred)",
    )
    validate.add_argument(
        "--strict",
        action="store_true",
        help="a warning (a deviation from the spec that was accepted, such as a required "
        "attribute that is null or empty) makes the path invalid",
    )
    validate.set_defaults(func=run_validate)

    convert = subparsers.add_parser(
        "convert",
        help="write a benchmark (or re-write a dataset) in the item format",
        description="Map every row of SRC to an item, or read SRC as an item-format dataset, "
        "and write a dataset directory (<id>.yaml plus JSON Lines parts) in the spec's dialect "
        "or the commoneval reader's. Dataset attributes come from the mapping file's `dataset:` "
        "section (or SRC's yaml) and --set; required ones not given are filled in with a "
        "warning. Nothing is written if any item is invalid.",
    )
    convert.add_argument(
        "source", metavar="SRC", help="file, directory, glob or URL; or an item-format dataset"
    )
    convert.add_argument(
        "--mapping",
        metavar="MAPPING.yaml",
        help="mapping file for a JSONL/CSV/parquet SRC, with the dataset attributes under "
        "`dataset:` (examples: configs/mappings/); not for an item-format SRC",
    )
    convert.add_argument(
        "--dialect",
        choices=[d.value for d in Dialect],
        default=Dialect.SPEC.value,
        help="spec: the item spec (default; JSON true/false booleans, ad hoc item attributes "
        "in attributes files); commoneval: what the commoneval 0.2.1 reader reads "
        "(singlevalue, ternary Unknown, choices and ad hoc attributes under otherargs)",
    )
    convert.add_argument("--out", metavar="DIR", required=True, help="dataset directory to write")
    convert.add_argument(
        "--id",
        dest="dataset_id",
        metavar="DATASET_ID",
        help="dataset identifier (default: the mapping's, else DIR's name)",
    )
    convert.add_argument(
        "--items-per-part",
        type=int,
        default=DEFAULT_ITEMS_PER_PART,
        metavar="N",
        help=f"items per part file (default {DEFAULT_ITEMS_PER_PART})",
    )
    convert.add_argument(
        "--format",
        choices=["items", "jsonl", "csv", "parquet"],
        help="the format of SRC (default: an item-format directory, else from its suffix)",
    )
    convert.add_argument(
        "--set",
        dest="attributes",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a dataset attribute (repeatable)",
    )
    convert.add_argument(
        "--overwrite", action="store_true", help="replace a dataset already at DIR"
    )
    convert.add_argument(
        "--strict",
        action="store_true",
        help="refuse instead of filling in missing dataset attributes or accepting any other "
        "deviation with a warning",
    )
    convert.set_defaults(func=run_convert)


# -- validate --------------------------------------------------------------------------------


@dataclass
class PathReport:
    path: str
    title: str = ""
    items: int = 0
    by_modality: Counter[str] = field(default_factory=Counter)
    log: ProblemLog = field(default_factory=ProblemLog)
    strict: bool = False  # warnings make the path invalid

    @property
    def invalid(self) -> bool:
        return bool(self.log.error_count or (self.strict and self.log.warning_count))

    def lines(self) -> list[str]:
        modalities = ", ".join(f"{m} {n:,}" for m, n in sorted(self.by_modality.items()))
        errors, warnings = self.log.error_count, self.log.warning_count
        if errors:
            status = f"INVALID ({counted(errors, 'error')})"
        elif self.invalid:
            status = f"INVALID under --strict ({counted(warnings, 'warning')})"
        else:
            status = "ok"
        head = f"{self.path}: {status}"
        if self.title:
            head += f"\n  {self.title}: {counted(self.items, 'item')}" + (
                f" ({modalities})" if modalities else ""
            )
        out = [head]
        if warnings:
            lines = self.log.warning_lines()
            out.append(f"  {counted(warnings, 'warning')}:")
            out.extend(f"    {line}" for line in lines[:MAX_WARNING_LINES])
            if len(lines) > MAX_WARNING_LINES:
                more = len(lines) - MAX_WARNING_LINES
                out.append(f"    ... {counted(more, 'more warning line')}")
        for problem in self.log.errors:
            out.append(f"  error: {problem}")
        if self.log.full:
            out.append(f"  (stopped after {counted(self.log.max_errors, 'error')})")
        return out


def run_validate(args: argparse.Namespace) -> int:
    reports = [validate_path(path, mapping=args.mapping, fmt=args.format) for path in args.paths]
    for report in reports:
        report.strict = args.strict
        print("\n".join(report.lines()))
    invalid = sum(r.invalid for r in reports)
    total = sum(r.items for r in reports)
    warnings = sum(r.log.warning_count for r in reports)
    print(
        f"{counted(len(reports), 'path')}, {counted(total, 'item')}, {invalid:,} invalid, "
        f"{counted(warnings, 'warning')}"
    )
    return int(ExitCode.BAD_INPUT) if invalid else int(ExitCode.OK)


def validate_path(path: str, *, mapping: str | None = None, fmt: str | None = None) -> PathReport:
    """Validate one path; problems go into the report, never raised."""
    report = PathReport(path=path)
    try:
        if mapping is not None or fmt in ("csv", "parquet", "hf"):
            source = DatasetSource(path=path, mapping=mapping, format=fmt)  # type: ignore[arg-type]
            handle = open_source(source)
            result = handle.validate()
            report.title = f"{handle.format} source {handle.name!r}"
            report.items, report.by_modality, report.log = (
                result.items,
                result.by_modality,
                result.log,
            )
            return report
        location = resolve(path)
        if fmt == "items" or is_dataset_directory(location):
            reader = read_dataset(path)
            result = reader.validate()
            report.title = f"dataset {reader.meta.identifier!r}"
            report.items, report.by_modality, report.log = (
                result.items,
                result.by_modality,
                result.log,
            )
            return report
        if location.path.lower().endswith(ATTRIBUTES_SUFFIX) and location.exists():
            report.log.add(
                Problem(
                    "this holds the ad hoc attributes of a part's items, not items",
                    file=location.url,
                    hint="validate the dataset directory; it checks this file with its part",
                )
            )
            return report
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
                return report
            for _ in scan_item_file(location, report.log, report.by_modality):
                pass
            report.items = sum(report.by_modality.values())
            return report
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
    except InputError as exc:
        report.log.extend(exc.problems)
    except ValidationError as exc:  # the DatasetSource built from the arguments
        report.log.extend(validation_problems(exc, file=path))
    return report


# -- convert ---------------------------------------------------------------------------------


def run_convert(args: argparse.Namespace) -> int:
    if args.items_per_part < 1:
        raise ConfigError("--items-per-part must be at least 1")
    dialect = Dialect(args.dialect)
    source = open_convert_source(args.source, mapping_file=args.mapping, fmt=args.format)
    attributes = dict(source.attributes)
    for assignment in args.attributes:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE")
        set_attribute(attributes, key.strip(), value)
    dataset_id = args.dataset_id or _attribute(attributes, "identifier") or default_name(args.out)
    meta, notes = complete_meta(
        attributes,
        str(dataset_id),
        source=args.source,
        attributes_file=source.attributes_file,
        from_mapping=args.mapping is not None,
    )
    source.name_items(meta.identifier)

    checked = ProblemLog()
    checked.extend(notes)
    # what the dialect makes of the metadata (the parts are named when written)
    _, problems = meta_record(
        meta.model_copy(update={"has_part": [f"{meta.identifier}.jsonl"]}),
        dialect,
        Where(source.attributes_file),
    )
    checked.extend(problems)
    counts: Counter[str] = Counter()
    unwritable = ProblemLog()  # apart, so that reading goes on past the first such item
    total = sum(1 for _ in _writable_items(source, dialect, checked, unwritable, counts))
    checked.extend(unwritable.errors + unwritable.warnings)
    checked.raise_if_errors()  # nothing written yet
    if total == 0:
        raise DatasetError(Problem("no items to convert", file=source.url))
    if args.strict and checked.warning_count:
        raise DatasetError(
            [_as_error(w) for w in checked.warnings]
            + [Problem(f"--strict: {counted(checked.warning_count, 'warning')}; nothing written")]
        )

    written = ProblemLog()
    result = write_dataset(
        args.out,
        meta,
        _checked_items(source, written),
        items_per_part=args.items_per_part,
        overwrite=args.overwrite,
        dialect=dialect,
    )
    for line in checked.warning_lines()[:MAX_WARNING_LINES]:
        print(f"warning: {line}", file=sys.stderr)
    modalities = ", ".join(f"{m} {n:,}" for m, n in sorted(counts.items()))
    print(
        f"wrote dataset {meta.identifier!r} ({dialect.value} dialect): "
        f"{counted(total, 'item')} ({modalities}) in "
        f"{counted(len(result.has_part), 'part')} to {resolve(args.out).url}"
    )
    return int(ExitCode.OK)


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


def _as_error(problem: Problem) -> Problem:
    return replace(problem, severity="error")


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
