"""`itemeval init`, `itemeval plan` and `itemeval estimate`: look before you spend."""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

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
from itemeval.errors import ConfigError, ExitCode, Problem
from itemeval.estimate import Estimate
from itemeval.planning import Plan, make_plan


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
    target = Path(args.path)
    if target.exists() and not args.force:
        raise ConfigError(
            Problem("file exists", file=str(target), hint="choose another path or pass --force")
        )
    text = resources.files("itemeval").joinpath("starter_study.yaml").read_text("utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(
        f"wrote {target}: edit it, then `itemeval plan {target}` and `itemeval estimate {target}`"
    )
    return int(ExitCode.OK)


def _plan(args: argparse.Namespace) -> Plan:
    return make_plan(
        study_from(args),
        store_url=args.store,
        limit=args.limit,
        condition=args.condition,
        force=args.force,
        accept_changed=args.accept_dataset_change,
    )


def cmd_plan(args: argparse.Namespace) -> int:
    plan = _plan(args)
    design = plan.design
    counts = design.cell_counts(plan.item_count)
    if args.json:
        print_json(
            {
                "study": plan.study.study,
                "store": plan.store.root.url,
                "items": plan.item_count,
                "epochs": design.epochs,
                "datasets": [
                    {
                        "name": d.name,
                        "fingerprint": d.fingerprint,
                        "items": d.items,
                        "selected": d.selected,
                        "modalities": dict(d.modalities),
                    }
                    for d in plan.datasets
                ],
                "generate": [c.describe() | {"slug": c.slug} for c in design.generate],
                "grade": [c.describe() | {"slug": c.slug} for c in design.grade],
                "cells": counts,
                "pending": _pending_counts(plan),
            }
        )
        return int(ExitCode.OK)
    print(_header(plan))
    print()
    print(f"Generate conditions ({len(design.generate)}): models x prompts x model configs")
    print(
        table(
            [
                [c.id, c.model_id, c.prompt.name, c.config_name, _params(c.params.as_dict())]
                for c in design.generate
            ],
            ["condition id", "model", "prompt", "model config", "params"],
        )
    )
    print()
    print(f"Grade conditions ({len(design.grade)}): graders x rubrics, plus verifiable scorers")
    print(
        table(
            [
                [c.id, "judge", c.model_id or "", c.rubric.name if c.rubric else ""]
                if c.kind == "judge"
                else [c.id, "scorer", c.scorer or "", ""]
                for c in design.grade
            ],
            ["condition id", "kind", "grader", "rubric"],
        )
    )
    print()
    print(
        f"Cells: generate {counted(len(design.generate), 'condition')} x "
        f"{counted(plan.item_count, 'item')} x {counted(design.epochs, 'epoch')} = "
        f"{counts['generate']:,}; judge grades {counts['grade_judge']:,}; "
        f"scorer grades {counts['grade_scorer']:,}"
    )
    pending = _pending_counts(plan)
    if pending is not None:
        total_grade = counts["grade_judge"] + counts["grade_scorer"]
        print(
            f"Still to do: generate {pending['generate']:,} of {counts['generate']:,}; "
            f"grade {pending['grade']:,} of {total_grade:,}"
        )
    _print_warnings(plan)
    return int(ExitCode.OK)


def cmd_estimate(args: argparse.Namespace) -> int:
    plan = _plan(args)
    estimate = plan.estimate
    budget = plan.study.budget
    verdict = gate_verdict(estimate, plan)
    if args.json:
        print_json(
            estimate.to_json()
            | {
                "study": plan.study.study,
                "budget": budget.model_dump(),
                "gate": verdict,
                "prices_as_of": plan.pricing.prices_as_of,
            }
        )
        return int(ExitCode.OK)
    print(_header(plan))
    print()
    print(render_estimate(estimate))
    print()
    print(f"Gate: {verdict}")
    _print_warnings(plan)
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
                "remaining USD",
                "calibrated from",
            ],
            right={3, 4, 5, 6, 7, 8, 9},
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
    return "\n".join(out)


def gate_verdict(estimate: Estimate, plan: Plan) -> str:
    budget = plan.study.budget
    remaining = estimate.remaining_usd
    if budget.max_usd is not None and remaining > budget.max_usd:
        return (
            f"over budget: remaining {usd(remaining)} > max_usd {usd(budget.max_usd)}; "
            "a run would stop with exit code 4"
        )
    if budget.confirm_above_usd is not None and remaining > budget.confirm_above_usd:
        return (
            f"needs confirmation: remaining {usd(remaining)} > confirm_above_usd "
            f"{usd(budget.confirm_above_usd)}; a run asks, or pass --yes"
        )
    return "ok: a run would start without asking"


def _header(plan: Plan) -> str:
    study = plan.study
    selection = f"first {plan.limit} of each dataset" if plan.limit is not None else "all items"
    datasets = ", ".join(f"{d.name} {d.selected}/{d.items}" for d in plan.datasets)
    return (
        f"Study {study.study}: {counted(plan.item_count, 'item')} ({selection}: {datasets}), "
        f"{counted(plan.design.epochs, 'epoch')}\n"
        f"Store: {plan.store.root.url}"
    )


def _pending_counts(plan: Plan) -> dict[str, int] | None:
    """Cells still to do; grade cells include those of solutions not generated yet."""
    if plan.pending_generate is None or plan.pending_grade is None:
        return None
    generate = plan.pending_generate.num_rows
    grade = plan.pending_grade.num_rows + generate * len(plan.design.grade)
    return {"generate": generate, "grade": grade}


def _params(params: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "(provider defaults)"


def _print_warnings(plan: Plan) -> None:
    warnings = [str(w) for w in plan.warnings] + plan.estimate.warnings
    if warnings:
        print(file=sys.stderr)
        for warning in warnings[:20]:
            print(f"warning: {warning}", file=sys.stderr)
        if len(warnings) > 20:
            print(f"warning: ... and {len(warnings) - 20} more", file=sys.stderr)
