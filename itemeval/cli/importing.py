"""`itemeval import SOURCE... --store URL`: bring other tools' results into a store.

Thin: arguments to `itemeval.import_sources` (`itemeval.api`), its result to text (or `--json`)."""

from __future__ import annotations

import argparse

from itemeval.cli.options import add_output, counted, print_json, table
from itemeval.errors import ExitCode


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import",
        help="import Every Eval Ever records and lm-eval, inspect_ai and HELM logs into a store",
        description="Read results other tools wrote (Every Eval Ever records, schemas 0.2.0, "
        "0.2.2 and 0.3.0; lm-eval results_*.json with samples_*.jsonl; inspect_ai .eval and "
        ".json logs; HELM run folders) and store them as imported conditions: items as a "
        "dataset in the item format, answers as solutions, the source's grades as a grade "
        "condition per metric. Each record imports or is rejected with a named reason. "
        "Importing the same file again writes nothing. See docs/importing.md.",
    )
    parser.add_argument("sources", nargs="+", metavar="SOURCE", help="a file or a folder")
    parser.add_argument("--store", required=True, metavar="URL", help="the store to import into")
    parser.add_argument(
        "--strict",
        action="store_true",
        help=f"refuse the import at the first rejected record (exit {int(ExitCode.IMPORT_REFUSED)}"
        "; nothing is written)",
    )
    add_output(parser)
    parser.set_defaults(func=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    from itemeval.api import import_sources

    result = import_sources(args.store, args.sources, strict=args.strict)
    if args.json:
        print_json(result.as_dict())
        return int(ExitCode.OK)
    tools = sorted({f"{f['tool']} {f['version'] or ''}".strip() for f in result.files})
    print(
        f"Read {counted(len(result.files), 'file')} ({', '.join(tools) or 'none new'}) "
        f"in {result.seconds:.2f} s"
    )
    if result.skipped:
        print(f"Skipped {counted(len(result.skipped), 'file')} imported before (nothing new)")
    if result.import_id is None:
        print(f"Nothing new written to {result.store}")
    else:
        print(
            f"Imported {result.samples:,} graded samples: {result.solutions:,} solutions, "
            f"{result.grades:,} grades into {result.store} (import {result.import_id})"
        )
    if result.generate:
        rows = [[g["id"], g["model_id"], g["tool"], _params(g["params"])] for g in result.generate]
        print()
        print(table(rows, ["generate condition", "model", "tool", "params"]))
    if result.grade:
        rows = [[g["id"], g["metric"], g["kind"]] for g in result.grade]
        print()
        print(table(rows, ["grade condition", "grader (metric)", "kind"]))
    if result.datasets:
        print()
        print("Datasets: " + ", ".join(result.datasets))
    if result.assumed_modality:
        print(
            f"Modality not stated for {counted(result.assumed_modality, 'item')}: "
            "written as short-prose (attribute modalityAssumed)"
        )
    if result.aggregates:
        print(
            f"Aggregate scores without per-sample records: {len(result.aggregates):,} "
            "(kept in the import record, not gradable)"
        )
    if result.rejected:
        total = sum(result.rejected.values())
        by = ", ".join(f"{reason} {count:,}" for reason, count in result.rejected.items())
        print(f"Rejected {counted(total, 'record')}: {by}")
        for example in result.examples:
            print(f"  {example}")
        unlisted = [f for f in result.rejected_files if f not in result.examples]
        for rejected in unlisted:  # every file not read is named, not only the first few
            print(f"  {rejected}")
    else:
        print("Rejected 0 records")
    return int(ExitCode.OK)


def _params(params: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "-"
