"""`itemeval compact`: rewrite store partitions into one deduplicated fragment each."""

from __future__ import annotations

import argparse

from itemeval.errors import ExitCode
from itemeval.store import STAGES, StudyStore, compact


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
        choices=sorted(STAGES),
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
    store = StudyStore.open(args.store)
    results = compact(store, stages=args.stage, conditions=args.condition)
    if not results:
        print(f"nothing to compact in {store.root.url}")
        return int(ExitCode.OK)
    for result in results:
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
