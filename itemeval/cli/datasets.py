"""`itemeval validate` and `itemeval convert`: check datasets, and adopt the item format.

    itemeval validate configs/datasets/arithmetic data/test.jsonl
    itemeval validate data/mmlu/test/anatomy_test.csv --mapping configs/mappings/mmlu.yaml
    itemeval convert data/gsm8k/test.jsonl --mapping configs/mappings/gsm8k.yaml --out gsm8k

`validate` reads everything and lists every problem (exit code 2 when any path is invalid).
`convert` reads the source twice: once to check every row (writing nothing if one is invalid),
once to write the dataset directory, so memory stays flat whatever the size.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from itemeval.adapters import DatasetSource, MappedHandle, load_mapping_file, open_source
from itemeval.adapters.mapping import validation_problems
from itemeval.adapters.source import SUFFIX_FORMATS, default_name
from itemeval.errors import ConfigError, DatasetError, ExitCode, InputError, Problem
from itemeval.spec import (
    DatasetMeta,
    ProblemLog,
    Where,
    parse_dataset_meta,
    read_dataset,
    write_dataset,
)
from itemeval.spec.dataset import REQUIRED
from itemeval.spec.directory import DEFAULT_ITEMS_PER_PART, is_dataset_directory, scan_item_file
from itemeval.spec.item import ITEM_ATTRIBUTES, Item
from itemeval.spec.records import iter_records
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
    validate.set_defaults(func=run_validate)

    convert = subparsers.add_parser(
        "convert",
        help="convert a JSONL/CSV/parquet benchmark into the item format",
        description="Map every row of SRC to an item and write a dataset directory "
        "(<id>.yaml plus JSON Lines parts). Dataset attributes come from the mapping file's "
        "`dataset:` section and --set. Nothing is written if any row is invalid.",
    )
    convert.add_argument("source", metavar="SRC", help="file, directory, glob or URL")
    convert.add_argument(
        "--mapping",
        metavar="MAPPING.yaml",
        required=True,
        help="mapping file, with the dataset attributes under `dataset:` "
        "(examples: configs/mappings/)",
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
        choices=["jsonl", "csv", "parquet"],
        help="the format of SRC (default: from its suffix)",
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
    convert.set_defaults(func=run_convert)


# -- validate --------------------------------------------------------------------------------


@dataclass
class PathReport:
    path: str
    title: str = ""
    items: int = 0
    by_modality: Counter[str] = field(default_factory=Counter)
    log: ProblemLog = field(default_factory=ProblemLog)

    def lines(self) -> list[str]:
        modalities = ", ".join(f"{m} {n}" for m, n in sorted(self.by_modality.items()))
        status = "ok" if not self.log.error_count else f"INVALID ({self.log.error_count} errors)"
        head = f"{self.path}: {status}"
        if self.title:
            head += f"\n  {self.title}: {self.items} items" + (
                f" ({modalities})" if modalities else ""
            )
        out = [head]
        if self.log.warning_count:
            warnings = self.log.warning_lines()
            out.append(f"  {self.log.warning_count} warnings:")
            out.extend(f"    {line}" for line in warnings[:MAX_WARNING_LINES])
            if len(warnings) > MAX_WARNING_LINES:
                out.append(f"    ... {len(warnings) - MAX_WARNING_LINES} more warning lines")
        for problem in self.log.errors:
            out.append(f"  error: {problem}")
        if self.log.full:
            out.append(f"  (stopped after {self.log.max_errors} errors)")
        return out


def run_validate(args: argparse.Namespace) -> int:
    reports = [validate_path(path, mapping=args.mapping, fmt=args.format) for path in args.paths]
    for report in reports:
        print("\n".join(report.lines()))
    invalid = [r for r in reports if r.log.error_count]
    total = sum(r.items for r in reports)
    print(f"{len(reports)} paths, {total} items, {len(invalid)} invalid")
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
    mapping, attributes = load_mapping_file(args.mapping)
    attributes = dict(attributes)
    for assignment in args.attributes:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE")
        attributes[key.strip()] = value
    dataset_id = args.dataset_id or _attribute(attributes, "identifier") or default_name(args.out)
    meta = dataset_meta(attributes, dataset_id, mapping_file=args.mapping)

    source = DatasetSource(
        name=default_name(dataset_id), path=args.source, mapping=mapping, format=args.format
    )
    handle = open_source(source)
    if not isinstance(handle, MappedHandle):
        raise ConfigError(
            Problem(
                "convert reads JSONL, CSV or parquet files",
                file=args.source,
                hint="an item-format dataset needs no conversion",
            )
        )
    handle.name = dataset_id  # `{{ _dataset }}` is the identifier being written

    checked = ProblemLog()
    counts: Counter[str] = Counter()
    total = sum(1 for _ in handle.scan_items(checked, counts))
    checked.raise_if_errors()  # nothing written yet
    if total == 0:
        raise DatasetError(Problem("no rows to convert", file=args.source))

    written = ProblemLog()
    result = write_dataset(
        args.out,
        meta,
        _checked_items(handle, written),
        items_per_part=args.items_per_part,
        overwrite=args.overwrite,
    )
    for line in checked.warning_lines()[:MAX_WARNING_LINES]:
        print(f"warning: {line}")
    modalities = ", ".join(f"{m} {n}" for m, n in sorted(counts.items()))
    print(
        f"wrote dataset {dataset_id!r}: {total} items ({modalities}) in "
        f"{len(result.has_part)} part(s) to {resolve(args.out).url}"
    )
    return int(ExitCode.OK)


def dataset_meta(attributes: dict[str, Any], dataset_id: str, *, mapping_file: str) -> DatasetMeta:
    """The metadata `convert` writes: the given attributes, the identifier, `created` today
    unless given; `hasPart` is filled in by the writer. Missing required ones are errors."""
    raw = {k: v for k, v in attributes.items() if k.casefold() not in ("identifier", "haspart")}
    raw["identifier"] = dataset_id
    raw["hasPart"] = [f"{dataset_id}.jsonl"]  # replaced by the parts actually written
    if _attribute(attributes, "created") is None:
        raw["created"] = dt.date.today().isoformat()
    meta, problems = parse_dataset_meta(raw, Where(file=mapping_file))
    errors = [p for p in problems if p.severity == "error"]
    if meta is None or errors:
        raise ConfigError(
            [
                Problem(
                    f"dataset attribute: {p.message}",
                    file=mapping_file,
                    field=f"dataset.{p.field}" if p.field else "dataset",
                    hint=p.hint
                    or (
                        f"add `{p.field}:` under `dataset:` in the mapping file, or "
                        f"pass --set {p.field}=..."
                        if p.field in REQUIRED
                        else None
                    ),
                )
                for p in errors
            ]
        )
    return meta


def _checked_items(handle: MappedHandle, log: ProblemLog) -> Iterator[Item]:
    """The items again; if the source changed since the check and a row is now invalid, raise
    (the writer then removes what it wrote)."""
    yield from handle.scan_items(log)
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
