"""`itemeval init`, `itemeval plan` and `itemeval estimate`: look before you spend.

Thin: arguments to `Study.plan` / `Study.estimate`, their summaries to text (or `--json`)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from itemeval.planning import Estimate
    from itemeval.statistics._power import PowerPlan


def register(subparsers: argparse._SubParsersAction) -> None:
    init = subparsers.add_parser("init", help="write a commented starter study file")
    init.add_argument("path", nargs="?", default="study.yaml", help="where (default study.yaml)")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(func=cmd_init)

    plan = subparsers.add_parser("plan", help="print the design grid and cell counts")
    add_study(plan)
    add_selection(plan)
    add_output(plan)
    power = plan.add_argument_group("power planning (docs/statistics.md)")
    power.add_argument(
        "--detect",
        type=float,
        metavar="DIFF",
        help="also print the items and epochs a paired comparison of two conditions needs to "
        "detect this difference in accuracy (e.g. 0.03), and what that design would cost",
    )
    power.add_argument(
        "--pair",
        nargs="+",
        metavar="CONDITION",
        help="with --detect: plan for this pair of generate conditions (ids, slugs, prefixes or "
        "globs); one glob: the hardest pair of the conditions it matches (default: the hardest "
        "pair whose observed difference is within twice the difference to detect)",
    )
    power.add_argument(
        "--power", type=float, help="with --detect: the chance to detect it (default 0.8)"
    )
    power.add_argument(
        "--alpha",
        type=float,
        help="with --detect: the test's level (default: the study's analysis.alpha, 0.05)",
    )
    plan.add_argument(
        "--gold-sample",
        type=int,
        metavar="N",
        help="also draw N stored answers (stratified by condition and dataset) and write a "
        "labelling file for a person to fill in (see docs/judges.md)",
    )
    plan.add_argument(
        "--gold-out",
        metavar="PATH",
        help="where the labelling file goes (default "
        "<study>-gold-sample.csv; an existing file is never overwritten)",
    )
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
    sample = target.parent / "datasets" / "arithmetic"
    print(
        f"wrote {target} and its sample dataset {sample}/: edit the study, then "
        f"`itemeval plan {target}` and `itemeval estimate {target}`"
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
    study = study_from(args)
    power = {"detect": args.detect, "power": args.power, "alpha": args.alpha, "pair": args.pair}
    plan = study.plan(**_selection(args), **power)
    if args.gold_sample is not None or args.gold_out is not None:
        sample = study.gold_sample(
            args.gold_sample,
            args.gold_out,
            store=args.store,
            limit=args.limit,
            condition=args.condition,
        )
        print(
            f"wrote {sample.path}: {sample.rows:,} of {sample.answers:,} answers from "
            f"{sample.strata} strata (condition x dataset); fill in `verdict` with pass or "
            "fail, then name the file in the study's gold.labels",
            file=sys.stderr if args.json else sys.stdout,
        )
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
    for panel in plan.design.panels:
        print(f"panel {panel.id}: {panel.rule_text} (computed from their grades)")
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
    if plan.power is not None:
        print()
        print(render_power(plan.power, len(plan.generate)))
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
    if summary.adaptive:
        print(summary.adaptive_text())
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


def render_power(power: PowerPlan, conditions: int) -> str:
    """`plan --detect`: the designs that detect the difference, and the cheapest that fits."""
    v = power.variance
    rows = [
        [
            str(r.epochs),
            f"{r.items:,}",
            f"{r.answers_per_condition:,}",
            "yes" if r.fits else "no",
            usd(r.usd) if r.usd is not None else "n/a",
        ]
        for r in power.rows
    ]
    lines = [
        f"Power: to detect a difference of {power.detect:g} in accuracy between two conditions "
        f"(paired test, alpha {power.alpha:g}, power {power.power:g})",
        f"  Var(d) = tau^2 + 2 s2_within / epochs = {v.between:.4g} + 2 x {v.within:.4g} / "
        f"epochs" + (f", x {v.deff:.2f} (clusters)" if v.deff > 1 else ""),
        f"  from {v.source}",
        *(f"  assumed: {line}" for line in power.assumed),
        "",
        table(
            rows,
            [
                "epochs",
                "items",
                "answers per condition",
                f"fits ({power.available_items:,} items)",
                f"cost ({conditions} conditions, calibrated)",
            ],
            right={0, 1, 2, 4},
        ),
        "",
    ]
    best = power.recommended
    if best is None and power.least_items > power.available_items:
        lines.append(
            f"No design fits: the datasets have {power.available_items:,} items, and however "
            f"many epochs, the items' own differences need at least {power.least_items:,}. "
            "Add items, or plan for a larger difference."
        )
    elif best is None:
        lines.append(
            f"No design fits: the datasets have {power.available_items:,} items, and with them "
            f"it would take more than {power.most_epochs} epochs. Add items, or plan for a larger "
            "difference."
        )
    else:
        cost = f" for {usd(best.usd)}" if best.usd is not None else ""
        lines.append(
            f"Needed: {best.items:,} items x {best.epochs} epoch(s){cost} (every condition; an "
            "extra epoch costs as much as an extra item, so the fewest answers win)."
        )
    lines += power.notes
    lines += [f"warning: {w}" for w in power.warnings]
    return "\n".join(lines)


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
