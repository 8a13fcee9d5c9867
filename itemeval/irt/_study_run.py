"""Adaptive conditions in a study run: rounds of ordinary runs over items `adaptive.py` chooses.

A model entry with `adaptive:` (`config.models.Adaptive`) makes its generate conditions
adaptive. `itemeval run` then does:

1. an ordinary run of every other condition (the adaptive ones narrowed to no item);
2. a bank per adaptive condition: the 2PL fitted (`fit.py`) to the calibrating conditions'
   graded answers (this study's other conditions, or another store's `analysis/irt/
   responses.parquet`), items matched by dataset and id (and content hash for another store),
   strata the datasets (and the subject an item's metadata names);
3. rounds: each unfinished condition's next shard (`Adaptive.next_shard`, seeded), then one
   ordinary run (generate and grade) with the adaptive conditions narrowed to the items chosen
   so far (`RunOptions.only_items` -> `planning.restrict_plan`), then the headline grader's
   grades of the new items read from the store (`study_responses`) and recorded; until every
   condition is `done` (target SE or `max_share`).

Each round is an ordinary run: resume (keys, manifests), the cap (one allowance over the rounds,
as a pilot's), the response cache and the batch tier hold because the cells are ordinary cells.
Running the command again replays the rounds from the stored answers (the same seed chooses the
same shards; stored cells make no call). Items not chosen stay pending: `run --no-adaptive`
(or the study without `adaptive:`) runs them and reuses every answer already stored.

The result, per condition: the ability and the predicted full-benchmark accuracy with its 95%
interval, labelled a prediction, in the run's message and `<store>/analysis/irt/adaptive.json`
(the report shows it). A bank too thin to trust (fewer than `MIN_CALIBRATION` calibrating
conditions, or items no calibrating condition answered) gives a stratified random sample and
its ordinary interval instead, and says why.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.config import Adaptive as AdaptiveConfig
from itemeval.config import StudyConfig
from itemeval.errors import InputError, Problem
from itemeval.irt._adaptive import MIN_CALIBRATION, Adaptive, Bank
from itemeval.irt._fit import fit_irt
from itemeval.irt._responses import (
    ANALYSIS_DIR,
    RESPONSES_FILE,
    item_hashes,
    other_responses,
    study_responses,
)
from itemeval.planning import Plan, make_plan
from itemeval.storage import resolve

ADAPTIVE_FILE = "adaptive.json"
LABEL = (
    "predicted full-benchmark accuracy (a prediction from the items answered, not a measurement)"
)


@dataclass(frozen=True)
class AdaptiveResult:
    condition: str
    slug: str
    model: str
    method: str  # "irt" | "sample"
    ability: float | None
    ability_se: float | None
    predicted: float
    low: float
    high: float
    answered: int
    items: int
    calibrated_by: int
    note: str
    label: str = LABEL

    @property
    def share(self) -> float:
        return self.answered / self.items if self.items else 0.0

    def line(self) -> str:
        if self.method == "none":
            return f"Adaptive {self.slug}: no prediction ({self.note})"
        how = (
            f"ability {self.ability:+.2f} (SE {self.ability_se:.2f}), IRT on "
            f"{self.calibrated_by} calibrating conditions"
            if self.method == "irt"
            else f"stratified random sample ({self.note})"
        )
        return (
            f"Adaptive {self.slug}: {self.answered:,} of {self.items:,} items "
            f"({self.share:.0%}); predicted full accuracy {self.predicted:.1%} "
            f"(95% interval {self.low:.1%}-{self.high:.1%}), a prediction; {how}"
        )


def adaptive_conditions(plan: Plan) -> dict[str, AdaptiveConfig]:
    """The plan's generate conditions whose model entry has `adaptive:`."""
    found: dict[str, AdaptiveConfig] = {}
    for cond in plan.design.generate:
        for entry in plan.study.models:
            if entry.adaptive and entry.id == cond.model_id and entry.endpoint == cond.endpoint:
                found[cond.id] = entry.adaptive
    return found


def run_adaptive(
    study: StudyConfig, options: Any, run: Callable[..., Any], *, executor_factory: Any = None
) -> Any:
    """The study's run with its adaptive conditions run adaptively (see the module doc)."""
    plan = make_plan(
        study,
        store_url=options.store_url,
        limit=options.limit,
        condition=options.condition,
        with_pending=False,
    )
    wanted = adaptive_conditions(plan)
    if not wanted:
        return run(study, replace(options, adaptive=False), executor_factory=executor_factory)
    _check_calibrations(study)  # before anything is spent
    spent = options.spent_before

    def round_(only: dict[str, list[str]], note: str) -> Any:
        nonlocal spent
        outcome = run(
            study,
            replace(options, only_items=only, spent_before=spent, command=options.command + note),
            executor_factory=executor_factory,
        )
        spent += outcome.spent_usd if outcome.status != "nothing_to_do" else 0.0
        return outcome

    last = round_({c: [] for c in wanted}, "")  # every other condition, whole
    if last.status not in ("completed", "nothing_to_do"):
        return last
    if "grade" not in options.stages:  # the shards are chosen from grades
        slugs = {c.id: c.slug for c in plan.design.generate}
        names = ", ".join(sorted(slugs[c] for c in wanted))
        note = (
            f"Adaptive: {names} not run (an adaptive run chooses its items "
            "from their grades: `itemeval run` runs the generate and grade stages)"
        )
        last.message = f"{last.message}\n{note}" if last.message else note
        return last
    # every condition (not only the selected ones): the calibrating conditions are read from it
    plan = make_plan(
        study, store_url=options.store_url, limit=options.limit, with_pending=False, estimate=False
    )
    ids = plan.items.column("item_id").to_pylist()
    strata = _strata(plan)
    calibrations = {
        cfg.calibration: _calibrating(plan, cfg, set(wanted)) for cfg in wanted.values()
    }
    banks = {c: _bank(plan, strata, calibrations[cfg.calibration]) for c, cfg in wanted.items()}
    runs = {
        c: Adaptive(
            banks[c].bank,
            cfg.target_se,
            cfg.max_share,
            cfg.shard_size or max(10, math.ceil(0.05 * len(ids))),
            seed=cfg.seed,
        )
        for c, cfg in wanted.items()
    }
    chosen: dict[str, dict[int, None]] = {c: {} for c in wanted}
    rounds = 0
    stalled: set[str] = set()
    while True:
        shards = {c: r.next_shard() for c, r in runs.items() if not r.done and c not in stalled}
        # an item chosen before and still not graded (its calls failed) is not chosen again
        shards = {
            c: np.array([i for i in s if i not in chosen[c]], np.int64) for c, s in shards.items()
        }
        shards = {c: s for c, s in shards.items() if len(s)}
        if not shards:
            break
        rounds += 1
        for c, s in shards.items():
            chosen[c].update(dict.fromkeys(int(i) for i in s))
        only = {c: [ids[i] for i in chosen[c]] for c in wanted}
        last = round_(only, f" (adaptive round {rounds})")
        if last.status not in ("completed", "nothing_to_do"):
            return last
        answers = _answers(plan, list(shards))
        for c, s in shards.items():
            correct, trials = answers.get(c, ({}, {}))
            items = np.array([i for i in s if trials.get(ids[i])], dtype=np.int64)
            if not len(items):  # no grade came back (failed calls, no grade stage): stop there
                stalled.add(c)
                continue
            runs[c].record(
                items,
                np.array([correct[ids[i]] for i in items], dtype=np.float64),
                np.array([trials[ids[i]] for i in items], dtype=np.float64),
            )
    results = [_result(plan, c, r, banks[c]) for c, r in runs.items()]
    _write(plan, results)
    lines = "\n".join(
        [
            f"Adaptive: {rounds} round(s) after the other conditions, "
            f"${spent - options.spent_before:,.4f} spent by this command (the line above: the "
            "last round)",
            *(r.line() for r in results),
        ]
    )
    last.message = f"{last.message}\n{lines}" if last.message else lines
    return last


def _check_calibrations(study: StudyConfig) -> None:
    """Another store named as a calibration must hold `analyze irt`'s responses."""
    for number, entry in enumerate(study.models):
        url = entry.adaptive.calibration if entry.adaptive else "study"
        if url == "study":
            continue
        source = resolve(url, study.options_by_url(url).for_url(url)).join(
            ANALYSIS_DIR, RESPONSES_FILE
        )
        if not source.exists():
            raise InputError(
                Problem(
                    f"the calibration {url} holds no {ANALYSIS_DIR}/{RESPONSES_FILE}",
                    field=f"models[{number}].adaptive.calibration",
                    hint="run `itemeval analyze irt` on that store's study first, or use "
                    "`calibration: study` (this study's other conditions)",
                    file=str(study.path) if study.path else None,
                )
            )


@dataclass(frozen=True)
class _Calibrated:
    bank: Bank
    conditions: int  # calibrating conditions
    uncovered: int  # items no calibrating condition answered


def _bank(plan: Plan, strata: np.ndarray, responses: dict[str, list]) -> _Calibrated:
    """The 2PL bank from the calibrating responses; not usable (a stratified sample instead)
    with fewer than MIN_CALIBRATION conditions or any item none of them answered."""
    n = plan.items.num_rows
    conditions = sorted(set(zip(responses["store"], responses["condition"], strict=True)))
    row_of = {k: r for r, k in enumerate(conditions)}
    col_of = {i: c for c, i in enumerate(plan.items.column("item_id").to_pylist())}
    correct = np.zeros((max(len(conditions), 1), n))
    trials = np.zeros_like(correct)
    for s, c, i, k, t in zip(
        responses["store"],
        responses["condition"],
        responses["item_id"],
        responses["correct"],
        responses["trials"],
        strict=True,
    ):
        if i in col_of:
            correct[row_of[(s, c)], col_of[i]] += k
            trials[row_of[(s, c)], col_of[i]] += t
    by = len(conditions)
    uncovered = int((trials.sum(0) == 0).sum())
    if by >= MIN_CALIBRATION and not uncovered:
        one = fit_irt(correct, trials, "1pl")
        two = fit_irt(correct, trials, "2pl", start=one)
        a, d = two.a, two.d
    else:
        a, d = np.ones(n), np.zeros(n)
        by = min(by, MIN_CALIBRATION - 1)  # thin: never trusted
    return _Calibrated(Bank(a=a, d=d, strata=strata, calibrated_by=by), len(conditions), uncovered)


def _strata(plan: Plan) -> np.ndarray:
    """Each item's stratum: its dataset and, where its metadata names one, its subject."""
    from itemeval.results import ItemFetcher

    datasets = plan.items.column("dataset").to_pylist()
    snapshots = {d.name: d.snapshot for d in plan.datasets if d.snapshot is not None}
    subjects: list[object] = [None] * len(datasets)
    if len(snapshots) == len(plan.datasets):
        ids = plan.items.column("item_id")
        metadata = ItemFetcher(plan.items, snapshots, ["metadata"]).take(ids).column("metadata")
        subjects = [_subject(m) for m in metadata.to_pylist()]
    keys = [f"{d}\x00{s}" for d, s in zip(datasets, subjects, strict=True)]
    names = {k: n for n, k in enumerate(sorted(set(keys)))}
    return np.array([names[k] for k in keys], dtype=np.int64)


def _subject(metadata: str | None) -> object:
    try:
        value = json.loads(metadata or "{}").get("subject")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _calibrating(plan: Plan, cfg: AdaptiveConfig, adaptive: set[str]) -> dict[str, list]:
    """The calibrating conditions' responses (columns as lists), the adaptive ones left out."""
    if cfg.calibration == "study":
        table, _, _ = study_responses(plan, hashed=False)
    else:
        url = cfg.calibration
        table = other_responses(resolve(url, plan.study.options_by_url(url).for_url(url)))
        texts = dict(zip(*_hashes(plan), strict=True))  # items match by id and content
        same = [
            texts.get(i) == h
            for i, h in zip(
                table["item_id"].to_pylist(), table["item_hash"].to_pylist(), strict=True
            )
        ]
        table = table.filter(pa.array(same))
    table = table.filter(pc.invert(pc.is_in(table.column("condition"), pa.array(list(adaptive)))))
    return {name: table.column(name).to_pylist() for name in table.column_names}


def _hashes(plan: Plan) -> tuple[list[str], list[str]]:
    from itemeval.results import ItemFetcher

    snapshots = {d.name: d.snapshot for d in plan.datasets if d.snapshot is not None}
    ids = plan.items.column("item_id")
    texts = ItemFetcher(plan.items, snapshots, ["input", "target"]).take(ids)
    hashes = item_hashes(texts.column("input").to_pylist(), texts.column("target").to_pylist())
    return ids.to_pylist(), hashes


def _answers(plan: Plan, conditions: list[str]) -> dict[str, tuple[dict, dict]]:
    """Right answers and graded answers per item of each condition, under the headline grader."""
    table, _, _ = study_responses(plan, hashed=False)
    table = table.filter(pc.is_in(table.column("condition"), pa.array(conditions)))
    out: dict[str, tuple[dict, dict]] = {c: ({}, {}) for c in conditions}
    for c, i, k, t in zip(
        table.column("condition").to_pylist(),
        table.column("item_id").to_pylist(),
        table.column("correct").to_pylist(),
        table.column("trials").to_pylist(),
        strict=True,
    ):
        out[c][0][i] = k
        out[c][1][i] = t
    return out


def _result(plan: Plan, condition: str, run: Adaptive, calibrated: _Calibrated) -> AdaptiveResult:
    cond = next(c for c in plan.design.generate if c.id == condition)
    est = run.last
    if est is None:
        note = "no item graded"
    elif calibrated.bank.usable:
        note = ""
    elif calibrated.uncovered:
        note = f"{calibrated.uncovered} item(s) no calibrating condition answered"
    else:
        note = (
            f"calibration too thin: {calibrated.conditions} calibrating condition(s), "
            f"an IRT prediction needs {MIN_CALIBRATION}"
        )
    irt = est is not None and est.method == "irt"
    low, high = est.interval if est is not None else (math.nan, math.nan)
    return AdaptiveResult(
        condition=condition,
        slug=cond.slug,
        model=cond.model_id,
        method="none" if est is None else "irt" if irt else "sample",
        ability=est.ability if irt and est is not None else None,
        ability_se=est.ability_se if irt and est is not None else None,
        predicted=est.predicted if est is not None else math.nan,
        low=low,
        high=high,
        answered=int(run.answered.sum()),
        items=calibrated.bank.size,
        calibrated_by=calibrated.conditions,
        note=note,
    )


def _write(plan: Plan, results: list[AdaptiveResult]) -> None:
    folder = plan.store.root.join(ANALYSIS_DIR)
    folder.makedirs()
    data = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "conditions": [{**asdict(r), "share": r.share} for r in results],
    }
    folder.join(ADAPTIVE_FILE).write_atomic(json.dumps(data, indent=2).encode("utf-8"))


def adaptive_costs(plan: Plan) -> list[dict[str, Any]]:
    """Per adaptive condition: what its remaining cells cost in a full run and, at most, in an
    adaptive one (`max_share` of the items, less those answered), from the plan's estimate.
    The grade lines' cost is shared evenly among the generate conditions they grade."""
    wanted = adaptive_conditions(plan)
    lines = plan.estimate.lines
    gens = max(1, len(plan.design.generate))
    grading = sum(line.remaining_usd for line in lines if line.stage == "grade") / gens
    out = []
    for line in lines:
        cfg = wanted.get(line.condition_id)
        if line.stage != "generate" or cfg is None:
            continue
        full = line.remaining_usd + grading
        done = line.cells - line.remaining_cells
        left = max(0.0, cfg.max_share * line.cells - done)
        share = min(1.0, left / line.remaining_cells) if line.remaining_cells else 0.0
        out.append(
            {
                "condition": line.condition,
                "max_share": cfg.max_share,
                "cells": line.cells,
                "full_remaining_usd": full,
                "adaptive_remaining_usd": full * share,
                "adaptive_remaining_cells": round(line.remaining_cells * share),
            }
        )
    return out


def render_adaptive_costs(costs: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"Adaptive {c['condition']}: at most {c['max_share']:.0%} of its items, "
        f"~${c['adaptive_remaining_usd']:,.4f} ({c['adaptive_remaining_cells']:,} cells) "
        f"beside ~${c['full_remaining_usd']:,.4f} for the full run (its grading included; "
        "it stops earlier when the prediction is precise enough)"
        for c in costs
    )


def read_adaptive(plan: Plan) -> list[dict[str, Any]]:
    """The adaptive results stored in the plan's store (empty when there are none)."""
    source = plan.store.root.join(ANALYSIS_DIR, ADAPTIVE_FILE)
    if not source.exists():
        return []
    return list(json.loads(source.read_bytes())["conditions"])
