"""A judge against gold: its error rates, and accuracy corrected for them.

On the answers that have both a judge verdict and a gold verdict:

* sensitivity `Se = P(judge passes | gold passes)`, specificity `Sp = P(judge fails | gold
  fails)`, each with a Wilson 95% interval (scipy);
* false pass rate `1 - Sp`, false fail rate `1 - Se`.

On every answer the judge graded (of a generate condition, or all of them):

* raw judged accuracy `p`: the share the judge passed;
* corrected accuracy (Rogan-Gladen): `(p + Sp - 1) / (Se + Sp - 1)`, clipped to [0, 1]. The
  judge passes a share `Se * a + (1 - Sp) * (1 - a)` of answers whose true accuracy is `a`;
  solving for `a` gives the formula. It needs `Se + Sp > 1` (a judge better than a coin); with
  `Se + Sp - 1 < 0.05` it is not given;
* bias of the raw figure: `p - corrected`.

Intervals: a cluster bootstrap over items (every epoch and every condition of an item drawn
together, the gold answers with them), 2,000 resamples by default: each resample recomputes `p`,
`Se` and `Sp` and so the corrected accuracy, so the interval carries the uncertainty of the
error rates as well as that of `p`; the 2.5th and 97.5th percentiles. The raw interval comes from
the same resamples (it is the judged accuracy's own uncertainty, and says nothing of the judge's
errors). Se and Sp are pooled over every condition: the correction assumes a judge errs alike
on every condition's answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20240917
#: Below this `Se + Sp - 1`, the correction is not given (it divides by it).
MIN_INFORMATIVE = 0.05
_CHUNK = 100  # resamples drawn at a time (bounds memory on many items)


@dataclass(frozen=True)
class Rate:
    """A proportion `k / n` with its Wilson 95% interval."""

    k: int
    n: int
    value: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, k: int, n: int) -> Rate:
        if n == 0:
            return cls(k, n, None, None, None)
        from scipy import stats  # here: importing scipy.stats costs every command ~0.5 s

        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        return cls(k, n, k / n, float(ci.low), float(ci.high))


@dataclass(frozen=True)
class ErrorRates:
    sensitivity: Rate  # judge passes among gold passes
    specificity: Rate  # judge fails among gold fails
    agreement: Rate  # judge equals gold

    @property
    def false_pass(self) -> float | None:
        value = self.specificity.value
        return None if value is None else 1.0 - value

    @property
    def false_fail(self) -> float | None:
        value = self.sensitivity.value
        return None if value is None else 1.0 - value


@dataclass(frozen=True)
class Estimate:
    value: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Corrected:
    """One group's accuracy (a generate condition, or `group=None` for all answers)."""

    group: int | None
    judged: int
    raw: Estimate
    corrected: Estimate
    bias: Estimate  # raw - corrected
    gold: Rate  # gold's own accuracy on this group's answers with gold


@dataclass(frozen=True)
class Calibration:
    rates: ErrorRates
    groups: list[Corrected]  # overall first, then by group code
    resamples: int
    seed: int


def rogan_gladen(raw: np.ndarray, se: np.ndarray, sp: np.ndarray) -> np.ndarray:
    """Corrected accuracy, clipped to [0, 1]; NaN where `Se + Sp - 1 < MIN_INFORMATIVE`."""
    with np.errstate(divide="ignore", invalid="ignore"):
        denominator = se + sp - 1.0
        value = (raw + sp - 1.0) / denominator
    value = np.clip(value, 0.0, 1.0)
    return np.where(denominator >= MIN_INFORMATIVE, value, np.nan)


def error_rates(judge: np.ndarray, gold: np.ndarray) -> ErrorRates:
    both = ~np.isnan(judge) & ~np.isnan(gold)
    j, g = judge[both].astype(bool), gold[both].astype(bool)
    return ErrorRates(
        sensitivity=Rate.of(int((j & g).sum()), int(g.sum())),
        specificity=Rate.of(int((~j & ~g).sum()), int((~g).sum())),
        agreement=Rate.of(int((j == g).sum()), int(both.sum())),
    )


def calibrate(
    judge: np.ndarray,
    gold: np.ndarray,
    cluster: np.ndarray,
    group: np.ndarray,
    *,
    groups: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Calibration:
    """`judge`, `gold`: per answer 1.0 / 0.0 / NaN (no verdict); `cluster`: the answer's item
    (0..items-1, resampled together); `group`: its generate condition (0..groups-1)."""
    judged = ~np.isnan(judge)
    both = judged & ~np.isnan(gold)
    items = int(cluster.max()) + 1 if cluster.size else 0
    j = np.nan_to_num(judge)
    g = np.nan_to_num(gold)

    def per_item(weights: np.ndarray) -> np.ndarray:
        return np.bincount(cluster, weights=weights, minlength=items)

    # Per item: gold counts (pooled), then judged and passed counts per group.
    tp = per_item((both & (j == 1) & (g == 1)).astype(float))
    pos = per_item((both & (g == 1)).astype(float))
    tn = per_item((both & (j == 0) & (g == 0)).astype(float))
    neg = per_item((both & (g == 0)).astype(float))
    keys: list[int | None] = [None, *range(groups)]
    n_by = []
    s_by = []
    for key in keys:
        mine = judged if key is None else judged & (group == key)
        n_by.append(per_item(mine.astype(float)))
        s_by.append(per_item((mine & (j == 1)).astype(float)))
    counts = np.vstack([tp, pos, tn, neg, *n_by, *s_by]).T  # items x columns

    def estimates(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """raw and corrected per key, for rows of column totals."""
        with np.errstate(divide="ignore", invalid="ignore"):
            se = totals[:, 0] / totals[:, 1]
            sp = totals[:, 2] / totals[:, 3]
            k = len(keys)
            n = totals[:, 4 : 4 + k]
            s = totals[:, 4 + k : 4 + 2 * k]
            raw = s / n
        corrected = rogan_gladen(raw, se[:, None], sp[:, None])
        return raw, corrected

    point_raw, point_corrected = estimates(counts.sum(axis=0)[None, :])
    rng = np.random.default_rng(seed)
    raws, corrs = [], []
    done = 0
    while done < resamples and items:
        size = min(_CHUNK, resamples - done)
        # Items drawn with replacement, as counts per item (a multinomial draw, 20x quicker
        # than `rng.multinomial` over many items).
        drawn = rng.integers(0, items, size=(size, items)) + np.arange(size)[:, None] * items
        weights = np.bincount(drawn.ravel(), minlength=size * items).reshape(size, items)
        raw, corrected = estimates(weights @ counts)
        raws.append(raw)
        corrs.append(corrected)
        done += size
    raw_draws = np.vstack(raws) if raws else np.empty((0, len(keys)))
    corr_draws = np.vstack(corrs) if corrs else np.empty((0, len(keys)))

    rates = error_rates(judge, gold)
    out = []
    for index, key in enumerate(keys):
        mine = judged if key is None else judged & (group == key)
        gold_here = ~np.isnan(gold) & (np.ones_like(judged) if key is None else group == key)
        raw_value = _finite(point_raw[0, index])
        corrected_value = _finite(point_corrected[0, index])
        out.append(
            Corrected(
                group=key,
                judged=int(mine.sum()),
                raw=_estimate(raw_value, raw_draws[:, index]),
                corrected=_estimate(corrected_value, corr_draws[:, index]),
                bias=_estimate(
                    None
                    if raw_value is None or corrected_value is None
                    else raw_value - corrected_value,
                    raw_draws[:, index] - corr_draws[:, index],
                ),
                gold=Rate.of(int((g[gold_here] == 1).sum()), int(gold_here.sum())),
            )
        )
    return Calibration(rates, out, resamples, seed)


def _finite(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _estimate(value: float | None, draws: np.ndarray) -> Estimate:
    if value is None:
        return Estimate(None, None, None)
    finite = draws[np.isfinite(draws)]
    if finite.size < max(10, draws.size // 2):
        return Estimate(value, None, None)
    low, high = np.percentile(finite, [2.5, 97.5])
    return Estimate(value, float(low), float(high))
