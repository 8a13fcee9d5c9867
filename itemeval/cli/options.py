"""Arguments shared by several commands, defined once so they read the same everywhere; the
study they name, as the API's `Study`; text tables and amounts."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from itemeval.api import Study, format_usd
from itemeval.errors import InputError, Problem


def add_study(parser: argparse.ArgumentParser, *, store_alone: bool = False) -> None:
    """The STUDY argument; `store_alone`: optional when `--store URL` names a store (whose
    results are read without a study file)."""
    if store_alone:
        parser.add_argument(
            "study",
            metavar="STUDY",
            nargs="?",
            help="the study YAML file (optional with --store: read the store alone)",
        )
    else:
        parser.add_argument("study", metavar="STUDY", help="the study YAML file")


def add_selection(parser: argparse.ArgumentParser, *, reading: bool = False) -> None:
    """Which results a command works on: `--store`, `--condition`, `--limit`. A command that
    runs also takes `--force` and `--accept-dataset-change`; one `reading` stored results
    takes several conditions (and globs) and the run's item limit."""
    parser.add_argument(
        "--store",
        metavar="URL",
        help="store root (overrides the study's)"
        if reading
        else "store root (overrides the study's `store`)",
    )
    if reading:
        parser.add_argument(
            "--condition",
            action="append",
            metavar="ID-PREFIX-OR-SLUG",
            help="only these conditions (repeatable; a glob selects every match)",
        )
        parser.add_argument(
            "--limit",
            type=int,
            metavar="N",
            help="the first N items of each dataset, as in the run",
        )
        return
    parser.add_argument(
        "--condition",
        metavar="ID-PREFIX-OR-SLUG",
        help="only the conditions whose id starts with this, or whose slug is this",
    )
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="only the first N items of each dataset (overrides budget.policy/dev_items)",
    )
    parser.add_argument(
        "--force", action="store_true", help="redo the selected cells even if they are stored"
    )
    parser.add_argument(
        "--accept-dataset-change",
        action="append",
        default=[],
        metavar="DATASET",
        help="re-pin a dataset whose content changed since it was pinned (repeatable)",
    )


def add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def study_from(args: argparse.Namespace) -> Study:
    if args.study is None:
        store = getattr(args, "store", None)
        if not store:
            raise InputError(
                Problem("give a STUDY file, or --store URL to read a store alone", field="STUDY")
            )
        args.store = None  # the store is the study's own
        return Study.from_store(store)
    return Study.from_yaml(args.study)


def print_json(payload: Any) -> None:
    json.dump(payload, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def table(rows: list[list[str]], header: list[str], right: set[int] | None = None) -> str:
    """A plain aligned text table (no dependencies, readable in any log)."""
    right = right or set()
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def usd(value: float) -> str:
    return format_usd(value)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 item`, `2 items`, `1,319 items` (a count and its noun, in agreement)."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
