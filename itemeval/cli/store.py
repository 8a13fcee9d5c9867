"""`itemeval compact`: rewrite store partitions into one deduplicated fragment each.

Thin: arguments to `itemeval.compact_store`, its result to text."""

from __future__ import annotations

import argparse

from itemeval.api import COMPACT_STAGES, compact_store, rebuild_store_summaries
from itemeval.errors import ExitCode


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compact",
        help="merge each store partition's small fragments and update its summary",
        description=(
            "Merge each partition's small fragments (and those its summary does not cover) "
            "into one file holding the best row of each key, write the partition's summary, "
            "then remove exactly the fragments that were merged. Safe while runs write to "
            'and read from the store. docs/store.md, "Compaction and summaries".'
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
    parser.add_argument(
        "--full",
        action="store_true",
        help="merge every fragment of each partition into one (a generate condition's grades "
        "each), large ones included",
    )
    parser.add_argument(
        "--rebuild-summaries",
        action="store_true",
        help="only write each partition's summary again from its rows (summaries are derived "
        "data: this never changes a row)",
    )
    parser.set_defaults(func=run_compact)


def run_compact(args: argparse.Namespace) -> int:
    if args.rebuild_summaries:
        rebuilt = rebuild_store_summaries(args.store, stage=args.stage, condition=args.condition)
        if not rebuilt.partitions:
            print(f"nothing to summarise in {rebuilt.store}")
        for stage, condition_id, cells in rebuilt.partitions:
            print(f"{stage}/{condition_id}: summary rebuilt ({cells:,} cells)")
        return int(ExitCode.OK)
    compaction = compact_store(
        args.store, stage=args.stage, condition=args.condition, full=args.full
    )
    if not compaction.partitions:
        print(f"nothing to compact in {compaction.store}")
        return int(ExitCode.OK)
    for result in compaction.partitions:
        if result.fragment_written is None:
            print(f"{result.stage}/{result.condition_id}: already compact, summary up to date")
        else:
            made = len(result.fragments_written)
            print(
                f"{result.stage}/{result.condition_id}: {result.fragments_read} fragments, "
                f"{result.rows_read} rows -> {made} fragment{'s' if made != 1 else ''}, "
                f"{result.rows_written} rows ({result.duplicates_dropped} superseded rows "
                "dropped)"
            )
    return int(ExitCode.OK)
