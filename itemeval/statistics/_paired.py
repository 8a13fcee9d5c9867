"""Paired comparisons of every pair of units in a family, from one shared bootstrap.

For units A and B, over the clusters both have graded answers in (`Tallies`):

* the difference d = S_A / N_A - S_B / N_B (sums of scores over graded answers);
* a 95% interval from a *paired* bootstrap: each resample draws clusters with replacement and
  the same draw weighs both units, so what the two have in common (an item's difficulty) cancels
  in the difference instead of widening it; epochs (and pooled conditions) stay with their
  cluster. The interval is the central 95% of the resampled differences (percentile), widened
  around d by sqrt(G / (G - 1)) t_(G-1) / z for the G clusters it rests on
  (`small_sample_factors`: 1.5% at 116 clusters, 44% at 6, where a bootstrap of few clusters is
  too narrow);
* no comparison at all when the two share no cluster (conditions on two benchmarks' items):
  such a pair is left out of the family's pairs and of the adjustment;
* a p-value: the exact McNemar test when each cluster is one item with one binary answer per
  unit (b = items A got right and B wrong, c = the reverse; p = P(|X - n/2| >= |b - n/2|) for
  X ~ Binomial(b + c, 1/2)); otherwise a paired t-test on clusters with a cluster-robust standard
  error: z_c = (s_Ac - p_A n_Ac) / mean(n_A) - (s_Bc - p_B n_Bc) / mean(n_B),
  SE(d)^2 = sum z_c^2 / (n (n - 1)), t = d / SE with n - 1 degrees of freedom (with one answer
  per cluster this is the ordinary paired t-test on per-item differences).

The same resamples give each unit's own interval and its rank in each resample, whose central
95% is the unit's rank interval. Resamples are drawn in chunks (weights = how often each cluster
was drawn, one `np.bincount`), and every unit's resampled sums are one matrix product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from itemeval.statistics._intervals import distinct_rows
from itemeval.statistics._multiplicity import adjust, tiers
from itemeval.statistics._tallies import Tallies

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95
DEFAULT_ALPHA = 0.05
#: Bootstrap weights held at once (resamples x clusters): bounds memory to ~32 MB of float64.
_CHUNK_CELLS = 4_000_000

MCNEMAR = "mcnemar_exact"
PAIRED_T = "paired_t_cluster"


@dataclass(frozen=True)
class PairComparison:
    """Unit `first` minus unit `second` (positions in the family's units)."""

    first: int
    second: int
    first_value: float  # over the clusters both graded
    second_value: float
    difference: float
    low: float
    high: float
    se: float  # cluster-robust analytic standard error of the difference
    p_value: float
    test: str  # MCNEMAR | PAIRED_T
    clusters: int  # clusters both graded
    first_answers: int
    second_answers: int
    adjusted: float = math.nan
    discordant: tuple[int, int] | None = None  # McNemar's (b, c)

    def real(self, alpha: float = DEFAULT_ALPHA) -> bool:
        return not math.isnan(self.adjusted) and self.adjusted < alpha


@dataclass(frozen=True)
class Family:
    """Every pair of a family's units compared, and what the comparisons support instead of
    bare ranks: a rank interval and a tier per unit."""

    units: list[str]
    estimates: np.ndarray  # per unit, over its own graded clusters
    lows: np.ndarray  # per unit: percentile interval from the same resamples
    highs: np.ndarray
    rank_low: np.ndarray  # per unit: central `confidence` share of its resampled ranks
    rank_high: np.ndarray
    tiers: list[int]
    pairs: list[PairComparison]
    clusters: np.ndarray  # per unit: clusters graded
    answers: np.ndarray  # per unit: graded answers
    adjustment: str = "holm"
    alpha: float = DEFAULT_ALPHA
    confidence: float = DEFAULT_CONFIDENCE
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    notes: list[str] = field(default_factory=list)

    def pair(self, a: int, b: int) -> PairComparison | None:
        for p in self.pairs:
            if (p.first, p.second) in ((a, b), (b, a)):
                return p
        return None

    def real(self) -> list[PairComparison]:
        return [p for p in self.pairs if p.real(self.alpha)]


def cluster_weights(rng: np.random.Generator, clusters: int, rows: int) -> np.ndarray:
    """(rows, clusters) float64: how many times each cluster was drawn in each of `rows`
    resamples of `clusters` draws with replacement."""
    draws = rng.integers(0, clusters, size=(rows, clusters), dtype=np.int64)
    draws += (np.arange(rows, dtype=np.int64) * clusters)[:, None]
    counted = np.bincount(draws.ravel(), minlength=rows * clusters)
    return counted.reshape(rows, clusters).astype(np.float64)


@dataclass
class _Resampler:
    """Cluster-bootstrap weights over the rows of `base` (a row per cluster: each unit's sums,
    then its counts). Clusters with the same row are interchangeable in every sum, so when few
    rows are distinct (scores of 0 or 1 and a few epochs: at most a few dozen patterns,
    whatever the number of items) a resample is how many draws land on each distinct row, a
    multinomial over them: the same distribution as drawing clusters, at O(patterns) a
    resample instead of O(clusters). Otherwise clusters are drawn (`cluster_weights`)."""

    rng: np.random.Generator
    rows: np.ndarray  # (distinct rows or clusters, 2 * units)
    clusters: int
    shares: np.ndarray | None  # per distinct row: its clusters / all (None: clusters drawn)
    of_cluster: np.ndarray | None  # per cluster: its distinct row

    @classmethod
    def of(cls, base: np.ndarray, rng: np.random.Generator) -> _Resampler:
        n = base.shape[0]
        distinct, of_cluster, counts = distinct_rows(base)
        if len(distinct) * 4 > n:  # mostly distinct: draw the clusters themselves
            return cls(rng, base, n, None, None)
        return cls(rng, distinct, n, counts / n, of_cluster.reshape(-1))

    @property
    def width(self) -> int:
        return self.rows.shape[0]

    def weights(self, rows: int) -> np.ndarray:
        """(rows, width): how often each row is drawn in each of `rows` resamples."""
        if self.shares is None:
            return cluster_weights(self.rng, self.clusters, rows)
        return self.rng.multinomial(self.clusters, self.shares, size=rows).astype(np.float64)

    def inside(self, clusters: np.ndarray) -> np.ndarray:
        """Which rows stand for `clusters` (cluster indices): a mask, or the indices."""
        if self.of_cluster is None:
            return clusters
        mask = np.zeros(self.width, dtype=bool)
        mask[self.of_cluster[clusters]] = True
        return mask


def compare(
    tallies: Tallies,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
    adjustment: str = "holm",
    alpha: float = DEFAULT_ALPHA,
) -> Family:
    """Every pair of `tallies`' units compared (see the module doc)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")
    k = len(tallies.units)
    n = tallies.clusters
    graded = tallies.graded
    estimates = tallies.estimates()
    pairs_index = [(a, b) for a in range(k) for b in range(a + 1, k)]
    # A pair whose units graded exactly the same clusters is "aligned": its difference is the
    # difference of the units' own estimates, in the resamples too. Any other pair is compared
    # over the clusters both graded (its mask): each unit is summed once per distinct mask,
    # over that mask's rows only, so a study under way (masks nested as items get done) costs
    # a few more products, not one per pair.
    aligned = [bool(np.array_equal(graded[:, a], graded[:, b])) for a, b in pairs_index]
    mask_ids: dict[bytes, int] = {}
    groups: list[tuple[np.ndarray, list[int]]] = []  # (rows of the mask, units summed there)
    pair_group: dict[int, int] = {}
    for i, (a, b) in enumerate(pairs_index):
        if aligned[i]:
            continue
        both = graded[:, a] & graded[:, b]
        key = np.packbits(both).tobytes()
        if key not in mask_ids:
            mask_ids[key] = len(groups)
            groups.append((np.flatnonzero(both), []))
        g = mask_ids[key]
        pair_group[i] = g
        for u in (a, b):  # a unit that graded exactly the mask uses its own resamples
            if u not in groups[g][1] and not np.array_equal(graded[:, u], both):
                groups[g][1].append(u)
    base = np.concatenate([tallies.sums, tallies.counts], axis=1)

    means = np.full((resamples, k), np.nan)
    group_means = [np.full((resamples, len(units)), np.nan) for _, units in groups]
    if n > 0:
        rng = np.random.default_rng(seed)
        resample = _Resampler.of(base, rng)
        del base  # kept by the resampler only when its rows are mostly distinct
        chunk = max(1, _CHUNK_CELLS // max(1, resample.width))
        for start in range(0, resamples, chunk):
            rows = min(chunk, resamples - start)
            weights = resample.weights(rows)
            weighted = weights @ resample.rows
            with np.errstate(invalid="ignore", divide="ignore"):
                means[start : start + rows] = weighted[:, :k] / weighted[:, k:]
                for (where, units), out in zip(groups, group_means, strict=True):
                    if not units:
                        continue
                    inside = resample.inside(where)
                    columns = [*units, *(k + u for u in units)]
                    summed = weights[:, inside] @ resample.rows[inside][:, columns]
                    width = len(units)
                    out[start : start + rows] = summed[:, :width] / summed[:, width:]
    tail = (1.0 - confidence) / 2
    lows, highs = _quantiles(means, tail)
    rank_low, rank_high = _rank_intervals(means, tail)

    residuals, gram = _residuals(tallies, estimates)
    diffs = np.empty((resamples, len(pairs_index)))
    values = np.full((len(pairs_index), 2), np.nan)
    for i, (a, b) in enumerate(pairs_index):
        if aligned[i]:
            values[i] = estimates[a], estimates[b]
            diffs[:, i] = means[:, a] - means[:, b]
        else:
            where, units = groups[pair_group[i]]
            values[i] = _ratio(tallies, a, where), _ratio(tallies, b, where)
            out = group_means[pair_group[i]]
            first = out[:, units.index(a)] if a in units else means[:, a]
            second = out[:, units.index(b)] if b in units else means[:, b]
            diffs[:, i] = first - second
    pair_lows, pair_highs = _quantiles(diffs, tail)
    tests = [
        _test(tallies, a, b, values[i, 0], values[i, 1], residuals, gram)
        for i, (a, b) in enumerate(pairs_index)
    ]
    # Widen by the small-sample factor of the clusters each interval rests on.
    own = small_sample_factors(graded.sum(axis=0), confidence)
    lows, highs = _widen(estimates, lows, highs, own)
    factors = small_sample_factors(np.array([t.common for t in tests]), confidence)
    pair_lows, pair_highs = _widen(values[:, 0] - values[:, 1], pair_lows, pair_highs, factors)
    p_values = _t_p_values(tests)
    comparisons = []
    compared = [i for i, test in enumerate(tests) if test.common > 0]
    for i in compared:  # units that share no cluster (two benchmarks' items) are no pair
        a, b = pairs_index[i]
        va, vb = float(values[i, 0]), float(values[i, 1])
        test = tests[i]
        comparisons.append(
            PairComparison(
                first=a,
                second=b,
                first_value=va,
                second_value=vb,
                difference=va - vb,
                low=float(pair_lows[i]),
                high=float(pair_highs[i]),
                se=test.se,
                p_value=float(p_values[i]),
                test=test.name,
                clusters=test.common,
                first_answers=test.first_answers,
                second_answers=test.second_answers,
                discordant=test.discordant,
            )
        )
    p_values = p_values[compared]
    adjusted = adjust(p_values, adjustment) if len(p_values) else np.empty(0)
    comparisons = [_with_adjusted(c, float(q)) for c, q in zip(comparisons, adjusted, strict=True)]
    by_pair = {(c.first, c.second): c.adjusted for c in comparisons}
    return Family(
        units=list(tallies.units),
        estimates=estimates,
        lows=lows,
        highs=highs,
        rank_low=rank_low,
        rank_high=rank_high,
        tiers=tiers(estimates, by_pair, alpha),
        pairs=comparisons,
        clusters=graded.sum(axis=0),
        answers=tallies.counts.sum(axis=0).astype(np.int64),
        adjustment=adjustment,
        alpha=alpha,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )


def small_sample_factors(
    clusters: np.ndarray, confidence: float = DEFAULT_CONFIDENCE
) -> np.ndarray:
    """How much a percentile interval over G clusters is widened around its estimate:
    sqrt(G / (G - 1)) t_(G-1) / z, the small-sample inflation of a t interval over a normal one
    (1.015 at 116 clusters, 1.44 at 6): the bootstrap of few clusters is too narrow otherwise.
    1 for fewer than 2 clusters."""
    g = np.asarray(clusters, dtype=np.float64)
    out = np.ones(g.shape)
    several = g >= 2
    if several.any():
        from scipy.special import ndtri, stdtrit  # lazy; `scipy.stats` costs 2 s more

        q = 1 - (1 - confidence) / 2
        dof = g[several] - 1
        out[several] = np.sqrt(g[several] / dof) * stdtrit(dof, q) / ndtri(q)
    return out


def _widen(
    centre: np.ndarray, lows: np.ndarray, highs: np.ndarray, factor: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    return centre - factor * (centre - lows), centre + factor * (highs - centre)


def _with_adjusted(c: PairComparison, adjusted: float) -> PairComparison:
    from dataclasses import replace

    return replace(c, adjusted=adjusted)


def _quantiles(values: np.ndarray, tail: float) -> tuple[np.ndarray, np.ndarray]:
    """Per column: the `tail` and 1 - `tail` quantiles over the finite rows (NaN if none)."""
    k = values.shape[1]
    lows, highs = np.full(k, np.nan), np.full(k, np.nan)
    finite = np.isfinite(values)
    if finite.all() and len(values):
        q = np.quantile(values, [tail, 1 - tail], axis=0)
        return q[0], q[1]
    for j in range(k):
        column = values[finite[:, j], j]
        if len(column):
            lows[j], highs[j] = np.quantile(column, [tail, 1 - tail])
    return lows, highs


def _rank_intervals(means: np.ndarray, tail: float) -> tuple[np.ndarray, np.ndarray]:
    """Per unit: the central share of its ranks over the resamples (1 = best; tied units share
    the better rank; a unit without a value in a resample ranks last there)."""
    k = means.shape[1]
    if k == 0 or len(means) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    filled = np.where(np.isnan(means), -np.inf, means)
    ranks = 1 + (filled[:, None, :] > filled[:, :, None]).sum(axis=2)
    q = np.quantile(ranks, [tail, 1 - tail], axis=0, method="inverted_cdf")
    return q[0].astype(np.int64), q[1].astype(np.int64)


def _ratio(tallies: Tallies, unit: int, rows: np.ndarray) -> float:
    total = tallies.counts[rows, unit].sum()
    return float(tallies.sums[rows, unit].sum() / total) if total > 0 else math.nan


def _residuals(tallies: Tallies, estimates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cluster and unit: the unit's linearised contribution to its own estimate,
    (s_c - p n_c) / mean(n), and their Gram matrix (the paired variances of aligned pairs)."""
    n = tallies.clusters
    if n == 0:
        k = len(tallies.units)
        return np.zeros((0, k)), np.zeros((k, k))
    mean_counts = tallies.counts.sum(axis=0) / n
    safe = np.where(mean_counts > 0, mean_counts, 1.0)
    p = np.nan_to_num(estimates)
    # In place, the same operations: two fewer (clusters, units) arrays at the peak.
    residuals = p * tallies.counts
    np.subtract(tallies.sums, residuals, out=residuals)
    residuals /= safe
    return residuals, residuals.T @ residuals


@dataclass(frozen=True)
class _Test:
    name: str
    common: int
    first_answers: int
    second_answers: int
    difference: float
    se: float
    p_value: float = math.nan  # set for McNemar (and the degenerate cases); t-tests later
    discordant: tuple[int, int] | None = None


def _test(
    tallies: Tallies,
    a: int,
    b: int,
    va: float,
    vb: float,
    residuals: np.ndarray,
    gram: np.ndarray,
) -> _Test:
    """The test of one pair: McNemar's p-value now, a t-test's statistic for `_t_p_values`."""
    if tallies.counts[:, a].all() and tallies.counts[:, b].all():
        both: np.ndarray | slice = slice(None)
        common = tallies.clusters
    else:
        both = (tallies.counts[:, a] > 0) & (tallies.counts[:, b] > 0)
        common = int(both.sum())
    ca, cb = tallies.counts[both, a], tallies.counts[both, b]
    first_answers, second_answers = int(ca.sum()), int(cb.sum())
    difference = va - vb
    if common == 0:
        return _Test(PAIRED_T, 0, 0, 0, math.nan, math.nan)
    if common < 2:
        se = math.nan
    elif common == tallies.clusters:  # every cluster graded by both: the Gram matrix
        total = gram[a, a] + gram[b, b] - 2 * gram[a, b]
        se = math.sqrt(max(0.0, total) / (common * (common - 1)))
    else:
        za = (tallies.sums[both, a] - va * ca) / (first_answers / common)
        zb = (tallies.sums[both, b] - vb * cb) / (second_answers / common)
        se = math.sqrt(float(np.sum((za - zb) ** 2)) / (common * (common - 1)))
    counts = (first_answers, second_answers, difference, se)
    if tallies.binary and tallies.item_clusters and first_answers == second_answers == common:
        first, second = tallies.sums[both, a], tallies.sums[both, b]
        b_count, c_count = int(np.sum(first > second)), int(np.sum(second > first))
        p = mcnemar_exact(b_count, c_count)
        return _Test(MCNEMAR, common, *counts, p_value=p, discordant=(b_count, c_count))
    if not math.isfinite(se):
        return _Test(PAIRED_T, common, *counts)
    if se == 0:
        return _Test(PAIRED_T, common, *counts, p_value=1.0 if difference == 0 else 0.0)
    return _Test(PAIRED_T, common, *counts)


def _t_p_values(tests: list[_Test]) -> np.ndarray:
    """Every pair's p-value: McNemar's as computed, two-sided t-tests on n - 1 degrees of
    freedom in one vectorised call."""
    p = np.array([t.p_value for t in tests], dtype=np.float64)
    todo = [
        i
        for i, t in enumerate(tests)
        if t.name == PAIRED_T and math.isnan(t.p_value) and math.isfinite(t.se) and t.se > 0
    ]
    if todo:
        from scipy.special import stdtr  # Student's t distribution; lazy, as above

        stat = np.array([abs(tests[i].difference) / tests[i].se for i in todo])
        dof = np.array([tests[i].common - 1 for i in todo], dtype=np.float64)
        p[todo] = np.minimum(1.0, 2 * stdtr(dof, -stat))
    return p


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value: the binomial test of b successes in b + c trials at
    1/2 (scipy's binomial distribution function); 1 when no pair is discordant."""
    trials = only_first + only_second
    if trials == 0:
        return 1.0
    # lazy, and `scipy.special` rather than `scipy.stats`: importing the latter took `status`
    # 2 s more on a loaded machine (0.6 s for `scipy.special` beside numpy)
    from scipy.special import bdtr

    # Binomial(n, 1/2) is symmetric: the two-sided p-value is twice the smaller tail
    # (what scipy's binomtest returns).
    return float(min(1.0, 2 * bdtr(min(only_first, only_second), trials, 0.5)))
