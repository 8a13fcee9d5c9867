"""Every judge and panel of a study against gold, and every panel's agreement, in one call.

`analyse` takes the report's grade cells (plain arrow and numpy: `grade, gen, item, dataset,
epoch, correct, score, valid`), which grade conditions are judges and which are panels (with
their members), and gold verdicts by answer key; it returns what the report, `export` and
`Study.judges()` show. See `_calibration.py` and `_agreement.py` for the estimators.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from itemeval.judging._agreement import PanelAgreement, panel_agreement
from itemeval.judging._calibration import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Calibration,
    calibrate,
)
from itemeval.judging._verdicts import Shape, aligned, verdicts


@dataclass(frozen=True)
class Grader:
    """A judge or panel as the analysis names it."""

    code: int  # its grade condition's position among the cells' grade conditions
    id: str
    label: str
    kind: str  # "judge" | "panel"
    members: tuple[int, ...] = ()  # panels: the members' codes


@dataclass(frozen=True)
class JudgeResult:
    grader: Grader
    answers: int  # answers it graded validly
    calibration: Calibration | None  # None without gold on its answers


@dataclass(frozen=True)
class PanelResult:
    grader: Grader
    member_labels: list[str]
    agreement: PanelAgreement


@dataclass(frozen=True)
class JudgeAnalysis:
    gold_source: str  # what gold is, in words ("" without gold)
    gold_answers: int  # answers with a gold verdict
    groups: list[str]  # generate condition slugs by code
    judges: list[JudgeResult] = field(default_factory=list)
    panels: list[PanelResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """Plain data for JSON (what `export` writes as `judges.json`)."""
        from dataclasses import asdict

        return {
            "gold_source": self.gold_source,
            "gold_answers": self.gold_answers,
            "groups": self.groups,
            "judges": [asdict(j) for j in self.judges],
            "panels": [asdict(p) for p in self.panels],
            "notes": self.notes,
        }


def analyse(
    grades: pa.Table,
    shape: Shape,
    graders: Sequence[Grader],
    *,
    groups: Sequence[str],
    gold_keys: np.ndarray,
    gold: np.ndarray,
    gold_source: str = "",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    clusters: np.ndarray | None = None,
) -> JudgeAnalysis:
    """`clusters`: a cluster code per item (`analysis.cluster_by`), resampled together in every
    interval; None: each item its own cluster."""
    judges = []
    labels = {g.code: g.label for g in graders}
    for grader in graders:
        side = verdicts(grades, [grader.code], shape)
        judge = side.passed[:, 0]
        truth = aligned(side.keys, gold_keys, gold)
        calibration = None
        if np.any(~np.isnan(truth) & ~np.isnan(judge)):
            item = side.item.astype(np.int64)
            calibration = calibrate(
                judge,
                truth,
                item if clusters is None else np.asarray(clusters, dtype=np.int64)[item],
                side.gen.astype(np.int64),
                groups=len(groups),
                resamples=resamples,
                seed=seed,
            )
        judges.append(JudgeResult(grader, int((~np.isnan(judge)).sum()), calibration))
    panels = []
    for grader in graders:
        if grader.kind != "panel":
            continue
        side = verdicts(grades, list(grader.members), shape)
        panel_truth = aligned(side.keys, gold_keys, gold) if gold_keys.size else None
        panels.append(
            PanelResult(
                grader,
                [labels.get(m, str(m)) for m in grader.members],
                panel_agreement(side.passed, panel_truth),
            )
        )
    return JudgeAnalysis(
        gold_source=gold_source,
        gold_answers=int(gold_keys.size),
        groups=list(groups),
        judges=judges,
        panels=panels,
    )
