"""The cost estimate and the confirmation gate: cost is visible before anything is spent.

**The prior.** Tokens counted from the real prompts (`tokens.py`: about four characters a token,
output by the answer the prompt asks for); USD comes from the pricing table; unpriced models
count as $0 and are listed as warnings.

**The calibrated estimate.** Once answers are stored (in the study's store, or in the response
cache by this study or an earlier one), `calibration.py` learns from the usage the providers
reported: an input correction, output per modality (hidden reasoning included), the judged
answers' lengths and the share of input served from the provider's prompt cache. Each line
keeps the prior beside the calibrated figures and says where the calibration came from; the
gate and the run use the calibrated figures (`usd`, `remaining_usd`, the token counts).

"Remaining" is what is not yet stored: generate cells without an `ok` solution, and judge cells
for every solution not yet graded (including solutions still to be generated).

**Tiers.** A condition whose endpoint uses the batch tier (`batch.enabled`) is priced at the
provider's batch price (`pricing.yaml`'s `batch` share); its line says `tier: batch` and keeps
what the remaining cells would cost live (`live_remaining_usd`), so the discount is visible.

The gate: remaining above `budget.max_usd` stops with exit 4 whatever the flags; above
`budget.confirm_above_usd` it needs `--yes` or an interactive yes, else exit 3.
"""

from __future__ import annotations

import functools
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from itemeval.config import Budget
from itemeval.errors import BudgetExceeded, GateDeclined
from itemeval.planning._calibration import Calibration, Fit
from itemeval.planning._design import Design, GenerateCondition, GradeCondition
from itemeval.planning._tokens import (
    JUDGE_OUTPUT,
    TokenColumns,
    TokenTables,
    count_tokens,
    expected_tokens,
    message_tokens,
    solver_shape,
    token_tables,
)
from itemeval.providers import EndpointSettings
from itemeval.providers.money import ModelPrice, Pricing
from itemeval.providers.types import Usage
from itemeval.store import CellMasks

# The prior's names (`tokens.py`) are importable from here too, where they were before.
__all__ = [
    "ESTIMATE_SLICE",
    "Estimate",
    "EstimateLine",
    "TokenTables",
    "build_estimate",
    "condition_tiers",
    "count_tokens",
    "expected_tokens",
    "gate",
    "message_tokens",
    "token_tables",
]


@dataclass
class EstimateLine:
    """One condition's cells, tokens and USD: all of it, and what remains to be done.

    The token and USD figures are the calibrated estimate (the prior while nothing is stored);
    `prior_*` keep the prior; `calibration` says what the calibration rests on."""

    stage: str  # "generate" | "grade"
    condition_id: str
    condition: str  # slug
    model: str
    cells: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    remaining_cells: int = 0
    remaining_input_tokens: int = 0
    remaining_output_tokens: int = 0
    remaining_usd: float = 0.0
    #: Provider calls the remaining cells make: less the answers the response cache holds and,
    #: for a judge, the requests repeated within the run (sent once: `store.IdenticalCells`).
    remaining_calls: int = 0
    prior_input_tokens: int = 0
    prior_output_tokens: int = 0
    prior_usd: float = 0.0
    prior_remaining_usd: float = 0.0
    priced: bool = True
    calibration: dict[str, Any] | None = None  # `Fit.as_dict()`; None for verifiable scorers
    tier: str = "live"  # `batch`: priced at the provider's batch price
    live_remaining_usd: float = 0.0  # the remaining cells at live prices

    @property
    def source(self) -> str:
        return "" if self.calibration is None else str(self.calibration["source"])


_SUMMED = (
    "cells",
    "input_tokens",
    "output_tokens",
    "usd",
    "remaining_cells",
    "remaining_input_tokens",
    "remaining_output_tokens",
    "remaining_usd",
    "remaining_calls",
    "prior_input_tokens",
    "prior_output_tokens",
    "prior_usd",
    "prior_remaining_usd",
    "live_remaining_usd",
)


@dataclass
class Estimate:
    lines: list[EstimateLine] = field(default_factory=list)
    items: int = 0
    epochs: int = 1
    warnings: list[str] = field(default_factory=list)

    @property
    def total_usd(self) -> float:
        return sum(line.usd for line in self.lines)

    @property
    def remaining_usd(self) -> float:
        return sum(line.remaining_usd for line in self.lines)

    @property
    def prior_total_usd(self) -> float:
        return sum(line.prior_usd for line in self.lines)

    @property
    def prior_remaining_usd(self) -> float:
        return sum(line.prior_remaining_usd for line in self.lines)

    @property
    def batch_saving_usd(self) -> float:
        """What the batch tier saves on the remaining cells, against live prices."""
        return sum(
            line.live_remaining_usd - line.remaining_usd
            for line in self.lines
            if line.tier == "batch"
        )

    @property
    def calibrated(self) -> bool:
        return any(
            line.calibration and line.calibration["source"] != "prior" for line in self.lines
        )

    def by(self, key: str) -> dict[str, dict[str, float]]:
        """Totals grouped by `stage` or `model`."""
        groups: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for line in self.lines:
            group = groups[getattr(line, key)]
            for name in ("cells", "input_tokens", "output_tokens", "usd", "prior_usd"):
                group[name] += getattr(line, name)
            group["remaining_cells"] += line.remaining_cells
            group["remaining_usd"] += line.remaining_usd
            group["remaining_calls"] += line.remaining_calls
            group["prior_remaining_usd"] += line.prior_remaining_usd
        return {k: dict(v) for k, v in groups.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "epochs": self.epochs,
            "total_usd": round(self.total_usd, 6),
            "remaining_usd": round(self.remaining_usd, 6),
            "prior_total_usd": round(self.prior_total_usd, 6),
            "prior_remaining_usd": round(self.prior_remaining_usd, 6),
            "batch_saving_usd": round(self.batch_saving_usd, 6),
            "by_stage": self.by("stage"),
            "by_model": self.by("model"),
            "conditions": [asdict(line) for line in self.lines],
            "warnings": self.warnings,
        }


def build_estimate(
    design: Design,
    tables: TokenTables,
    pricing: Pricing,
    *,
    pending_generate: CellMasks | None = None,
    pending_grade: CellMasks | None = None,
    calibration: Calibration | None = None,
    self_hosted: frozenset[str] = frozenset(),
    tiers: Mapping[str, str] | None = None,
    repeated_grade: CellMasks | None = None,
) -> Estimate:
    """Price every condition. `pending_generate` and `pending_grade` are the store's pending
    cells over the same items, in the same order, as `tables`; when None (no store yet)
    everything remains. Without `calibration`, the calibrated figures are the prior.
    `self_hosted`: models served by the user's own servers: $0 when unpriced, without a
    warning. `tiers`: the price tier of each condition id (`condition_tiers`; default live).
    `repeated_grade`: the pending judge cells whose request another pending cell asks
    (`store.repeated_judge_cells`): the run sends it once, so they make no call. For a generate
    condition with every solution stored they replace the share of judge calls the cache
    answered in the past (`Fit.answered_share`); otherwise that share stands."""
    tiers = tiers or {}
    n_items = tables.items
    estimate = Estimate(items=n_items, epochs=design.epochs)
    if calibration is not None:
        estimate.warnings.extend(calibration.warnings)
    unpriced: set[str] = set()
    modality = tables.modality
    fits = calibration.generate if calibration is not None else {}
    judge_fits = calibration.judges if calibration is not None else {}
    # per generate condition, what its answers add to a judge's input (its counts and its fit)
    visible: dict[str, tuple[TokenColumns, Fit]] = {}
    judged = any(grader.kind == "judge" for grader in design.grade)
    for cond in design.generate:
        counts = tables.generate[solver_shape(cond)]
        fit = fits.get(cond.id, Fit())
        pending: Callable[[slice], np.ndarray] | None = None
        if pending_generate is not None:
            pending = functools.partial(pending_generate.per_item, cond.id)
        if judged:
            visible[cond.id] = (counts, fit)
        line = EstimateLine("generate", cond.id, cond.slug, cond.model_id)
        line.tier = tiers.get(cond.id, "live")
        sums = _fill(_generate_tokens(counts, fit, modality), n_items, design.epochs, pending)
        _price(line, sums, fit.cached_fraction, pricing, unpriced)
        line.calibration = fit.as_dict()
        estimate.lines.append(line)
    for grader in design.grade:
        tier = tiers.get(grader.id, "live")
        line = EstimateLine("grade", grader.id, grader.slug, grader.label, tier=tier)
        for cond in design.generate:
            if not design.grades(grader, cond.id):  # a pairwise judge's baseline: never asked
                continue
            part = EstimateLine("grade", grader.id, grader.slug, grader.label, tier=tier)
            if grader.kind == "judge":
                pending = _pending_grade_counts(grader, cond, pending_generate, pending_grade)
                fit = judge_fits.get(grader.id, Fit())
                base = tables.judge[grader.id]["input"]
                tokens_of = _judge_tokens(base, *visible[cond.id], fit, modality)
                share, free = fit.answered_share, None
                stored = pending_generate is not None and not pending_generate.count(cond.id)
                if repeated_grade is not None and stored:  # every solution is stored
                    share = 0.0
                    free = functools.partial(repeated_grade.per_item, (grader.id, cond.id))
                sums = _fill(tokens_of, n_items, design.epochs, pending, share, free)
                _price(part, sums, fit.cached_fraction, pricing, unpriced)
                line.calibration = fit.as_dict()
            else:  # verifiable scorers: cells, but no tokens and no cost
                part.cells = n_items * design.epochs
                part.remaining_cells = part.cells
                if pending_generate is not None and pending_grade is not None:
                    part.remaining_cells = pending_generate.count(cond.id) + pending_grade.count(
                        (grader.id, cond.id)
                    )
            _add(line, part)
        line.priced = grader.kind != "judge" or grader.label not in unpriced
        estimate.lines.append(line)
    estimate.warnings.extend(
        f"no price for model {model!r}: counted as $0 (add it to a pricing file, or mark its "
        "endpoint self_hosted: true)"
        for model in sorted(unpriced - self_hosted)
    )
    no_batch_price = {
        line.model
        for line in estimate.lines
        if line.tier == "batch" and (p := pricing.price(line.model)) and p.batch_share is None
    }
    estimate.warnings.extend(
        f"no batch price for model {model!r}: its batch calls are counted at its live prices "
        "(give it a `batch` share in a pricing file)"
        for model in sorted(no_batch_price)
    )
    return estimate


def condition_tiers(design: Design, endpoints: Mapping[str, EndpointSettings]) -> dict[str, str]:
    """`batch` for the conditions whose endpoint sends them through its batch API."""
    tiers = {c.id: "batch" for c in design.generate if endpoints[c.endpoint].batch_enabled}
    tiers |= {
        g.id: "batch"
        for g in design.judges
        if g.endpoint is not None and endpoints[g.endpoint].batch_enabled
    }
    return tiers


#: Items whose tokens are computed at a time: the estimate's per-item arrays (a dozen of 8
#: bytes per item and condition) exist for a slice, not for a million items at once.
ESTIMATE_SLICE = 1 << 16


@dataclass
class _Tokens:
    """One condition's per-item tokens of one call, for a slice of the items: the prior and
    the calibrated estimate."""

    prior_input: np.ndarray
    prior_output: np.ndarray
    input: np.ndarray
    output: np.ndarray
    answered: np.ndarray | None = None  # per item: cells the response cache answers (free)


def _generate_tokens(
    counts: TokenColumns, fit: Fit, modality: np.ndarray
) -> Callable[[slice], _Tokens]:
    def tokens_of(at: slice) -> _Tokens:
        prior_output, prior_visible = counts["output"][at], counts["visible"][at]
        return _Tokens(
            prior_input=counts["input"][at],
            prior_output=prior_output,
            input=fit.input(counts["input"][at]),
            output=fit.output(prior_output, prior_visible, modality[at]),
            answered=None if fit.answered is None else fit.answered[at],
        )

    return tokens_of


def _judge_tokens(
    base: np.ndarray, counts: TokenColumns, judged_fit: Fit, fit: Fit, modality: np.ndarray
) -> Callable[[slice], _Tokens]:
    """A judge of one generate condition's answers: its rubric (`base`) plus the answer's
    visible tokens, prior and calibrated (`judged_fit`)."""

    def tokens_of(at: slice) -> _Tokens:
        prior_visible = counts["visible"][at]
        calibrated_visible = judged_fit.visible(prior_visible, modality[at])
        prior_output = np.full(len(prior_visible), JUDGE_OUTPUT, np.int32)
        return _Tokens(
            prior_input=base[at] + prior_visible,
            prior_output=prior_output,
            input=fit.input(base[at] + calibrated_visible),
            output=fit.output(prior_output, prior_output, modality[at]),
        )

    return tokens_of


@dataclass
class _Sums:
    """Cells and tokens summed over the items: of all cells, or of the remaining ones."""

    cells: int = 0
    input: float = 0.0  # calibrated, what is paid (the response cache's answers left out)
    output: float = 0.0
    prior_input: float = 0.0
    prior_output: float = 0.0
    calls: float = 0.0  # of the cells, those that make a call


def _fill(
    tokens_of: Callable[[slice], _Tokens],
    n_items: int,
    epochs: int,
    pending: Callable[[slice], np.ndarray] | None,
    answered_share: float = 0.0,
    free: Callable[[slice], np.ndarray] | None = None,
) -> tuple[_Sums, _Sums]:
    """Cells and tokens of all cells, and of the pending ones (`pending`: the pending cells
    per item of a slice of the items; None means everything remains), a slice of the items at
    a time. `answered_share`: the share of calls the response cache answers (free); `free`:
    the pending cells per item that make no call (requests repeated within the run)."""
    every, remaining = _Sums(), _Sums()
    share = 1.0 - answered_share
    for start in range(0, n_items, ESTIMATE_SLICE):
        at = slice(start, start + ESTIMATE_SLICE)
        tokens = tokens_of(at)
        all_cells = np.full(len(tokens.input), epochs, np.int64)
        left = all_cells if pending is None else pending(at)
        for sums, cells in ((every, all_cells), (remaining, left)):
            # What is paid: cells the response cache answers cost nothing.
            paid = cells if tokens.answered is None else np.maximum(cells - tokens.answered, 0)
            if free is not None and sums is remaining:
                paid = np.maximum(paid - free(at), 0)
            paid = paid * share
            sums.calls += float(paid.sum())
            sums.cells += int(cells.sum())
            sums.input += float(paid @ tokens.input)
            sums.output += float(paid @ tokens.output)
            sums.prior_input += float(cells @ tokens.prior_input)
            sums.prior_output += float(cells @ tokens.prior_output)
    return every, remaining


def _price(
    line: EstimateLine,
    sums: tuple[_Sums, _Sums],
    cached_fraction: float,
    pricing: Pricing,
    unpriced: set[str],
) -> None:
    """Tokens and USD of the line from its sums (`_fill`) at its model's prices;
    `cached_fraction`: the share of input tokens the provider's prompt cache serves."""
    live = pricing.price(line.model)
    price = pricing.price(line.model, line.tier)
    line.priced = price is not None
    if price is None:
        unpriced.add(line.model)

    def usd(
        of: _Sums,
        input_tokens: float,
        output_tokens: float,
        cached: float = 0.0,
        at: ModelPrice | None = price,
    ) -> float:
        if at is None:
            return 0.0
        usage = Usage(round(input_tokens), round(output_tokens), round(cached))
        return at.cost(usage, calls=of.cells)  # the context tier of the mean call

    every, remaining = sums
    line.remaining_calls = round(remaining.calls)
    for prefix, of in (("", every), ("remaining_", remaining)):
        setattr(line, f"{prefix}cells", of.cells)
        setattr(line, f"{prefix}input_tokens", round(of.input))
        setattr(line, f"{prefix}output_tokens", round(of.output))
        setattr(line, f"{prefix}usd", usd(of, of.input, of.output, cached_fraction * of.input))
    cached = cached_fraction * remaining.input
    line.prior_remaining_usd = usd(remaining, remaining.prior_input, remaining.prior_output)
    line.live_remaining_usd = usd(remaining, remaining.input, remaining.output, cached, at=live)
    line.prior_input_tokens = round(every.prior_input)
    line.prior_output_tokens = round(every.prior_output)
    line.prior_usd = usd(every, every.prior_input, every.prior_output)


def _add(total: EstimateLine, part: EstimateLine) -> None:
    for name in _SUMMED:
        setattr(total, name, getattr(total, name) + getattr(part, name))


def _pending_grade_counts(
    grader: GradeCondition,
    cond: GenerateCondition,
    pending_generate: CellMasks | None,
    pending_grade: CellMasks | None,
) -> Callable[[slice], np.ndarray] | None:
    """Grade cells still to do per item (of a slice of the items): ungraded stored solutions
    plus solutions still to generate."""
    if pending_generate is None or pending_grade is None:
        return None
    generate, grade = pending_generate, pending_grade

    def of(at: slice) -> np.ndarray:
        return generate.per_item(cond.id, at) + grade.per_item((grader.id, cond.id), at)

    return of


# -- the gate --------------------------------------------------------------------------------


def gate(
    remaining_usd: float,
    budget: Budget,
    *,
    yes: bool,
    interactive: bool | None = None,
    ask: Callable[[str], str] = input,
    always_ask: str | None = None,
) -> str:
    """Allow the run (saying how: `below-threshold`, `--yes` or `prompt`), or raise
    `BudgetExceeded` (exit 4) / `GateDeclined` (exit 3). `always_ask`: ask whatever the
    threshold (after a pilot), with this text saying why."""
    if budget.max_usd is not None and remaining_usd > budget.max_usd:
        raise BudgetExceeded(
            f"the estimated remaining cost ${remaining_usd:,.2f} is above budget.max_usd "
            f"${budget.max_usd:,.2f}; nothing was started. Narrow the run (--limit N, "
            "budget.policy: dev, --condition) or raise budget.max_usd in the study file."
        )
    threshold = budget.confirm_above_usd
    if always_ask is None and (threshold is None or remaining_usd <= threshold):
        return "below-threshold"
    if yes:
        return "--yes"
    if interactive is None:
        interactive = sys.stdin.isatty()
    if always_ask is not None:
        if interactive and ask(f"{always_ask} Proceed? [y/N] ").strip().lower() in ("y", "yes"):
            return "prompt"
        raise GateDeclined(
            f"{always_ask} Not confirmed: run the same command with --yes to go on (the pilot's "
            "cells are stored and will not be paid again)"
        )
    assert threshold is not None
    question = (
        f"The estimated remaining cost is ${remaining_usd:,.2f} "
        f"(confirmation needed above ${threshold:,.2f}). Proceed? [y/N] "
    )
    if interactive and ask(question).strip().lower() in ("y", "yes"):
        return "prompt"
    raise GateDeclined(
        f"the estimated remaining cost ${remaining_usd:,.2f} is above budget.confirm_above_usd "
        f"${threshold:,.2f} and was not confirmed; run again with --yes to proceed"
    )
