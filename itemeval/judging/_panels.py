"""Panels: several judges' stored verdicts combined into one, with no model call.

A panel (`panels:` in a study) names judges and a rule:

* `majority`: an answer passes when more than half of the members passed it; an even split
  goes to the tie rule (`tie: fail`, the default, or `pass`); the panel's score is the share of
  members that passed it;
* `mean`: the members' mean score; it passes at the panel's threshold or above;
* `median`: the members' median score (for an even number, the lower of the two middle scores
  under `tie: fail`, the upper under `tie: pass`); it passes at the threshold or above.

The threshold is the panel's `threshold:` or the rubric's pass score; over pass/fail verdicts
(a rubric that passes only at its maximum) the study must give one (`config` refuses the
mean of such verdicts without it: it would pass only unanimous answers).

A panel gives a verdict on an answer every member graded validly (a member's parse failure or
provider error leaves the cell without a panel verdict, as it leaves it without that member's).
A member's parse failure is final, so the panel's verdict on that answer can never come: the
panel has a row for it too, a parse failure of its own (`parse_code` `member_parse_failure`,
not valid), so that its coverage counts it as such rather than as not yet graded.
Its verdicts are computed from the members' grades when a report or an analysis reads them;
nothing is stored and nothing is asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.judging._verdicts import Shape, column, verdicts

Combine = Literal["majority", "mean", "median"]
Tie = Literal["fail", "pass"]


@dataclass(frozen=True)
class PanelRule:
    combine: Combine = "majority"
    tie: Tie = "fail"
    #: mean and median: the combined score at or above which the panel passes (the panel's
    #: `threshold`, or the rubric's pass score)
    pass_score: float = 1.0


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


MEMBER_PARSE_FAILURE = "member_parse_failure"


def panel_grades(
    grades: pa.Table, members: Sequence[int], code: int, rule: PanelRule, shape: Shape
) -> pa.Table:
    """The panel's grades as grade rows of condition `code` (the report's cell columns), from
    the valid grades of the `members` (grade condition codes) in `grades`; plus a final parse
    failure (not valid) for each answer a member failed to parse, whose verdict cannot come."""
    side = verdicts(grades, members, shape)
    complete = ~np.isnan(side.passed).any(axis=1) & ~np.isnan(side.score).any(axis=1)
    passed, score = side.passed[complete], side.score[complete]
    verdict, value = combine(passed.astype(bool), score, rule)
    keys = side.keys[complete]
    dataset = side.dataset[complete]
    never, never_dataset = _unparsed(grades, members, shape)
    never_kept = ~np.isin(never, keys)
    never, never_dataset = never[never_kept], never_dataset[never_kept]
    n, m = keys.size, never.size
    gen, item, epoch = shape.split(np.concatenate([keys, never]))
    valid = np.concatenate([np.ones(n, dtype=bool), np.zeros(m, dtype=bool)])
    return pa.table(
        {
            "grade": pa.array(np.full(n + m, code, dtype=np.int32)),
            "gen": pa.array(gen.astype(np.int32)),
            "item": pa.array(item.astype(np.int32)),
            "dataset": pa.array(np.concatenate([dataset, never_dataset]).astype(np.int32)),
            "epoch": pa.array(epoch.astype(np.int32)),
            "ok": pa.array(np.ones(n + m, dtype=bool)),
            "error_code": pa.nulls(n + m, pa.string()),
            "score": pa.array(np.concatenate([value.astype(np.float64), np.full(m, np.nan)])),
            "correct": pa.array(
                np.concatenate([verdict.astype(bool), np.zeros(m, dtype=bool)]),
                mask=~valid,
            ),
            "parse_ok": pa.array(valid),
            "parse_code": pa.array([None] * n + [MEMBER_PARSE_FAILURE] * m, pa.string()),
            "usd": pa.array(np.zeros(n + m)),
            "cached": pa.array(np.zeros(n + m, dtype=bool)),
            "cached_input_tokens": pa.array(np.zeros(n + m, dtype=np.int64)),
            "batch": pa.array(np.zeros(n + m, dtype=bool)),
            "stale": pa.array(np.zeros(n + m, dtype=bool)),
            "valid": pa.array(valid),
        }
    )


def _unparsed(
    grades: pa.Table, members: Sequence[int], shape: Shape
) -> tuple[np.ndarray, np.ndarray]:
    """The answer keys (sorted, unique) and datasets of the members' final parse failures of
    the current answers (status ok, not parsed, not stale)."""
    if not {"ok", "parse_ok", "stale"} <= set(grades.schema.names):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32)
    mask = pc.and_(
        pc.and_(grades.column("ok"), pc.invert(grades.column("parse_ok"))),
        pc.and_(
            pc.invert(grades.column("stale")),
            pc.is_in(
                grades.column("grade"), pa.array(list(members), grades.schema.field("grade").type)
            ),
        ),
    )
    rows = grades.filter(pc.fill_null(mask, False))
    keys = shape.keys(column(rows, "gen", np.int64), column(rows, "item", np.int64), 0)
    keys = keys + column(rows, "epoch", np.int64)
    unique, first = np.unique(keys, return_index=True)
    return unique, column(rows, "dataset", np.int32)[first]
