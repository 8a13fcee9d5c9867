"""`itemeval validate` and `itemeval convert`: check datasets, and adopt the item format.

    itemeval validate configs/datasets/arithmetic data/test.jsonl [--strict]
    itemeval validate data/mmlu/test/anatomy_test.csv --mapping configs/mappings/mmlu.yaml
    itemeval convert data/gsm8k/test.jsonl --mapping configs/mappings/gsm8k.yaml --out gsm8k
    itemeval convert datasets/facts --out facts-ce --dialect commoneval     # re-write a dataset

Thin: arguments to `itemeval.validate_dataset` / `itemeval.convert_dataset` (`itemeval.api`),
their results to text. `validate` exits with 2 when any path is invalid (or, with --strict, has
a warning); `convert` writes nothing if an item is invalid.
"""

from __future__ import annotations

import argparse
import sys

from itemeval.api import (
    CONVERT_FORMATS,
    DEFAULT_ITEMS_PER_PART,
    DIALECTS,
    VALIDATE_FORMATS,
    DatasetValidation,
    convert_dataset,
    validate_dataset,
)
from itemeval.cli.options import counted
from itemeval.errors import ConfigError, ExitCode

MAX_WARNING_LINES = 20


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
        choices=VALIDATE_FORMATS,
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
        choices=DIALECTS,
        default="spec",
        help="spec: the item spec (default; JSON true/false booleans, ad hoc item attributes "
        "in attributes files; choiceof6 .. choiceof26, itemeval's extension, as they are); "
        "commoneval: what the commoneval 0.2.1 reader reads (singlevalue, ternary Unknown, "
        "choices and ad hoc attributes under otherargs; refuses choiceof6 and above, which "
        "that reader cannot read)",
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
        choices=CONVERT_FORMATS,
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


def run_validate(args: argparse.Namespace) -> int:
    reports = [
        validate_dataset(path, mapping=args.mapping, format=args.format, strict=args.strict)
        for path in args.paths
    ]
    for report in reports:
        print("\n".join(report_lines(report)))
    invalid = sum(r.invalid for r in reports)
    total = sum(r.items for r in reports)
    warnings = sum(r.log.warning_count for r in reports)
    print(
        f"{counted(len(reports), 'path')}, {counted(total, 'item')}, {invalid:,} invalid, "
        f"{counted(warnings, 'warning')}"
    )
    return int(ExitCode.BAD_INPUT) if invalid else int(ExitCode.OK)


def report_lines(report: DatasetValidation) -> list[str]:
    """One path's validation as text: its status, what it holds, its warnings and errors."""
    modalities = ", ".join(f"{m} {n:,}" for m, n in sorted(report.by_modality.items()))
    errors, warnings = report.log.error_count, report.log.warning_count
    if errors:
        status = f"INVALID ({counted(errors, 'error')})"
    elif report.invalid:
        status = f"INVALID under --strict ({counted(warnings, 'warning')})"
    else:
        status = "ok"
    head = f"{report.path}: {status}"
    if report.title:
        head += f"\n  {report.title}: {counted(report.items, 'item')}" + (
            f" ({modalities})" if modalities else ""
        )
    out = [head]
    if warnings:
        lines = report.log.warning_lines()
        out.append(f"  {counted(warnings, 'warning')}:")
        out.extend(f"    {line}" for line in lines[:MAX_WARNING_LINES])
        if len(lines) > MAX_WARNING_LINES:
            more = len(lines) - MAX_WARNING_LINES
            out.append(f"    ... {counted(more, 'more warning line')}")
    for problem in report.errors:
        out.append(f"  error: {problem}")
    if report.log.full:
        out.append(f"  (stopped after {counted(report.log.max_errors, 'error')})")
    return out


# -- convert ---------------------------------------------------------------------------------


def run_convert(args: argparse.Namespace) -> int:
    if args.items_per_part < 1:
        raise ConfigError("--items-per-part must be at least 1")
    attributes: list[tuple[str, str]] = []
    for assignment in args.attributes:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE")
        attributes.append((key.strip(), value))
    result = convert_dataset(
        args.source,
        args.out,
        mapping=args.mapping,
        format=args.format,
        dialect=args.dialect,
        dataset_id=args.dataset_id,
        attributes=attributes,
        items_per_part=args.items_per_part,
        overwrite=args.overwrite,
        strict=args.strict,
    )
    for line in result.log.warning_lines()[:MAX_WARNING_LINES]:
        print(f"warning: {line}", file=sys.stderr)
    modalities = ", ".join(f"{m} {n:,}" for m, n in sorted(result.by_modality.items()))
    print(
        f"wrote dataset {result.identifier!r} ({result.dialect} dialect): "
        f"{counted(result.items, 'item')} ({modalities}) in "
        f"{counted(len(result.parts), 'part')} to {result.url}"
    )
    if result.extensions:
        print(
            f"note: {', '.join(result.extensions)}: itemeval's extension of the item format "
            f"(the spec and commoneval 0.2.1 stop at choiceof5); itemeval reads it, other "
            f"readers of the format may refuse the dataset",
            file=sys.stderr,
        )
    return int(ExitCode.OK)
