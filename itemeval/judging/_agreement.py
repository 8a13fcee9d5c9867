"""How a panel's members agree, how their errors go together, and what they are worth.

* Pairwise agreement: the share of answers two members both graded on which their verdicts are
  the same, and Cohen's kappa, `(p_o - p_e) / (1 - p_e)` with `p_e` the agreement expected from
  each member's pass rate alone.
* Error correlation (where gold exists): per member an error indicator (verdict differs from
  gold) on the answers with gold that both graded; the Pearson correlation of two members'
  indicators (the phi coefficient). Independent judges have 0; judges that fail on the same
  answers approach 1.
* Effective number of independent judges: `m / (1 + (m - 1) * r)`, with `r` the mean pairwise
  error correlation (clipped to [0, 1]): the number of independent judges whose majority would
  be as informative as the panel's, under equal correlations (the design effect of a mean of
  `m` equicorrelated votes). `m` when errors are independent, 1 when they coincide.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PairAgreement:
    first: int  # member positions
    second: int
    answers: int  # graded by both
    agreement: float | None
    kappa: float | None
    error_answers: int  # graded by both, with gold
    error_correlation: float | None


@dataclass(frozen=True)
class PanelAgreement:
    members: int
    pairs: list[PairAgreement]
    mean_error_correlation: float | None
    effective_judges: float | None


def kappa(a: np.ndarray, b: np.ndarray) -> tuple[float | None, float | None]:
    """(agreement rate, Cohen's kappa) of two boolean verdict arrays."""
    if a.size == 0:
        return None, None
    observed = float(np.mean(a == b))
    pa_, pb_ = float(a.mean()), float(b.mean())
    expected = pa_ * pb_ + (1 - pa_) * (1 - pb_)
    if expected >= 1.0:
        return observed, None
    return observed, (observed - expected) / (1.0 - expected)


def correlation(a: np.ndarray, b: np.ndarray) -> float | None:
    """Pearson correlation of two indicator arrays (None when either is constant)."""
    if a.size < 2 or a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def effective_judges(members: int, mean_correlation: float | None) -> float | None:
    if mean_correlation is None or math.isnan(mean_correlation):
        return None
    r = min(1.0, max(0.0, mean_correlation))
    return members / (1.0 + (members - 1) * r)


def panel_agreement(passed: np.ndarray, gold: np.ndarray | None = None) -> PanelAgreement:
    """`passed`: cells x members (1.0, 0.0, NaN none); `gold`: per cell (NaN none)."""
    members = passed.shape[1]
    pairs = []
    for i, j in itertools.combinations(range(members), 2):
        both = ~np.isnan(passed[:, i]) & ~np.isnan(passed[:, j])
        a, b = passed[both, i].astype(bool), passed[both, j].astype(bool)
        rate, k = kappa(a, b)
        corr, with_gold = None, 0
        if gold is not None:
            known = both & ~np.isnan(gold)
            with_gold = int(known.sum())
            truth = gold[known].astype(bool)
            corr = correlation(
                (passed[known, i].astype(bool) != truth).astype(float),
                (passed[known, j].astype(bool) != truth).astype(float),
            )
        pairs.append(PairAgreement(i, j, int(both.sum()), rate, k, with_gold, corr))
    known = [p.error_correlation for p in pairs if p.error_correlation is not None]
    mean = float(np.mean(known)) if known and len(known) == len(pairs) else None
    return PanelAgreement(members, pairs, mean, effective_judges(members, mean))
