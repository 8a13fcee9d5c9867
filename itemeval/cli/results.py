"""`itemeval export` and `itemeval report`: what researchers read.

Both read the study's store (never the model endpoints), cover the study's selection like
`itemeval status`, and write under `--out` (any fsspec URL; default `<store>/exports/`).
Thin: arguments to `Study.export` / `Study.report`, their results to text (or `--json`).
"""

from __future__ import annotations

import argparse
from typing import Any

from itemeval.api import EEE_VERSIONS, EXPORT_FORMATS, RELATIONSHIPS, format_leaderboard
from itemeval.cli.options import add_output, add_selection, add_study, print_json, study_from
from itemeval.errors import ExitCode, InputError, Problem


def register(subparsers: argparse._SubParsersAction) -> None:
    export = subparsers.add_parser(
        "export",
        help="write the long table (parquet, CSV) and Every Eval Ever records",
        description="Write one row per grading event (item fields, every facet, solution, "
        "grade, tokens, USD, latency, error codes) as parquet and CSV, and Every Eval Ever "
        "aggregate and per-sample records, streaming from the store in bounded memory. "
        "Into a folder that holds an earlier export, only what changed since is written "
        "(an unchanged store writes nothing). "
        "See docs/results.md for the layout, the columns and the Every Eval Ever mapping.",
    )
    add_study(export, store_alone=True)
    _add_common(export)
    export.add_argument(
        "--format",
        default=",".join(EXPORT_FORMATS),
        metavar="LIST",
        help=f"comma-separated formats: {', '.join(EXPORT_FORMATS)} (default: all)",
    )
    export.add_argument(
        "--eee-version",
        choices=EEE_VERSIONS,
        default="0.2.0",
        help="Every Eval Ever format: 0.2.0 = instance_level_eval 0.2.0 with aggregate_eval "
        "0.1.0 (default), 0.3.0 = the current schemas",
    )
    export.add_argument(
        "--include-ungraded",
        action="store_true",
        help="also one row per stored solution that has no grade yet under a grader "
        "(generation errors, pending grades); grade columns stay empty, `graded` is false",
    )
    export.add_argument(
        "--organization",
        default="unknown",
        metavar="NAME",
        help="Every Eval Ever source_organization_name (who ran the evaluation)",
    )
    export.add_argument(
        "--evaluator-relationship",
        choices=RELATIONSHIPS,
        default="third_party",
        help="Every Eval Ever evaluator_relationship to the models (default third_party)",
    )
    add_output(export)
    export.set_defaults(func=cmd_export)

    report = subparsers.add_parser(
        "report",
        help="write an HTML report with plots and a Markdown summary",
        description="Leaderboard with 95% bootstrap intervals, prompt sensitivity, grader "
        "agreement, cost per correct answer, errors and parse failures, and item difficulty, "
        "as a self-contained HTML page (report.html) and Markdown (report.md).",
    )
    add_study(report, store_alone=True)
    _add_common(report)
    report.add_argument("--resamples", type=int, help="bootstrap resamples")
    report.add_argument("--seed", type=int, help="bootstrap seed")
    add_output(report)
    report.set_defaults(func=cmd_report)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", metavar="DIR", help="output directory, any fsspec URL (default <store>/exports)"
    )
    add_selection(parser, reading=True)


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    return {"store": args.store, "limit": args.limit, "condition": args.condition}


STATISTICS_FILES = ("comparisons", "rankings", "variance_components")


def cmd_export(args: argparse.Namespace) -> int:
    result = study_from(args).export(
        args.out,
        formats=args.format,
        eee_version=args.eee_version,
        include_ungraded=args.include_ungraded,
        organization=args.organization,
        relationship=args.evaluator_relationship,
        **_selection(args),
    )
    if args.json:
        print_json(result.as_dict())
        return int(ExitCode.OK)
    what = "rows (grading events)" if not args.include_ungraded else "rows"
    print(f"Exported {result.rows:,} {what} of study {result.study} in {result.seconds:.1f} s")
    if result.unchanged:
        print("  nothing changed since the last export into this folder: nothing written")
    else:
        print(
            f"  {result.rows_written:,} rows read from the store for {result.pairs_changed:,} "
            f"changed condition pairs, {result.files_written:,} files written"
        )
    statistics = [k for k in result.files if k.startswith(STATISTICS_FILES)]
    for kind, url in result.files.items():
        if kind in statistics:
            if kind == statistics[0]:
                names = sorted({result.files[k].rsplit("/", 1)[1] for k in statistics})
                folder = url.rsplit("/", 1)[0]
                print(f"  {'compare':<8} {folder}/ {', '.join(names)}  (paired comparisons)")
            continue
        line = f"  {kind:<8} {url}"
        if kind == "eee":
            line += (
                f"  ({result.eee_evaluations:,} evaluations, {result.eee_samples:,} samples, "
                f"Every Eval Ever {result.eee_version})"
            )
        print(line)
    counts = result.counts
    if counts.stale:
        print(f"Note: {counts.stale:,} grades were given to an earlier answer text (grade_stale)")
    if counts.outside_selection:
        print(
            f"Left out: {counts.outside_selection:,} grade rows of items or epochs outside "
            "the study's selection"
        )
    if result.eee_excluded:
        left_out = ", ".join(f"{k} {v:,}" for k, v in result.eee_excluded.items())
        print(f"Every Eval Ever leaves out grades that are not final: {left_out}")
    if result.rows == 0:
        print("Nothing is stored for this selection yet: `itemeval run STUDY` first.")
    return int(ExitCode.OK)


def cmd_report(args: argparse.Namespace) -> int:
    if args.resamples is not None and args.resamples < 1:
        raise InputError(Problem("must be at least 1", field="--resamples"))
    bootstrap = {
        name: value
        for name, value in (("resamples", args.resamples), ("seed", args.seed))
        if value is not None  # else the API's default
    }
    result = study_from(args).report(args.out, **bootstrap, **_selection(args))
    if args.json:
        print_json(
            {
                "study": result.data.study,
                "html": result.html,
                "markdown": result.markdown,
                "seconds": round(result.seconds, 3),
            }
        )
        return int(ExitCode.OK)
    data = result.data
    print(format_leaderboard(data.study, data.leaderboard, data.bootstrap, data.headline_family))
    print()
    print(f"Report: {result.html}")
    print(f"        {result.markdown}")
    return int(ExitCode.OK)
