"""`itemeval init`, `itemeval plan` and `itemeval estimate`: look before you spend.

Thin: arguments to `Study.plan` / `Study.estimate`, their summaries to text (or `--json`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from itemeval.api import Selection, write_starter_study
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
from itemeval.estimate import Estimate


def register(subparsers: argparse._SubParsersAction) -> None:
    init = subparsers.add_parser("init", help="write a commented starter study file")
    init.add_argument("path", nargs="?", default="study.yaml", help="where (default study.yaml)")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(func=cmd_init)

    plan = subparsers.add_parser("plan", help="print the design grid and cell counts")
    add_study(plan)
    add_selection(plan)
    add_output(plan)
    plan.set_defaults(func=cmd_plan)

    estimate = subparsers.add_parser(
        "estimate", help="print tokens and USD per stage and model, total and remaining"
    )
    add_study(estimate)
    add_selection(estimate)
    add_output(estimate)
    estimate.set_defaults(func=cmd_estimate)


def cmd_init(args: argparse.Namespace) -> int:
    target = write_starter_study(args.path, force=args.force)
    print(
        f"wrote {target}: edit it, then `itemeval plan {target}` and `itemeval estimate {target}`"
    )
    return int(ExitCode.OK)


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "store": args.store,
        "limit": args.limit,
        "condition": args.condition,
        "force": args.force,
        "accept_dataset_change": args.accept_dataset_change,
    }


def cmd_plan(args: argparse.Namespace) -> int:
    plan = study_from(args).plan(**_selection(args))
    if args.json:
        print_json(plan.to_json())
        return int(ExitCode.OK)
    counts = plan.cells
    epochs = plan.selection.epochs
    print(_header(plan.selection))
    print()
    print(f"Generate conditions ({len(plan.generate)}): models x prompts x model configs")
    print(
        table(
            [
                [c["id"], c["model"], c["prompt"], c["model_config"], _params(c["params"])]
                for c in plan.generate
            ],
            ["condition id", "model", "prompt", "model config", "params"],
        )
    )
    print()
    print(f"Grade conditions ({len(plan.grade)}): graders x rubrics, plus verifiable scorers")
    print(
        table(
            [
                [c["id"], "judge", c["model"] or "", c["rubric"] or ""]
                if c["kind"] == "judge"
                else [c["id"], "scorer", c["scorer"] or "", ""]
                for c in plan.grade
            ],
            ["condition id", "kind", "grader", "rubric"],
        )
    )
    print()
    print(
        f"Cells: generate {counted(len(plan.generate), 'condition')} x "
        f"{counted(plan.selection.items, 'item')} x {counted(epochs, 'epoch')} = "
        f"{counts['generate']:,}; judge grades {counts['grade_judge']:,}; "
        f"scorer grades {counts['grade_scorer']:,}"
    )
    if plan.pending is not None:
        total_grade = counts["grade_judge"] + counts["grade_scorer"]
        print(
            f"Still to do: generate {plan.pending['generate']:,} of {counts['generate']:,}; "
            f"grade {plan.pending['grade']:,} of {total_grade:,}"
        )
    _print_warnings(plan.warnings)
    return int(ExitCode.OK)


def cmd_estimate(args: argparse.Namespace) -> int:
    summary = study_from(args).estimate(**_selection(args))
    if args.json:
        print_json(summary.to_json())
        return int(ExitCode.OK)
    print(_header(summary.selection))
    print()
    print(render_estimate(summary.estimate))
    print()
    print(f"Gate: {summary.gate}")
    _print_warnings(summary.warnings)
    return int(ExitCode.OK)


def render_estimate(estimate: Estimate) -> str:
    """The estimate as text: one line per condition (the prior, the calibrated estimate and what
    the calibration rests on), then totals by stage and by model."""
    rows = [
        [
            line.stage,
            line.condition,
            line.model + ("" if line.priced else " (no price)"),
            f"{line.cells:,}",
            f"{line.input_tokens:,}",
            f"{line.output_tokens:,}",
            usd(line.prior_usd),
            usd(line.usd),
            f"{line.remaining_cells:,}",
            f"{line.remaining_calls:,}",
            usd(line.remaining_usd),
            line.source,
        ]
        for line in estimate.lines
    ]
    out = [
        table(
            rows,
            [
                "stage",
                "condition",
                "model",
                "cells",
                "input tok",
                "output tok",
                "prior USD",
                "USD",
                "remaining cells",
                "remaining calls",
                "remaining USD",
                "calibrated from",
            ],
            right={3, 4, 5, 6, 7, 8, 9, 10},
        ),
        "",
    ]
    for key in ("stage", "model"):
        groups = estimate.by(key)
        out.append(
            f"By {key}: "
            + "; ".join(
                f"{name} {usd(v['usd'])} (remaining {usd(v['remaining_usd'])})"
                for name, v in groups.items()
            )
        )
    total = f"Total {usd(estimate.total_usd)}, remaining {usd(estimate.remaining_usd)}"
    if estimate.calibrated:
        out.append(
            f"{total}; the prior said {usd(estimate.prior_total_usd)}, remaining "
            f"{usd(estimate.prior_remaining_usd)} (calibrated from the usage providers reported "
            "for stored answers; prices from the pricing table)"
        )
    else:
        out.append(
            f"{total} (the prior: tokens estimated at ~4 characters a token, nothing stored to "
            "calibrate from yet; prices from the pricing table)"
        )
    batch = [line.condition for line in estimate.lines if line.tier == "batch"]
    if batch:
        out.append(
            f"Batch tier: {', '.join(batch)} priced at the providers' batch prices, "
            f"{usd(estimate.batch_saving_usd)} less than live on the remaining cells; cells a "
            "batch has not answered by its deadline are called live, at live prices"
        )
    return "\n".join(out)


def _header(selection: Selection) -> str:
    limit = selection.limit
    chosen = f"first {limit} of each dataset" if limit is not None else "all items"
    datasets = ", ".join(f"{d['name']} {d['selected']}/{d['items']}" for d in selection.datasets)
    return (
        f"Study {selection.study}: {counted(selection.items, 'item')} ({chosen}: {datasets}), "
        f"{counted(selection.epochs, 'epoch')}\n"
        f"Store: {selection.store}"
    )


def _params(params: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "(provider defaults)"


def _print_warnings(warnings: list[str]) -> None:
    if warnings:
        print(file=sys.stderr)
        for warning in warnings[:20]:
            print(f"warning: {warning}", file=sys.stderr)
        if len(warnings) > 20:
            print(f"warning: ... and {len(warnings) - 20} more", file=sys.stderr)
