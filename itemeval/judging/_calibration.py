"""A judge against gold: its error rates, and accuracy corrected for them.

On the answers that have both a judge verdict and a gold verdict:

* sensitivity `Se = P(judge passes | gold passes)`, specificity `Sp = P(judge fails | gold
  fails)`, agreement `P(judge equals gold)`;
* false pass rate `1 - Sp`, false fail rate `1 - Se`.

On every answer the judge graded (of a generate condition, or all of them):

* raw judged accuracy `p`: the share the judge passed;
* corrected accuracy (Rogan-Gladen): `(p + Sp - 1) / (Se + Sp - 1)`, clipped to [0, 1]. The
  judge passes a share `Se * a + (1 - Sp) * (1 - a)` of answers whose true accuracy is `a`;
  solving for `a` gives the formula. It needs `Se + Sp > 1` (a judge better than a coin); with
  `Se + Sp - 1 < 0.05` it is not given;
* bias of the raw figure: `p - corrected`.

Every interval comes from one cluster bootstrap over items, or over the clusters of
`analysis.cluster_by` (every epoch and every condition of an item drawn together, the gold
answers with them), 2,000 resamples by default: each resample recomputes `p`, `Se` and `Sp`, and
so the corrected accuracy, whose interval carries the uncertainty of the error rates as well as
that of `p` (the 2.5th and 97.5th percentiles). The raw interval comes from the same resamples
(it is the judged accuracy's own uncertainty, and says nothing of the judge's errors).

A rate (Se, Sp, agreement, gold's accuracy) is a Wilson interval at its effective number of
answers, `n / deff`: `deff` is the resamples' variance of the rate over the binomial variance
`r (1 - r) / n` (at least 1), so an item's answers, which share its difficulty and often its
text, count as what they are worth rather than as independent draws. The Wilson form keeps a
rate of 0 or 1 (no error seen among the gold answers) from a zero-width interval, which the
percentiles of the resamples would give; where a rate has no variance of its own, its `deff` is
the agreement's. `benchmarks/judge_calibration.py` measures the coverage of both forms against
the simulator's declared error rates (docs/judges.md).

Se and Sp are pooled over every condition: the correction assumes a judge errs alike on every
condition's answers.
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
    """A proportion `k / n` with its 95% interval: Wilson at the effective number of answers
    `n / design_effect` (1: the answers counted as independent)."""

    k: int
    n: int
    value: float | None
    low: float | None
    high: float | None
    design_effect: float = 1.0

    @classmethod
    def of(cls, k: int, n: int, design_effect: float = 1.0) -> Rate:
        if n == 0:
            return cls(k, n, None, None, None)
        low, high = wilson(k / n, n / max(1.0, design_effect))
        return cls(k, n, k / n, low, high, max(1.0, design_effect))


def wilson(rate: float, n: float, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of a proportion `rate` over `n` trials (`n` may be an
    effective, non-integer count; scipy's `binomtest` takes whole counts only)."""
    scale = 1.0 + z * z / n
    centre = (rate + z * z / (2 * n)) / scale
    half = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)


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
    """The rates with Wilson intervals that count every answer as independent (no clusters)."""
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
    """`judge`, `gold`: per answer 1.0 / 0.0 / NaN (no verdict); `cluster`: the answer's item,
    or its item's cluster (0..clusters-1, resampled together); `group`: its generate condition
    (0..groups-1)."""
    judged = ~np.isnan(judge)
    has_gold = ~np.isnan(gold)
    both = judged & has_gold
    clusters = int(cluster.max()) + 1 if cluster.size else 0
    j = np.nan_to_num(judge)
    g = np.nan_to_num(gold)

    def per_cluster(weights: np.ndarray) -> np.ndarray:
        return np.bincount(cluster, weights=weights, minlength=clusters)

    # Per cluster: gold counts (pooled), then per group the judged, passed, gold-passed and
    # gold counts.
    columns = [
        per_cluster((both & (j == 1) & (g == 1)).astype(float)),  # 0 true passes
        per_cluster((both & (g == 1)).astype(float)),  # 1 gold passes
        per_cluster((both & (j == 0) & (g == 0)).astype(float)),  # 2 true fails
        per_cluster((both & (g == 0)).astype(float)),  # 3 gold fails
    ]
    keys: list[int | None] = [None, *range(groups)]
    k = len(keys)
    mine_of = [judged if key is None else judged & (group == key) for key in keys]
    gold_of = [has_gold if key is None else has_gold & (group == key) for key in keys]
    columns += [per_cluster(m.astype(float)) for m in mine_of]
    columns += [per_cluster((m & (j == 1)).astype(float)) for m in mine_of]
    columns += [per_cluster((m & (g == 1)).astype(float)) for m in gold_of]
    columns += [per_cluster(m.astype(float)) for m in gold_of]
    counts = np.vstack(columns).T  # clusters x columns

    def estimates(totals: np.ndarray) -> dict[str, np.ndarray]:
        """Every figure per row of column totals (the rates, then raw, corrected and gold's
        accuracy per key)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            se = totals[:, 0] / totals[:, 1]
            sp = totals[:, 2] / totals[:, 3]
            agreement = (totals[:, 0] + totals[:, 2]) / (totals[:, 1] + totals[:, 3])
            n = totals[:, 4 : 4 + k]
            raw = totals[:, 4 + k : 4 + 2 * k] / n
            gold_rate = totals[:, 4 + 2 * k : 4 + 3 * k] / totals[:, 4 + 3 * k : 4 + 4 * k]
        return {
            "se": se,
            "sp": sp,
            "agreement": agreement,
            "raw": raw,
            "corrected": rogan_gladen(raw, se[:, None], sp[:, None]),
            "gold": gold_rate,
        }

    point = estimates(counts.sum(axis=0)[None, :])
    rng = np.random.default_rng(seed)
    chunks: list[dict[str, np.ndarray]] = []
    done = 0
    while done < resamples and clusters:
        size = min(_CHUNK, resamples - done)
        # Clusters drawn with replacement, as counts per cluster (a multinomial draw, 20x
        # quicker than `rng.multinomial` over many clusters).
        drawn = rng.integers(0, clusters, size=(size, clusters))
        drawn += np.arange(size)[:, None] * clusters
        weights = np.bincount(drawn.ravel(), minlength=size * clusters)
        chunks.append(estimates(weights.reshape(size, clusters) @ counts))
        done += size
    draws = {
        name: np.concatenate([c[name] for c in chunks])
        if chunks
        else np.empty((0, *point[name].shape[1:]))
        for name in point
    }

    both_j, both_g = j[both].astype(bool), g[both].astype(bool)
    agreement_k, agreement_n = int((both_j == both_g).sum()), int(both.sum())
    agreement_deff = design_effect(agreement_k, agreement_n, draws["agreement"])
    rates = ErrorRates(
        sensitivity=_rate(
            int((both_j & both_g).sum()), int(both_g.sum()), draws["se"], agreement_deff
        ),
        specificity=_rate(
            int((~both_j & ~both_g).sum()), int((~both_g).sum()), draws["sp"], agreement_deff
        ),
        agreement=Rate.of(agreement_k, agreement_n, agreement_deff or 1.0),
    )
    out = []
    for index, key in enumerate(keys):
        raw_value = _finite(point["raw"][0, index])
        corrected_value = _finite(point["corrected"][0, index])
        raw_draws, corr_draws = draws["raw"][:, index], draws["corrected"][:, index]
        here = gold_of[index]
        out.append(
            Corrected(
                group=key,
                judged=int(mine_of[index].sum()),
                raw=_estimate(raw_value, raw_draws),
                corrected=_estimate(corrected_value, corr_draws),
                bias=_estimate(
                    None
                    if raw_value is None or corrected_value is None
                    else raw_value - corrected_value,
                    raw_draws - corr_draws,
                ),
                gold=_rate(
                    int((g[here] == 1).sum()),
                    int(here.sum()),
                    draws["gold"][:, index],
                    agreement_deff,
                ),
            )
        )
    return Calibration(rates, out, resamples, seed)


def design_effect(k: int, n: int, draws: np.ndarray) -> float | None:
    """The resamples' variance of a rate `k / n` over its binomial variance (None where either
    is 0 or too few resamples are defined)."""
    finite = draws[np.isfinite(draws)]
    if n == 0 or k in (0, n) or finite.size < max(10, draws.size // 2):
        return None
    rate = k / n
    spread = float(np.var(finite, ddof=1))
    return spread / (rate * (1 - rate) / n) if spread > 0 else None


def _rate(k: int, n: int, draws: np.ndarray, fallback: float | None) -> Rate:
    """`k / n` with a Wilson interval at its effective number of answers: its own design effect,
    else `fallback` (the agreement's), else 1."""
    deff = design_effect(k, n, draws)
    return Rate.of(k, n, deff if deff is not None else fallback or 1.0)


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
