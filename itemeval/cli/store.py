"""`itemeval compact`: rewrite store partitions into one deduplicated fragment each.

Thin: arguments to `itemeval.compact_store`, its result to text."""

from __future__ import annotations

import argparse

from itemeval.api import COMPACT_STAGES, compact_store
from itemeval.errors import ExitCode


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compact",
        help="merge each store partition's fragments into one deduplicated file",
        description=(
            "Rewrite the fragments of each partition into one file holding the best row of "
            "each key, then remove exactly the fragments that were read. Safe while runs "
            "write to and read from the store."
        ),
    )
    parser.add_argument("store", metavar="STUDY_ROOT", help="the study's store URL or path")
    parser.add_argument(
        "--stage",
        choices=COMPACT_STAGES,
        action="append",
        help="compact only this stage (repeatable; default: solutions and grades)",
    )
    parser.add_argument(
        "--condition",
        action="append",
        metavar="X",
        help="only conditions matching X: an id, an id prefix, a slug, or a glob (repeatable)",
    )
    parser.set_defaults(func=run_compact)


def run_compact(args: argparse.Namespace) -> int:
    compaction = compact_store(args.store, stage=args.stage, condition=args.condition)
    if not compaction.partitions:
        print(f"nothing to compact in {compaction.store}")
        return int(ExitCode.OK)
    for result in compaction.partitions:
        if result.fragment_written is None:
            print(
                f"{result.stage}/{result.condition_id}: already compact "
                f"({result.fragments_read} fragment, {result.rows_read} rows)"
            )
        else:
            print(
                f"{result.stage}/{result.condition_id}: {result.fragments_read} fragments, "
                f"{result.rows_read} rows -> 1 fragment, {result.rows_written} rows "
                f"({result.duplicates_dropped} superseded rows dropped)"
            )
    return int(ExitCode.OK)
