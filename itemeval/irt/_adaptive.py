"""Adaptive testing on a calibrated bank: choose the next items, estimate the ability, predict
the full-benchmark accuracy, decide when to stop (docs/irt.md).

The bank is the 2PL calibration of other conditions (`Bank`: per item a discrimination `a`, an
intercept `d`, a stratum such as its dataset or subject). A run answers items shard by shard:

* `draw` (and `choose`) picks the next shard: each stratum gets its share of the answered
  items (largest deficit first), and within a stratum the items are drawn at random, seeded,
  one after another, each with probability proportional to the information it carries at the
  current ability (`draw_weights`: sqrt p (1 - p), mixed with a uniform `FLOOR`), and each
  draw's probability is kept.
* `estimate` gives the ability (MAP, prior N(0, 1) on the calibration's scale) and the
  predicted accuracy on the whole bank: the 2PL probabilities of all items plus, per stratum,
  the residual total estimated from the drawn items, each residual weighted by its draw
  probability (Des Raj's estimator for sequential draws: unbiased whatever the weights and
  however the 2PL model misfits), with its design-based standard error.
* `Adaptive.done` stops at the target standard error of the predicted accuracy (once every
  stratum has `MIN_DRAWS` answered items) or at the largest share of items.

When the calibration is too thin (`MIN_CALIBRATION` conditions) `Bank.usable` is False: the run
takes a stratified random sample instead and reports the sample's accuracy with an ordinary
interval (`stratified_estimate`), never an IRT prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Fewer calibrating conditions than this and the bank is not used (docs/irt.md: with 3, 4 and 5
#: the prediction's intervals hold as often as with 9, benchmarks/adaptive.py --thin 3 4 5).
MIN_CALIBRATION = 3
#: The target standard error stops a run only once every stratum has this many answered items.
MIN_DRAWS = 5
#: The uniform part of the draw weights (`draw_weights`); measured in benchmarks/adaptive.py.
FLOOR = 0.5
#: What the draw weights grow with ("1pl": sqrt p(1-p); "2pl": |a| sqrt p(1-p)).
WEIGHT = "1pl"
Z95 = 1.959963984540054


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@dataclass(frozen=True)
class Bank:
    a: np.ndarray  # discrimination per item
    d: np.ndarray  # intercept per item (logit = a * theta + d)
    strata: np.ndarray  # stratum code per item (dataset or subject)
    calibrated_by: int  # conditions the parameters came from
    min_calibration: int = MIN_CALIBRATION

    @property
    def size(self) -> int:
        return len(self.a)

    @property
    def usable(self) -> bool:
        """Whether the parameters can support a prediction (see the module doc)."""
        return self.calibrated_by >= self.min_calibration


@dataclass(frozen=True)
class Estimate:
    ability: float
    ability_se: float
    predicted: float  # predicted accuracy on the whole bank (a prediction, not a measurement)
    predicted_se: float
    answered: int
    method: str  # "irt" | "stratified sample"

    @property
    def interval(self) -> tuple[float, float]:
        half = Z95 * self.predicted_se
        return max(0.0, self.predicted - half), min(1.0, self.predicted + half)


def ability_map(
    a: np.ndarray, d: np.ndarray, correct: np.ndarray, trials: np.ndarray, iterations: int = 30
) -> tuple[float, float]:
    """MAP ability (prior N(0, 1)) from answered items' counts, and its standard error."""
    theta = 0.0
    for _ in range(iterations):
        p = _sigmoid(a * theta + d)
        gradient = float(a @ (correct - trials * p)) - theta
        information = float((a * a) @ (trials * p * (1 - p))) + 1.0
        step = float(np.clip(gradient / information, -1.0, 1.0))
        theta += step
        if abs(step) < 1e-6:
            break
    p = _sigmoid(a * theta + d)
    return theta, 1.0 / np.sqrt(float((a * a) @ (trials * p * (1 - p))) + 1.0)


def _quotas(strata: np.ndarray, answered: np.ndarray, free: np.ndarray, count: int) -> np.ndarray:
    """Items per stratum for the next `count`: each stratum's share of the answered items plus
    the shard, largest deficit first, never more than a stratum has left."""
    sizes = np.bincount(strata)
    taken = np.bincount(strata[answered], minlength=len(sizes)).astype(np.float64)
    want = sizes / sizes.sum() * (answered.sum() + count) - taken
    quota = np.zeros(len(sizes), dtype=np.int64)
    left = np.bincount(strata[free], minlength=len(sizes))
    for _ in range(count):
        open_ = np.flatnonzero(quota < left)
        if not len(open_):
            break
        s = open_[np.argmax(want[open_] - quota[open_])]
        quota[s] += 1
    return quota


def draw_weights(bank: Bank, theta: float, floor: float, weight: str = WEIGHT) -> np.ndarray:
    """Each item's weight for the draw, from the information it carries at `theta`: the square
    root of p (1 - p) (weight "1pl": the item's information under the 1PL, and the standard
    deviation of its residual when the model holds, which is what the estimator's variance
    grows with) or of a^2 p (1 - p) (weight "2pl": its Fisher information under the 2PL).
    Scaled to mean 1 within its stratum and mixed with a uniform `floor` (1.0: uniform), so no
    item's chance falls below `floor` times the uniform one."""
    if floor >= 1.0:
        return np.ones(bank.size)
    p = _sigmoid(bank.a * theta + bank.d)
    g = np.sqrt(p * (1 - p)) + 1e-12
    if weight == "2pl":
        g = g * np.abs(bank.a)
    mean = np.bincount(bank.strata, weights=g) / np.maximum(np.bincount(bank.strata), 1)
    return floor + (1.0 - floor) * g / mean[bank.strata]


def draw(
    bank: Bank,
    taken: np.ndarray,
    theta: float,
    count: int,
    rng: np.random.Generator,
    floor: float = FLOOR,
    weight: str = WEIGHT,
) -> tuple[np.ndarray, np.ndarray]:
    """The next `count` items, in the order drawn, and each one's draw probability.

    Strata get their quotas (`_quotas`); within a stratum the items are drawn one after another
    without replacement, each with probability proportional to its weight (`draw_weights`)
    among the stratum's items not yet drawn. The sequential draw is done at once with
    exponential keys (Efraimidis-Spirakis: the items sorted by u^(1/w) are a successive
    weighted draw), so a shard of a 20,000-item bank takes a few milliseconds."""
    free = ~taken
    if not free.any() or count <= 0:
        return np.array([], dtype=np.int64), np.array([])
    strata = bank.strata
    quota = _quotas(strata, taken, free, count)
    weights = draw_weights(bank, theta, floor, weight)
    key = np.log(rng.random(bank.size)) / weights  # larger first
    key[taken] = -np.inf
    order = np.lexsort((-key, strata))  # by stratum, then by key (descending)
    ranked = order[free[order]]
    starts = np.searchsorted(strata[ranked], np.arange(len(quota)))
    items, probs = [], []
    for s in np.flatnonzero(quota):
        chosen = ranked[starts[s] : starts[s] + quota[s]]
        pool = float(weights[free & (strata == s)].sum())
        before = np.concatenate([[0.0], np.cumsum(weights[chosen])[:-1]])
        items.append(chosen)
        probs.append(weights[chosen] / (pool - before))
    return np.concatenate(items), np.concatenate(probs)


def choose(
    bank: Bank,
    answered: np.ndarray,
    theta: float,
    count: int,
    rng: np.random.Generator,
    *,
    floor: float = FLOOR,
    weight: str = WEIGHT,
) -> np.ndarray:
    """The next `count` items (indices), stratified and drawn by `draw_weights` (see `draw`)."""
    return draw(bank, answered, theta, count, rng, floor, weight)[0]


def estimate(
    bank: Bank,
    answered: np.ndarray,
    correct: np.ndarray,
    trials: np.ndarray,
    rank: np.ndarray,
    prob: np.ndarray,
) -> Estimate:
    """Ability and predicted whole-bank accuracy from the answered items (counts per item).

    `rank` is each answered item's place in the sequence of draws, `prob` its draw probability
    among its stratum's items not drawn before it. Per stratum, with the residuals
    e = answer - p(theta) of the answered items in the order drawn, draw j gives
    t_j = (sum of e of the items drawn before it) + e_j / prob_j, an unbiased estimate of the
    stratum's total residual whatever the earlier draws were (Des Raj's estimator for sequential
    draws with changing probabilities); their mean is too, and the spread of the t_j gives its
    standard error (sum (t_j - mean)^2 / (m (m - 1)): the t_j are uncorrelated). The prediction
    is sum over all items of p(theta) plus the strata's estimated residual totals, over N."""
    idx = np.flatnonzero(answered)
    n = len(bank.a)
    theta, theta_se = ability_map(bank.a[idx], bank.d[idx], correct[idx], trials[idx])
    p = _sigmoid(bank.a * theta + bank.d)
    strata = bank.strata
    groups = len(np.bincount(strata))
    total = float(p.sum())
    variance = 0.0
    by_stratum = idx[np.lexsort((rank[idx], strata[idx]))]
    starts = np.searchsorted(strata[by_stratum], np.arange(groups + 1))
    free = ~answered
    slope = 0.0
    for s in range(groups):
        got = by_stratum[starts[s] : starts[s + 1]]
        residual = correct[got] / np.maximum(trials[got], 1) - p[got]
        if len(got):
            t = np.concatenate([[0.0], np.cumsum(residual)[:-1]]) + residual / prob[got]
            total += float(t.mean())
        if len(got) >= 2:
            variance += float(t.var(ddof=1)) / len(got)
        else:  # no spread to measure: the model's own variance of the items not answered
            rest = free & (strata == s)
            variance += float((p * (1 - p))[rest].sum())
            slope += float((bank.a * p * (1 - p))[rest].sum())
    variance = variance / n**2 + (slope * theta_se / n) ** 2
    predicted = min(1.0, max(0.0, total / n))
    return Estimate(theta, theta_se, predicted, float(np.sqrt(variance)), len(idx), "irt")


def stratified_sample(bank: Bank, share: float, rng: np.random.Generator) -> np.ndarray:
    """The fallback's items: `share` of each stratum, at random (seeded)."""
    chosen = []
    for s in np.unique(bank.strata):
        members = np.flatnonzero(bank.strata == s)
        take = max(1, round(share * len(members)))
        chosen.append(rng.choice(members, take, replace=False))
    return np.sort(np.concatenate(chosen))


def stratified_estimate(
    strata: np.ndarray, answered: np.ndarray, correct: np.ndarray, trials: np.ndarray
) -> Estimate:
    """The fallback's result: the stratified sample's accuracy, each stratum weighted by its
    size, with the ordinary (finite-population) standard error."""
    n = len(strata)
    mean = 0.0
    variance = 0.0
    for s in np.unique(strata):
        members = strata == s
        got = members & answered
        size, m = int(members.sum()), int(got.sum())
        if m == 0:
            continue
        rate = correct[got] / np.maximum(trials[got], 1)
        weight = size / n
        mean += weight * float(rate.mean())
        if m > 1:
            variance += weight**2 * float(rate.var(ddof=1)) / m * (1 - m / size)
    return Estimate(
        float("nan"), float("nan"), mean, float(np.sqrt(variance)), int(answered.sum()), "sample"
    )


@dataclass
class Adaptive:
    """One adaptive run over a bank: `next_shard`, then `record` the answers, until `done`."""

    bank: Bank
    target_se: float = 0.03
    max_share: float = 0.2
    shard_size: int = 20
    floor: float = FLOOR  # the uniform part of the draw weights (1.0: uniform within strata)
    weight: str = WEIGHT  # "1pl" | "2pl" (`draw_weights`)
    seed: int = 0
    answered: np.ndarray = field(init=False)
    correct: np.ndarray = field(init=False)
    trials: np.ndarray = field(init=False)
    theta: float = 0.0
    last: Estimate | None = None

    def __post_init__(self) -> None:
        n = self.bank.size
        self.answered = np.zeros(n, dtype=bool)
        self.correct = np.zeros(n)
        self.trials = np.zeros(n)
        self.drawn = np.zeros(n, dtype=bool)  # drawn for the estimator (answered or not)
        self.rank = np.zeros(n, dtype=np.int64)  # place in the sequence of draws
        self.prob = np.ones(n)  # draw probability among the stratum's undrawn items
        self.rng = np.random.default_rng(self.seed)

    @property
    def budget(self) -> int:
        return max(1, int(self.max_share * self.bank.size))

    def next_shard(self) -> np.ndarray:
        room = self.budget - int(self.answered.sum())
        if room <= 0:
            return np.array([], dtype=np.int64)
        if not self.bank.usable:  # the whole stratified sample at once
            chosen = stratified_sample(self.bank, self.max_share, self.rng)
            return chosen[~self.answered[chosen]]
        count = min(self.shard_size, room)
        items, probs = draw(
            self.bank, self.drawn, self.theta, count, self.rng, self.floor, self.weight
        )
        self.rank[items] = int(self.drawn.sum()) + np.arange(len(items))
        self.prob[items] = probs
        self.drawn[items] = True
        return items

    def record(self, items: np.ndarray, correct: np.ndarray, trials: np.ndarray) -> Estimate:
        self.answered[items] = True
        self.correct[items] += correct
        self.trials[items] += trials
        if self.bank.usable:
            self.last = estimate(
                self.bank, self.answered, self.correct, self.trials, self.rank, self.prob
            )
            self.theta = self.last.ability
        else:
            self.last = stratified_estimate(
                self.bank.strata, self.answered, self.correct, self.trials
            )
        return self.last

    @property
    def done(self) -> bool:
        if self.answered.sum() >= self.budget:
            return True
        if not self.bank.usable:
            return self.last is not None
        if self.last is None or self.last.predicted_se > self.target_se:
            return False
        # a standard error from a handful of draws is itself too uncertain to stop on
        sizes = np.bincount(self.bank.strata)
        got = np.bincount(self.bank.strata[self.answered], minlength=len(sizes))
        return bool((got >= np.minimum(sizes, MIN_DRAWS)).all())
