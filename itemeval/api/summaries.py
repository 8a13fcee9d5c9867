"""What `Study.plan`, `estimate`, `run` and `status` return: the objects behind the CLI's output.

Each is plain data (what the CLI prints as text, and as JSON with `--json`: `to_json()` is that
JSON exactly), plus the internal object it was made from for callers who want more (`plan`,
`outcome`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from itemeval.errors import ExitCode
from itemeval.planning import Design, Estimate, Plan
from itemeval.runtime import RunOutcome, StageResult
from itemeval.store import RunsSpend

if TYPE_CHECKING:
    from itemeval.report import StudyNumbers
    from itemeval.statistics import PowerPlan


def format_usd(value: float) -> str:
    """`$1,234.56`, or four decimals under a cent (`$0.0042`)."""
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:,.4f}"


@dataclass(frozen=True)
class Selection:
    """What a plan covers: the study, its store, the items selected from each dataset."""

    study: str
    store: str
    items: int
    epochs: int
    limit: int | None  # items per dataset (None: all)
    datasets: list[dict[str, Any]]  # name, fingerprint, items, selected, modalities

    @classmethod
    def of(cls, plan: Plan) -> Selection:
        return cls(
            study=plan.study.study,
            store=plan.store.root.url,
            items=plan.item_count,
            epochs=plan.design.epochs,
            limit=plan.limit,
            datasets=[
                {
                    "name": d.name,
                    "fingerprint": d.fingerprint,
                    "items": d.items,
                    "selected": d.selected,
                    "modalities": dict(d.modalities),
                }
                for d in plan.datasets
            ],
        )


@dataclass(frozen=True)
class PlanSummary:
    """The design grid, the cells and what is still to do (`itemeval plan`)."""

    selection: Selection
    generate: list[dict[str, Any]]  # each condition's description and slug
    grade: list[dict[str, Any]]
    cells: dict[str, int]  # generate, grade_judge, grade_scorer
    pending: dict[str, int] | None  # generate, grade (None: not computed)
    warnings: list[str]
    design: Design = field(repr=False)
    plan: Plan = field(repr=False)
    #: `plan --detect`: items and epochs a paired comparison needs (`statistics.power`)
    power: PowerPlan | None = None

    @classmethod
    def of(cls, plan: Plan, power: PowerPlan | None = None) -> PlanSummary:
        design = plan.design
        return cls(
            selection=Selection.of(plan),
            generate=[c.describe() | {"slug": c.slug} for c in design.generate],
            grade=[c.describe() | {"slug": c.slug} for c in design.grade],
            cells=design.cell_counts(plan.item_count),
            pending=_pending_counts(plan),
            warnings=_warnings(plan),
            design=design,
            plan=plan,
            power=power,
        )

    def to_json(self) -> dict[str, Any]:
        """What `itemeval plan --json` prints."""
        s = self.selection
        extra = {"power": _power_json(self.power)} if self.power is not None else {}
        return extra | {
            "study": s.study,
            "store": s.store,
            "items": s.items,
            "epochs": s.epochs,
            "datasets": s.datasets,
            "generate": self.generate,
            "grade": self.grade,
            "panels": [p.describe() | {"slug": p.slug} for p in self.design.panels],
            "cells": self.cells,
            "pending": self.pending,
        }


def _power_json(plan: PowerPlan) -> dict[str, Any]:
    best = plan.recommended
    return {
        "detect": plan.detect,
        "power": plan.power,
        "alpha": plan.alpha,
        "variance": {
            "between": plan.variance.between,
            "within": plan.variance.within,
            "design_effect": plan.variance.deff,
            "source": plan.variance.source,
        },
        "available_items": plan.available_items,
        "usd_per_item_epoch": plan.usd_per_item_epoch,
        "designs": [asdict(r) for r in plan.rows],
        "recommended": asdict(best) if best is not None else None,
        "notes": plan.notes,
        "assumed": plan.assumed,
        "warnings": plan.warnings,
    }


@dataclass(frozen=True)
class EstimateSummary:
    """Tokens and USD per condition, stage and model, and what the gate would say
    (`itemeval estimate`)."""

    selection: Selection
    estimate: Estimate  # the lines, totals and remaining amounts
    budget: dict[str, Any]
    gate: str  # the gate's verdict for a run, in words
    prices_as_of: str | None
    warnings: list[str]
    plan: Plan = field(repr=False)
    #: Adaptive conditions' expected cost beside the full run's (`itemeval.irt.adaptive_costs`).
    adaptive: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, plan: Plan) -> EstimateSummary:
        from itemeval.irt import adaptive_costs

        return cls(
            selection=Selection.of(plan),
            estimate=plan.estimate,
            budget=plan.study.budget.model_dump(),
            gate=gate_verdict(plan),
            prices_as_of=plan.pricing.prices_as_of,
            warnings=_warnings(plan),
            plan=plan,
            adaptive=adaptive_costs(plan),
        )

    @property
    def total_usd(self) -> float:
        return self.estimate.total_usd

    @property
    def remaining_usd(self) -> float:
        """What the cells not stored yet would cost."""
        return self.estimate.remaining_usd

    def adaptive_text(self) -> str:
        """The adaptive conditions' expected cost beside the full run's, a line each, as
        `itemeval estimate` prints it ("" without adaptive conditions)."""
        from itemeval.irt import render_adaptive_costs

        return render_adaptive_costs(self.adaptive) if self.adaptive else ""

    def to_json(self) -> dict[str, Any]:
        """What `itemeval estimate --json` prints."""
        return self.estimate.to_json() | {
            "study": self.selection.study,
            "budget": self.budget,
            "gate": self.gate,
            "prices_as_of": self.prices_as_of,
            "adaptive": self.adaptive,
        }


@dataclass(frozen=True)
class RunSummary:
    """How a run ended (`itemeval run`, `generate`, `grade`): exit code 0 all done, 1 some cells
    ended in error, 4 budget cap, 130 interrupted."""

    status: str  # completed | interrupted | budget_cap | failed | nothing_to_do
    exit_code: ExitCode
    run_id: str | None
    store: str
    spent_usd: float  # every dollar paid, also by shards that failed afterwards
    stages: dict[str, StageResult]  # counts, errors by code, spend, failed shards
    message: str  # the one-line summary the CLI prints
    outcome: RunOutcome = field(repr=False)

    @classmethod
    def of(cls, outcome: RunOutcome) -> RunSummary:
        return cls(
            status=outcome.status,
            exit_code=outcome.exit_code,
            run_id=outcome.run_id,
            store=outcome.store_url,
            spent_usd=outcome.spent_usd,
            stages=dict(outcome.stages),
            message=outcome.message,
            outcome=outcome,
        )

    @property
    def ok(self) -> bool:
        """Everything selected is done without a cell error."""
        return self.exit_code == ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        """What `itemeval run --json` prints."""
        return {
            "status": self.status,
            "exit_code": int(self.exit_code),
            "run_id": self.run_id,
            "store": self.store,
            "spent_usd": self.spent_usd,
            "stages": {
                stage: {
                    **result.counts.model_dump(),
                    "errors_by_code": dict(result.errors),
                    "spend": result.spend.model_dump(),
                    "failed_shards": result.failed_shards,
                }
                for stage, result in self.stages.items()
            },
            "message": self.message,
        }


@dataclass(frozen=True)
class StatusSummary:
    """Per condition: expected, done, pending, errors, parse failures, cached, tokens, USD; and
    what the runs paid (`itemeval status`)."""

    study: str
    store: str
    items: int
    epochs: int
    conditions: list[dict[str, Any]]  # `store.ConditionStatus.as_dict()` and the slug
    runs: RunsSpend
    open_batches: list[dict[str, Any]] = field(default_factory=list)  # records not collected
    #: whether the headline grader's paired comparisons tell the conditions apart yet
    differences: str | None = None
    #: the report's numbers per generate condition, in leaderboard order (`status_results`)
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def prompt_cache(self) -> dict[str, Any]:
        """What the providers' prompt caches served and saved, over every condition."""
        rows = self.conditions
        return {
            "input_tokens": sum(r["input_tokens"] for r in rows),
            "cached_input_tokens": sum(r["cached_input_tokens"] for r in rows),
            "saved_usd": sum(r["prompt_cache_saved_usd"] for r in rows),
        }

    @property
    def batch(self) -> dict[str, Any]:
        """What the batch tier answered and saved, over every condition; batches still open."""
        return {
            "rows": sum(r["batch"] for r in self.conditions),
            "saved_usd": sum(r["batch_saved_usd"] for r in self.conditions),
            "open": self.open_batches,
        }

    def results_text(self) -> str:
        """`results` as `itemeval status` prints them: the report's formatting ("" without)."""
        from itemeval.report import fmt_proportion, fmt_usd, text_table
        from itemeval.statistics import Proportion

        if not self.results:
            return ""
        rows = []
        for r in self.results:
            accuracy = (
                Proportion(r["accuracy"], r["low"], r["high"], 0.0, r["correct"], r["graded"], 1)
                if r["accuracy"] is not None
                else None
            )
            rows.append(
                [
                    r["slug"],
                    fmt_proportion(accuracy),
                    r["tier"] or "",
                    f"{r['correct']:,} / {r['graded']:,}",
                    fmt_usd(r["paid_usd"]),
                    fmt_usd(r["cache_saved_usd"]),
                    fmt_usd(r["alone_usd"]),
                    fmt_usd(r["per_correct_usd"]),
                ]
            )
        header = ["condition", "accuracy", "tier (rank)", "correct / graded", "paid"]
        header += ["saved by the response cache", "alone", "alone per correct"]
        first = self.results[0]
        return (
            f"By {first['grader']}: accuracy with its {first['confidence'] * 100:g}% interval "
            f"({first['resampled']}), as the report and the viewer show it. Cost: paid; saved "
            "by the response cache (its answers paid nothing: their calls at their prices); "
            "alone = paid + saved, every call at its price, whatever ran before; per correct "
            "answer from alone.\n" + text_table(rows, header, right={1, 3, 4, 5, 6, 7})
        )

    def to_json(self) -> dict[str, Any]:
        """What `itemeval status --json` prints."""
        return {
            "study": self.study,
            "store": self.store,
            "conditions": self.conditions,
            "runs": self.runs.model_dump(),
            "prompt_cache": self.prompt_cache,
            "batch": self.batch,
            "differences": self.differences,
            "results": self.results,
        }


def status_results(numbers: StudyNumbers) -> list[dict[str, Any]]:
    """Per generate condition, in the leaderboard's order: the headline grader's accuracy with
    its interval, tier and rank interval, and the costs (paid, saved by the response cache,
    alone, alone per correct answer): the numbers the report and the viewer show."""
    board = numbers.leaderboard
    tiers = numbers.tiers()
    by_id = {c.generate.id: c for c in numbers.costs}
    out = []
    for line in board.conditions:
        g = line.generate
        assert g is not None
        value = board.headline(line)
        cost = by_id[g.id]
        defined = value is not None and value.defined
        out.append(
            {
                "condition_id": g.id,
                "slug": g.slug,
                "grader": board.primary.label if board.primary is not None else None,
                "accuracy": value.value if defined else None,  # type: ignore[union-attr]
                "low": value.low if defined else None,  # type: ignore[union-attr]
                "high": value.high if defined else None,  # type: ignore[union-attr]
                "confidence": numbers.bootstrap.confidence,
                "resampled": "over items"
                if numbers.bootstrap.clusters is None
                else "over clusters of items, analysis.cluster_by",
                "graded": cost.graded,
                "correct": cost.correct,
                "tier": tiers.get(g.id),
                "paid_usd": cost.usd,
                "cache_hits": cost.cache_hits,
                "cache_saved_usd": cost.cache_saved_usd,
                "alone_usd": cost.alone_usd,
                "per_correct_usd": cost.per_correct,
            }
        )
    return out


def gate_verdict(plan: Plan) -> str:
    """What the gate would do with this plan's remaining estimate, in words."""
    budget = plan.study.budget
    remaining = plan.estimate.remaining_usd
    if budget.max_usd is not None and remaining > budget.max_usd:
        return (
            f"over budget: remaining {format_usd(remaining)} > max_usd "
            f"{format_usd(budget.max_usd)}; a run would stop with exit code 4"
        )
    if budget.confirm_above_usd is not None and remaining > budget.confirm_above_usd:
        return (
            f"needs confirmation: remaining {format_usd(remaining)} > confirm_above_usd "
            f"{format_usd(budget.confirm_above_usd)}; a run asks, or pass --yes"
        )
    return "ok: a run would start without asking"


def _pending_counts(plan: Plan) -> dict[str, int] | None:
    """Cells still to do; grade cells include those of solutions not generated yet."""
    if plan.pending_generate is None or plan.pending_grade is None:
        return None
    design = plan.design
    generate = plan.pending_generate.num_rows
    grade = plan.pending_grade.num_rows + sum(
        plan.pending_generate.count(gen.id)
        for gen in design.generate
        for condition in design.grade
        if design.grades(condition, gen.id)
    )
    return {"generate": generate, "grade": grade}


def _warnings(plan: Plan) -> list[str]:
    return [str(w) for w in plan.warnings] + plan.estimate.warnings
