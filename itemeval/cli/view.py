"""`itemeval view`: the study's store in a local, read-only web viewer (`itemeval.view`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from itemeval.cli.options import add_selection, add_study, study_from
from itemeval.errors import ExitCode, InputError, Problem

#: `itemeval.view.DEFAULT_PORT`, not imported here: every command would pay for the import.
DEFAULT_PORT = 8700


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "view",
        help="browse the study's answers in a local, read-only web viewer",
        description="Serve a read-only web viewer over the study's store (local or S3): the "
        "leaderboard with intervals, coverage, cost and errors; the items with filters; each "
        "item's prompt and every condition's answers with their grades; two conditions side "
        "by side. It follows a run under way. It listens on 127.0.0.1 unless --host names "
        "another address, which then requires a token. See docs/results.md.",
    )
    add_study(parser, store_alone=True)
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any)"
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1); any other requires a token",
    )
    parser.add_argument(
        "--token", help="the token another --host requires (default: generated and printed)"
    )
    parser.add_argument("--no-open", action="store_true", help="do not open a browser")
    add_selection(parser, reading=True)
    parser.set_defaults(func=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    if args.study is not None and Path(args.study).is_dir():  # a store folder: read it alone
        if args.store:
            raise InputError(
                Problem(
                    f"{args.study} is a folder, and --store names a store too",
                    field="STUDY",
                    hint="give a study file and --store, or the store folder alone "
                    "(`itemeval view --store PATH`)",
                )
            )
        args.study, args.store = None, args.study
    study_from(args).view(
        store=args.store,
        limit=args.limit,
        condition=args.condition,
        host=args.host,
        port=args.port,
        token=args.token,
        open_browser=not args.no_open,
    )
    return int(ExitCode.OK)
