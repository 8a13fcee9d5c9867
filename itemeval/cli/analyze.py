"""`itemeval analyze irt STUDY` (or `--store URL` alone): item response theory on the study's
store, or on a store read without a study file (docs/irt.md).

Thin: arguments to `Study.irt`, its result to text (or `--json`).
"""

from __future__ import annotations

import argparse
import math

from itemeval.cli.options import add_output, add_study, print_json, study_from, table
from itemeval.errors import ExitCode

#: Flagged items printed (all are in `<store>/analysis/irt/items.parquet` and the report).
MAX_PRINTED = 20


def register(subparsers: argparse._SubParsersAction) -> None:
    analyze = subparsers.add_parser(
        "analyze", help="analyses of a study's stored results (irt)", description="Analyses."
    )
    kinds = analyze.add_subparsers(dest="analysis", metavar="ANALYSIS")
    irt = kinds.add_parser(
        "irt",
        help="fit 1PL and 2PL item response models; flag suspicious items",
        description="Fit 1PL and 2PL item response models to the headline grader's results "
        "(epochs as binomial counts), choose one by 5-fold held-out log-likelihood, and print "
        "each condition's ability with a 95%% interval (the items' estimation error included), "
        "and the items whose discrimination is significantly below 0 (Benjamini-Hochberg) "
        "with standard errors. Needs at least 3 conditions with graded answers. Writes "
        "<store>/analysis/irt/. See docs/irt.md.",
    )
    add_study(irt, store_alone=True)
    irt.add_argument(
        "--store",
        metavar="URL",
        help="store root (overrides the study's; without STUDY: read this store alone, e.g. "
        "one `itemeval import` filled)",
    )
    irt.add_argument(
        "--with",
        dest="with_stores",
        action="append",
        default=[],
        metavar="STORE-URL",
        help="also fit the conditions of another store where `analyze irt` ran (repeatable); "
        "items match by dataset, id and content hash",
    )
    irt.add_argument(
        "--condition",
        action="append",
        metavar="ID-PREFIX-OR-SLUG",
        help="only these conditions (repeatable)",
    )
    irt.add_argument("--limit", type=int, metavar="N", help="the first N items of each dataset")
    irt.add_argument("--no-write", action="store_true", help="print only; write no file")
    add_output(irt)
    irt.set_defaults(func=cmd_irt)
    analyze.set_defaults(func=lambda args: _no_analysis(analyze))


def _no_analysis(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return int(ExitCode.BAD_INPUT)


def _num(value: float, digits: int = 2) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.{digits}f}"


def _se(value: float, se: float) -> str:
    return f"{_num(value)} ({_num(se)})"


def cmd_irt(args: argparse.Namespace) -> int:
    from itemeval.api import FLAG_Q, q_text

    result = study_from(args).irt(
        store=args.store,
        limit=args.limit,
        condition=args.condition,
        with_stores=args.with_stores,
        write=not args.no_write,
    )
    if args.json:
        print_json(result.to_json())
        return int(ExitCode.OK)
    print(
        f"IRT of {result.study}: {len(result.conditions)} conditions x {len(result.items):,} "
        f"items, grader {result.grader}, fitted in {result.seconds:.1f} s"
    )
    held = result.held_out
    if held is not None:
        h = held.per_answer
        print(
            f"\nModel: {result.chosen.upper()}, because {held.reason}.\nHeld-out "
            f"log-likelihood per answer ({held.folds}-fold over {held.cells:,} condition x item "
            f"cells, {held.answers:,} answers): accuracy only {h['base']:.4f}, 1PL "
            f"{h['1pl']:.4f}, 2PL {h['2pl']:.4f} (higher is better)"
        )
    print(
        f"\nAbility ({result.chosen.upper()}; in standard deviations of these conditions, 0 = "
        "their mean; 95% interval with the items' estimation error; both models' abilities "
        "side by side)\n"
    )
    rows = [
        [
            c.slug,
            c.model,
            _num(c.ability),
            f"[{_num(c.low)}, {_num(c.high)}]",
            _num(c.ability_1pl),
            _num(c.ability_2pl),
            _num(c.accuracy, 3),
            f"{c.items:,}",
            "" if c.store == result.stores[0] else c.store,
        ]
        for c in result.conditions
    ]
    header = [
        "condition",
        "model",
        "ability",
        "95% interval",
        "1PL",
        "2PL",
        "accuracy",
        "items",
        "store",
    ]
    print(table(rows, header, {2, 4, 5, 6, 7}))
    counts = result.items.flag_counts()
    flagged = sum(counts.values())
    print(
        f"\nSuspicious items: {flagged:,}"
        + (" (" + ", ".join(f"{k} {v:,}" for k, v in counts.items()) + ")" if counts else "")
        + f"; negative discrimination: the 2PL discrimination below 0 at Benjamini-Hochberg "
        f"q <= {FLAG_Q} over the items"
    )
    shown = result.items.suspicious(MAX_PRINTED)  # negative discrimination first, by q
    rows = [
        [
            i.dataset,
            i.item_id,
            i.flag or "",
            f"{i.correct}/{i.trials}",
            _se(i.discrimination, i.discrimination_se),
            q_text(i.discrimination_q),
            _se(i.intercept, i.intercept_se),
            (i.input or "")[:60].replace("\n", " "),
        ]
        for i in shown[:MAX_PRINTED]
    ]
    if rows:
        header = ["dataset", "item", "flag", "right", "discrim. (SE)", "q", "intercept (SE)"]
        print(table(rows, [*header, "input"], {3, 4, 5, 6}))
        if flagged > MAX_PRINTED:
            print(f"... and {flagged - MAX_PRINTED:,} more")
    if result.written:
        print(f"\nWritten: {result.written}/ (responses, conditions, items, fit.json)")
    return int(ExitCode.OK)
