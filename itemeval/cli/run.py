"""`itemeval generate | grade | run | status`: do the work, and see where it stands.

Thin: arguments to `Study.run` / `Study.status`, their summaries to text (or `--json`)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from itemeval.cli.options import (
    add_output,
    add_selection,
    add_study,
    counted,
    print_json,
    study_from,
    table,
    usd,
)
from itemeval.errors import ExitCode

if TYPE_CHECKING:
    from itemeval.store import RunsSpend

_STAGES = {"generate": ("generate",), "grade": ("grade",), "run": ("generate", "grade")}
_HELP = {
    "generate": "call the solver models for every pending (condition, item, epoch)",
    "grade": "grade the stored solutions: verifiable scorers and LLM judges",
    "run": "generate, then grade",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    for name in ("generate", "grade", "run"):
        parser = subparsers.add_parser(
            name,
            help=_HELP[name],
            description=_HELP[name] + ". Stored cells are skipped; the same command continues "
            "an interrupted run. Exit codes: 0 all done, 1 some cells ended in error, "
            "2 bad input, 3 confirmation declined, 4 budget cap, 130 interrupted.",
        )
        add_study(parser)
        add_selection(parser)
        add_run_options(parser)
        add_output(parser)
        parser.set_defaults(func=cmd_run, stages=_STAGES[name], command=name)

    status = subparsers.add_parser(
        "status", help="per condition: expected, done, errors, parse failures, cached, tokens, USD"
    )
    add_study(status, store_alone=True)
    status.add_argument("--store", metavar="URL", help="store root (overrides the study's)")
    status.add_argument("--condition", metavar="ID-PREFIX-OR-SLUG", help="only these conditions")
    status.add_argument(
        "--limit", type=int, metavar="N", help="expected counts for N items/dataset"
    )
    status.add_argument(
        "--no-differences",
        action="store_true",
        help="skip the paired comparisons (which read every grade of the study)",
    )
    add_output(status)
    status.set_defaults(func=cmd_status)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--yes", action="store_true", help="confirm a cost above budget.confirm_above_usd"
    )
    parser.add_argument(
        "--address",
        metavar="RAY_ADDRESS",
        help="an existing Ray cluster (default: $RAY_ADDRESS, else a local Ray for this run)",
    )
    parser.add_argument(
        "--no-ray",
        action="store_true",
        help="run the shards in this process (debugging and tiny studies)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.add_argument(
        "--reuse-imported",
        action="store_true",
        help="first copy imported answers into the native conditions with the same model, "
        "parameters and prompt (their cells are then not generated again); by default a run "
        "reuses nothing it imported",
    )
    parser.add_argument(
        "--pilot",
        type=_pilot,
        metavar="N",
        help="run the first N items of each dataset first (or that share of them: 0.05), "
        "estimate the rest from what they cost, and ask again before going on",
    )
    parser.add_argument(
        "--no-adaptive",
        action="store_true",
        help="run every item of the models with `adaptive:` too (the items an adaptive run "
        "answered are stored: not called again)",
    )


def _pilot(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0 or (value > 1 and not value.is_integer()):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a number of items (10) or a share of them (0.05)"
        )
    return value


def cmd_run(args: argparse.Namespace) -> int:
    study = study_from(args)
    if args.reuse_imported:
        for reused in study.reuse_imported(store=args.store, condition=args.condition):
            print(
                f"Reused {reused.rows:,} imported answers of {reused.imported} for {reused.native}"
            )
    summary = study.run(
        args.stages,
        store=args.store,
        condition=args.condition,
        limit=args.limit,
        force=args.force,
        yes=args.yes,
        address=args.address,
        in_process=args.no_ray,
        accept_dataset_change=args.accept_dataset_change,
        quiet=args.quiet or args.json,
        argv=sys.argv,
        pilot=args.pilot,
        adaptive=not args.no_adaptive,
    )
    if args.json:
        print_json(summary.to_json())
    elif not args.quiet or summary.exit_code != ExitCode.OK:
        print(summary.message)
    return int(summary.exit_code)


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"  # "-": a store read without its study


def cmd_status(args: argparse.Namespace) -> int:
    status = study_from(args).status(
        store=args.store,
        limit=args.limit,
        condition=args.condition,
        differences=not args.no_differences,
    )
    if args.json:
        print_json(status.to_json())
        return int(ExitCode.OK)
    print(
        f"Study {status.study}: {counted(status.items, 'item')} x {counted(status.epochs, 'epoch')}"
    )
    print(f"Store: {status.store}")
    print()
    print(
        table(
            [
                [
                    r["stage"],
                    r["slug"],
                    _count(r["expected"]),
                    f"{r['done']:,}",
                    _count(r["pending"]),
                    ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0",
                    f"{r['parse_failures']:,}",
                    f"{r['cached']:,}",
                    f"{r['input_tokens'] + r['output_tokens']:,}",
                    f"{r['cached_input_tokens']:,}",
                    usd(r["usd_spent"]),
                    usd(r["prompt_cache_saved_usd"]),
                ]
                for r in status.conditions
            ],
            [
                "stage",
                "condition",
                "expected",
                "done",
                "pending",
                "errors",
                "parse fail",
                "cached",
                "tokens",
                "prompt-cached",
                "paid, every row",
                "prompt-cache saved",
            ],
            right={2, 3, 4, 6, 7, 8, 9, 10, 11},
        )
    )
    print()
    print(_runs_line(status.runs))
    cache = status.prompt_cache
    if cache["cached_input_tokens"]:
        print(
            f"Prompt caching: {cache['cached_input_tokens']:,} of {cache['input_tokens']:,} "
            f"input tokens read from the providers' caches, which saved "
            f"{usd(cache['saved_usd'])} (at the pricing table's cached-input prices)"
        )
    batch = status.batch
    if batch["rows"]:
        print(
            f"Batch tier: {batch['rows']:,} rows answered through providers' batch APIs, "
            f"which saved {usd(batch['saved_usd'])} against live prices"
        )
    if batch["open"]:
        cells = sum(int(b["cells"]) for b in batch["open"])
        print(
            f"Open batches: {len(batch['open'])} ({cells:,} cells); the next run collects them "
            "(or the run still polling them)"
        )
    if status.results:
        print()
        print(status.results_text())
    if status.differences:
        print(status.differences)
    return int(ExitCode.OK)


def _runs_line(spent: RunsSpend) -> str:
    """What the runs paid, as their manifests recorded it (it includes answers that reached the
    store later from the response cache, which the rows above count as free)."""
    line = f"Paid by {counted(spent.runs, 'run')}: {usd(spent.usd)}"
    if spent.runs > 1:
        line += f" (the latest run {usd(spent.last_usd)})"
    if spent.unstored_usd >= 0.00005:  # below what `usd` shows: the sums' rounding
        line += (
            f" ({usd(spent.unstored_usd)} of it on answers of failed or interrupted shards, "
            "stored later from the response cache)"
        )
    if spent.unfinished:
        line += (
            f"; {counted(spent.unfinished, 'run')} never recorded an end (killed, or still "
            f"running): its ledger's figure was never written; its stored rows cost "
            f"{usd(spent.unfinished_usd)}"
        )
    if spent.study_max_usd is not None:
        line += (
            f"\nThe study has spent {usd(spent.study_usd)} of budget.study_max_usd "
            f"{usd(spent.study_max_usd)} ({usd(max(0.0, spent.study_max_usd - spent.study_usd))} "
            "left for the next runs)"
        )
    return line
