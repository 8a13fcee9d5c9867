"""Panels: several judges' stored verdicts combined into one, with no model call.

A panel (`panels:` in a study) names judges and a rule:

* `majority`: an answer passes when more than half of the members passed it; an even split
  goes to the tie rule (`tie: fail`, the default, or `pass`); the panel's score is the share of
  members that passed it;
* `mean`: the members' mean score; it passes at the rubric's pass score or above;
* `median`: the members' median score (for an even number, the lower of the two middle scores
  under `tie: fail`, the upper under `tie: pass`); it passes at the pass score or above.

A panel gives a verdict on an answer every member graded validly (a member's parse failure or
provider error leaves the cell without a panel verdict, as it leaves it without that member's).
Its verdicts are computed from the members' grades when a report or an analysis reads them;
nothing is stored and nothing is asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa

from itemeval.judging._verdicts import Shape, verdicts

Combine = Literal["majority", "mean", "median"]
Tie = Literal["fail", "pass"]


@dataclass(frozen=True)
class PanelRule:
    combine: Combine = "majority"
    tie: Tie = "fail"
    pass_score: float = 1.0  # the rubric's pass score (mean and median)


def combine(
    passed: np.ndarray, score: np.ndarray, rule: PanelRule
) -> tuple[np.ndarray, np.ndarray]:
    """The panel's verdict (bool) and score per row of complete member verdicts (cells x
    members, no NaN)."""
    members = passed.shape[1]
    if rule.combine == "majority":
        votes = passed.sum(axis=1)
        verdict = votes * 2 > members
        tied = votes * 2 == members
        if rule.tie == "pass":
            verdict = verdict | tied
        return verdict, votes / members
    if rule.combine == "mean":
        value = score.mean(axis=1)
    else:
        ordered = np.sort(score, axis=1)
        if members % 2:
            value = ordered[:, members // 2]
        else:
            value = ordered[:, members // 2 - (rule.tie == "fail")]
    return value >= rule.pass_score, value


def panel_grades(
    grades: pa.Table, members: Sequence[int], code: int, rule: PanelRule, shape: Shape
) -> pa.Table:
    """The panel's grades as grade rows of condition `code` (the report's cell columns), from
    the valid grades of the `members` (grade condition codes) in `grades`."""
    side = verdicts(grades, members, shape)
    complete = ~np.isnan(side.passed).any(axis=1) & ~np.isnan(side.score).any(axis=1)
    passed, score = side.passed[complete], side.score[complete]
    verdict, value = combine(passed.astype(bool), score, rule)
    gen, item, epoch = shape.split(side.keys[complete])
    n = int(complete.sum())
    return pa.table(
        {
            "grade": pa.array(np.full(n, code, dtype=np.int32)),
            "gen": pa.array(gen.astype(np.int32)),
            "item": pa.array(item.astype(np.int32)),
            "dataset": pa.array(side.dataset[complete]),
            "epoch": pa.array(epoch.astype(np.int32)),
            "ok": pa.array(np.ones(n, dtype=bool)),
            "error_code": pa.nulls(n, pa.string()),
            "score": pa.array(value.astype(np.float64)),
            "correct": pa.array(verdict.astype(bool)),
            "parse_ok": pa.array(np.ones(n, dtype=bool)),
            "parse_code": pa.nulls(n, pa.string()),
            "usd": pa.array(np.zeros(n)),
            "cached": pa.array(np.zeros(n, dtype=bool)),
            "cached_input_tokens": pa.array(np.zeros(n, dtype=np.int64)),
            "batch": pa.array(np.zeros(n, dtype=bool)),
            "stale": pa.array(np.zeros(n, dtype=bool)),
            "valid": pa.array(np.ones(n, dtype=bool)),
        }
    )
