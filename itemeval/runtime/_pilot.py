"""`run --pilot N`: spend a little first, learn what calls really cost, then ask again.

    pilot   = the first N items of each dataset (or that share of them), every condition
    estimate the rest: calibrated from the rows the pilot stored (`planning/_calibration.py`)
    gate    again, whatever its threshold: the pilot's cost, the rest's estimate before and
            after the pilot, "Proceed?" (`--yes` answers it; a non-interactive run without
            `--yes` stops there, exit 3, with the pilot's cells stored)
    run     the rest (the pilot's cells are stored: not called again)

The pilot and the rest are two runs, each with its own manifest, and one allowance:
`budget.max_usd` bounds the command, so the rest runs under what the pilot left of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from itemeval.config import StudyConfig
from itemeval.planning import make_plan
from itemeval.runtime._driver import RunOptions, RunOutcome


def pilot_items(study: StudyConfig, options: RunOptions) -> int:
    """Items per dataset the pilot runs: N itself, or the share of the largest selection."""
    share = float(options.pilot or 0)
    if share >= 1:
        return int(share)
    plan = make_plan(
        study, store_url=options.store_url, limit=options.limit, with_pending=False, estimate=False
    )
    largest = max((d.selected for d in plan.datasets), default=1)
    return max(1, math.ceil(share * largest))


def run_with_pilot(
    study: StudyConfig,
    options: RunOptions,
    run: Callable[..., RunOutcome],
    *,
    executor_factory: Any = None,
) -> RunOutcome:
    """The pilot, then (after the gate agreed again) the rest; returns the rest's outcome, or
    the pilot's when it did not complete."""
    if options.pilot is None or options.pilot <= 0:
        raise ValueError("a pilot needs a positive number of items or share of them")
    size = pilot_items(study, options)
    full = make_plan(
        study,
        store_url=options.store_url,
        limit=options.limit,
        condition=options.condition,
        force=options.force,
        accept_changed=options.accept_changed,
    )
    before = _remaining(full, options)
    pilot_limit = size if options.limit is None else min(size, options.limit)
    first = run(
        study,
        replace(options, pilot=None, limit=pilot_limit, command=f"{options.command} --pilot"),
        executor_factory=executor_factory,
    )
    if first.status not in ("completed", "nothing_to_do"):
        return first
    question = (
        f"The pilot ({pilot_limit} item(s) of each dataset) spent ${first.spent_usd:,.4f}. "
        "The rest is estimated at ${remaining:,.2f} from what it stored "
        f"(before the pilot, ${before:,.2f} for everything)."
    )
    rest = run(
        study,
        # One allowance for the command: the rest may spend what the pilot left of max_usd.
        replace(options, pilot=None, ask_again=question, spent_before=first.spent_usd),
        executor_factory=executor_factory,
    )
    rest.message = (
        f"Pilot: {first.message.splitlines()[0]}\n{rest.message}" if first.stages else rest.message
    )
    return rest


def _remaining(plan: Any, options: RunOptions) -> float:
    return sum(line.remaining_usd for line in plan.estimate.lines if line.stage in options.stages)
