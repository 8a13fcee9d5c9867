"""`itemeval limiters`: the endpoints' shared limiters on a Ray cluster; remove them.

Thin: arguments to `itemeval.list_limiters` / `itemeval.remove_limiters`, their results to text
(or `--json`)."""

from __future__ import annotations

import argparse

from itemeval.cli.options import print_json, table
from itemeval.errors import ExitCode


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "limiters",
        help="list (or remove) the endpoints' shared rate limiters on a Ray cluster",
        description=(
            "Every driver on a cluster that calls an endpoint shares one limiter actor (its "
            "requests and tokens per minute, its concurrency). It outlives the jobs and exits "
            "by itself after 5 idle minutes; remove one at once to declare other limits for "
            "its endpoint."
        ),
    )
    parser.add_argument(
        "--address", help="the Ray cluster (default: RAY_ADDRESS, else this machine's)"
    )
    parser.add_argument("--remove", nargs="*", metavar="NAME", help="remove these (no name: all)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=run_limiters)


def run_limiters(args: argparse.Namespace) -> int:
    from itemeval.api import list_limiters, remove_limiters

    if args.remove is not None:
        removed = remove_limiters(args.remove or None, address=args.address)
        if args.json:
            print_json({"removed": removed})
        else:
            print(
                f"removed {len(removed)} limiter(s)"
                + (": " + ", ".join(removed) if removed else "")
            )
        return int(ExitCode.OK)
    limiters = list_limiters(args.address)
    if args.json:
        print_json([{"name": info.name, "state": info.state} for info in limiters])
        return int(ExitCode.OK)
    if not limiters:
        print("no itemeval limiter on this cluster")
        return int(ExitCode.OK)
    rows = []
    for info in limiters:
        state = info.state or {}
        limits = state.get("limits", {})
        rows.append(
            [
                info.name,
                str(limits.get("requests_per_minute") or "-"),
                str(limits.get("tokens_per_minute") or "-"),
                str(limits.get("max_concurrency", "?")),
                str(state.get("leased", "?")),
                ", ".join(state.get("jobs", [])) or ("not answering" if not state else "none"),
            ]
        )
    print(
        table(rows, ["limiter", "rpm", "tpm", "concurrency", "leased", "jobs"], right={1, 2, 3, 4})
    )
    return int(ExitCode.OK)
