"""Pairwise judging: one condition's answer against a baseline's, both orders, win/tie/loss.

A pairwise judge is shown two answers to the same item and epoch, the condition's and the
baseline's, once in each order, and says which is better (`first`, `second` or `tie`). Each
verdict becomes an outcome for the condition: 1 a win, 0.5 a tie, 0 a loss. Every estimator
here works on those outcomes and treats an item as a cluster (its epochs and both orders are
drawn together: they are not independent).

* **win rate** `W = sum(y) / n` over every verdict (ties count a half), with a 95% interval
  from the cluster-robust standard error of that mean (the verdicts of one item summed first:
  `se^2 = sum_i (Y_i - W n_i)^2 / (sum n_i)^2 * m / (m - 1)`, `m` items). The two orders of a
  pair are paired by construction: the same item, epoch and answers.
* **position bias**: among the verdicts that pick a side, the share where the answer shown
  first won, `F = first wins / decisive`, interval as above (ratio of sums by item). An
  unbiased judge gives 50% when every pair is asked in both orders; the bias is `F - 0.5`.
* **length bias**: the win rate by bins of the length difference (condition minus baseline,
  characters, quantile bins), and the slope of a logistic regression (below).
* **length-controlled win rate** (like AlpacaEval's LC): a logistic regression of the outcome
  on `tanh(diff / s)` (`s` twice the root mean square of the differences: near-linear over the
  data, bounded for outliers) and on the order (`+0.5` when the condition was shown first,
  `-0.5` otherwise), `logit P(win) = b0 + b1 tanh(diff / s) + b2 order`, fitted by
  iteratively reweighted least squares with fractional outcomes (ties 0.5). The LC win rate is
  every verdict's fitted win probability with its length term set to 0, averaged:
  `mean_k sigmoid(b0 + b2 order_k)`; its interval by the delta method from the cluster-robust
  (sandwich) covariance of `b`. The length slope `b1` (log-odds) is reported with its interval.
* **Bradley-Terry strengths** when several conditions are compared (each against the baseline,
  or any pairs): `P(i beats j) = sigmoid(t_i - t_j)`, the baseline's strength fixed at 0, fitted
  the same way (ties as half a win); intervals `t -/+ 1.96 se`, cluster-robust by item.

Nothing here reads the store or calls a model. `parse_pairwise_verdict` reads a judge's reply.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

Z95 = 1.959963984540054
OUTCOME = {"first": 1.0, "second": 0.0, "tie": 0.5}

#: A pairwise judge with structured output answers this object.
PAIRWISE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "winner": {"type": "string", "enum": ["first", "second", "tie"]},
    },
    "required": ["reasoning", "winner"],
    "additionalProperties": False,
}
_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)


def parse_pairwise_verdict(text: str, *, structured: bool = False) -> str | None:
    """`first`, `second` or `tie` from a judge's reply (None: no such verdict). Structured: the
    whole reply is the object; text: the last fenced block that is an object with `winner`."""
    candidates = [text] if structured else [*reversed(_FENCE.findall(text)), text]
    for candidate in candidates:
        try:
            value = json.loads(candidate.strip())
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and value.get("winner") in OUTCOME:
            return str(value["winner"])
    return None


@dataclass(frozen=True)
class Interval:
    value: float | None
    low: float | None
    high: float | None
    n: int


@dataclass(frozen=True)
class LengthBin:
    low: float  # length difference (characters), bin edges
    high: float
    win_rate: float
    n: int


@dataclass(frozen=True)
class PairwiseResult:
    """One condition against the baseline."""

    condition: str
    baseline: str
    verdicts: int
    win_rate: Interval
    position_first_wins: Interval  # share of decisive verdicts won by the first-shown answer
    length_controlled: Interval
    length_slope: Interval  # log-odds per unit of tanh(diff / s)
    length_bins: list[LengthBin] = field(default_factory=list)


@dataclass(frozen=True)
class Strength:
    condition: str
    value: float
    low: float | None
    high: float | None


@dataclass(frozen=True)
class PairwiseAnalysis:
    baseline: str
    results: list[PairwiseResult]
    #: the judge over every pair: how often the first-shown answer won (decisive verdicts)
    position_first_wins: Interval
    strengths: list[Strength]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def outcomes(verdicts: Sequence[str | None], condition_first: np.ndarray) -> np.ndarray:
    """The condition's outcome per verdict (1 win, 0.5 tie, 0 loss, nan: no verdict)."""
    first = np.array([OUTCOME.get(v, np.nan) if v else np.nan for v in verdicts], dtype=float)
    return np.where(np.asarray(condition_first, dtype=bool), first, 1.0 - first)


def _codes(cluster: np.ndarray) -> tuple[np.ndarray, int]:
    _, codes = np.unique(np.asarray(cluster), return_inverse=True)
    return codes, int(codes.max()) + 1 if len(codes) else 0


def ratio_interval(num: np.ndarray, den: np.ndarray, cluster: np.ndarray) -> Interval:
    """`sum(num) / sum(den)` with a cluster-robust 95% normal interval, clipped to [0, 1]."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    total = float(den.sum())
    if total <= 0:
        return Interval(None, None, None, 0)
    value = float(num.sum()) / total
    codes, m = _codes(cluster)
    if m < 2:
        return Interval(value, None, None, int(total))
    resid = np.bincount(codes, num - value * den, minlength=m)
    se = math.sqrt(float((resid**2).sum()) / total**2 * m / (m - 1))
    return Interval(value, max(0.0, value - Z95 * se), min(1.0, value + Z95 * se), int(total))


def win_rate(outcome: np.ndarray, cluster: np.ndarray) -> Interval:
    ok = ~np.isnan(outcome)
    return ratio_interval(outcome[ok], np.ones(int(ok.sum())), np.asarray(cluster)[ok])


def position_bias(first_outcome: np.ndarray, cluster: np.ndarray) -> Interval:
    """The share of decisive verdicts won by the answer shown first (`first_outcome`: 1 the
    first won, 0 the second, 0.5 a tie, nan none)."""
    decisive = np.isin(first_outcome, (0.0, 1.0))
    return ratio_interval(
        first_outcome[decisive], np.ones(int(decisive.sum())), np.asarray(cluster)[decisive]
    )


def logistic_fit(
    x: np.ndarray, y: np.ndarray, cluster: np.ndarray, *, iterations: int = 50
) -> tuple[np.ndarray, np.ndarray | None]:
    """Coefficients of `logit P(y) = x @ b` for outcomes in [0, 1] (IRLS), and their
    cluster-robust covariance (None when it cannot be estimated)."""
    beta = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(x @ beta)))
        w = np.clip(p * (1 - p), 1e-9, None)
        hessian = x.T @ (x * w[:, None])
        try:
            step = np.linalg.solve(hessian + 1e-9 * np.eye(len(beta)), x.T @ (y - p))
        except np.linalg.LinAlgError:
            return beta, None
        beta = np.clip(beta + step, -30, 30)
        if float(np.abs(step).max()) < 1e-10:
            break
    p = 1.0 / (1.0 + np.exp(-(x @ beta)))
    hessian = x.T @ (x * np.clip(p * (1 - p), 1e-9, None)[:, None])
    codes, m = _codes(cluster)
    if m < 2:
        return beta, None
    scores = np.zeros((m, x.shape[1]))
    np.add.at(scores, codes, x * (y - p)[:, None])
    try:
        bread = np.linalg.inv(hessian)
    except np.linalg.LinAlgError:
        return beta, None
    return beta, bread @ (scores.T @ scores) @ bread * m / (m - 1)


def _sigmoid(value: float) -> float:
    return 1.0 / (1.0 + math.exp(-value))


def length_controlled(
    outcome: np.ndarray, length_diff: np.ndarray, condition_first: np.ndarray, cluster: np.ndarray
) -> tuple[Interval, Interval]:
    """(LC win rate, length slope): see the module docstring."""
    ok = ~np.isnan(outcome)
    y = outcome[ok]
    if not len(y):
        empty = Interval(None, None, None, 0)
        return empty, empty
    diff = np.asarray(length_diff, float)[ok]
    scale = 2.0 * float(np.sqrt(np.mean(diff**2))) or 1.0
    order = np.where(np.asarray(condition_first, bool)[ok], 0.5, -0.5)
    x = np.column_stack([np.ones(len(y)), np.tanh(diff / scale), order])
    n = len(y)
    if not diff.any():  # every pair equally long: nothing to control, no slope to give
        beta, cov = logistic_fit(x[:, [0, 2]], y, np.asarray(cluster)[ok])
        beta = np.array([beta[0], 0.0, beta[1]])
        if cov is not None:
            full = np.zeros((3, 3))
            full[np.ix_([0, 2], [0, 2])] = cov
            cov = full
        slope_missing = True
    else:
        beta, cov = logistic_fit(x, y, np.asarray(cluster)[ok])
        slope_missing = False
    # Every verdict's fitted win probability with its length term set to 0, averaged.
    at_zero = x.copy()
    at_zero[:, 1] = 0.0
    fitted = 1.0 / (1.0 + np.exp(-(at_zero @ beta)))
    value = float(fitted.mean())
    if cov is None:
        slope = Interval(None if slope_missing else float(beta[1]), None, None, n)
        return Interval(value, None, None, n), slope
    gradient = (at_zero * (fitted * (1 - fitted))[:, None]).mean(axis=0)
    se = math.sqrt(max(float(gradient @ cov @ gradient), 0.0))
    se1 = math.sqrt(max(cov[1, 1], 0.0))
    lc = Interval(value, max(0.0, value - Z95 * se), min(1.0, value + Z95 * se), n)
    slope = Interval(float(beta[1]), beta[1] - Z95 * se1, beta[1] + Z95 * se1, n)
    return lc, Interval(None, None, None, n) if slope_missing else slope


def length_bins(outcome: np.ndarray, length_diff: np.ndarray, bins: int = 5) -> list[LengthBin]:
    """The win rate by quantile bins of the length difference."""
    ok = ~np.isnan(outcome)
    y, diff = outcome[ok], np.asarray(length_diff, float)[ok]
    if not len(y):
        return []
    edges = np.unique(np.quantile(diff, np.linspace(0, 1, bins + 1)))
    if len(edges) < 2:
        return [LengthBin(float(diff.min()), float(diff.max()), float(y.mean()), len(y))]
    which = np.clip(np.searchsorted(edges, diff, side="right") - 1, 0, len(edges) - 2)
    return [
        LengthBin(float(edges[b]), float(edges[b + 1]), float(y[which == b].mean()), int(n))
        for b in range(len(edges) - 1)
        if (n := int((which == b).sum()))
    ]


def bradley_terry(
    winner_side: np.ndarray,
    side_a: Sequence[str],
    side_b: Sequence[str],
    cluster: np.ndarray,
    *,
    reference: str,
) -> list[Strength]:
    """Strengths (log-odds scale, `reference` at 0) from outcomes of `side_a` against `side_b`
    (`winner_side`: 1 a won, 0.5 tie, 0 b won, nan none), with cluster-robust intervals."""
    ok = ~np.isnan(winner_side)
    a = np.asarray(side_a)[ok]
    b = np.asarray(side_b)[ok]
    names = [n for n in sorted(set(a) | set(b)) if n != reference]
    if not names:
        return [Strength(reference, 0.0, 0.0, 0.0)]
    column = {name: i for i, name in enumerate(names)}
    x = np.zeros((len(a), len(names)))
    for row, (left, right) in enumerate(zip(a, b, strict=True)):
        if left in column:
            x[row, column[left]] += 1.0
        if right in column:
            x[row, column[right]] -= 1.0
    beta, cov = logistic_fit(x, winner_side[ok], np.asarray(cluster)[ok])
    out = [Strength(reference, 0.0, 0.0, 0.0)]
    for name, i in column.items():
        se = None if cov is None else math.sqrt(max(cov[i, i], 0.0))
        low = None if se is None else float(beta[i] - Z95 * se)
        high = None if se is None else float(beta[i] + Z95 * se)
        out.append(Strength(str(name), float(beta[i]), low, high))
    return out


def analyse_pairwise(
    *,
    condition: Sequence[str],
    baseline: str,
    item: Sequence[Any],
    condition_first: np.ndarray,
    verdict: Sequence[str | None],
    length_diff: np.ndarray,
) -> PairwiseAnalysis:
    """Every estimator for verdicts of conditions against one baseline: one row per verdict
    (`condition`: the condition compared; `item`: the cluster, e.g. the item id;
    `condition_first`: whether the condition's answer was shown first; `verdict`: first,
    second, tie or None; `length_diff`: the condition's answer's length minus the baseline's)."""
    cond = np.asarray(condition)
    items = np.asarray(item)
    shown = np.asarray(condition_first, dtype=bool)
    diff = np.asarray(length_diff, dtype=float)
    y = outcomes(verdict, shown)
    first = np.where(shown, y, 1.0 - y)
    results = []
    for name in dict.fromkeys(cond.tolist()):
        mine = cond == name
        lc, slope = length_controlled(y[mine], diff[mine], shown[mine], items[mine])
        results.append(
            PairwiseResult(
                condition=str(name),
                baseline=baseline,
                verdicts=int((~np.isnan(y[mine])).sum()),
                win_rate=win_rate(y[mine], items[mine]),
                position_first_wins=position_bias(first[mine], items[mine]),
                length_controlled=lc,
                length_slope=slope,
                length_bins=length_bins(y[mine], diff[mine]),
            )
        )
    strengths = bradley_terry(y, cond.tolist(), [baseline] * len(cond), items, reference=baseline)
    return PairwiseAnalysis(
        baseline=baseline,
        results=results,
        position_first_wins=position_bias(first, items),
        strengths=strengths,
    )
