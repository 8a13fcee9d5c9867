"""Adaptive testing on a calibrated bank: choose the next items, estimate the ability, predict
the full-benchmark accuracy, decide when to stop (docs/irt.md).

The bank is the 2PL calibration of other conditions (`Bank`: per item a discrimination `a`, an
intercept `d`, a stratum such as its dataset or subject). A run answers items shard by shard:

* `choose` picks the next shard: each stratum gets its share of the answered items (largest
  deficit first), and within a stratum the unanswered items with the most Fisher information
  a^2 p (1 - p) at the current ability; ties and near-ties are broken by a seeded shuffle.
  The share `at_random` of each shard is instead drawn at random within the strata: 1.0 by
  default, because on banks the 2PL model does not fit exactly (benchmarks/adaptive.py) the
  most informative items sharpen the ability but bias the prediction of the other items.
* `estimate` gives the ability (MAP, prior N(0, 1) on the calibration's scale) and the
  predicted accuracy on the whole bank: the answers given, plus, for every item not answered,
  its 2PL probability shifted by its stratum's mean residual on the randomly drawn items (a
  difference estimator: the correction is unbiased by design, so a per-subject skill or a
  guessing floor the 2PL model misses does not bias the prediction), with a standard error
  from the residuals' spread and the unanswered items' own variance.
* `Adaptive.done` stops at the target standard error of the predicted accuracy or at the
  largest share of items.

When the calibration is too thin (`MIN_CALIBRATION` conditions) `Bank.usable` is False: the run
takes a stratified random sample instead and reports the sample's accuracy with an ordinary
interval (`stratified_estimate`), never an IRT prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: Fewer calibrating conditions than this and the bank's parameters are not trusted.
MIN_CALIBRATION = 5
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


def choose(
    bank: Bank,
    answered: np.ndarray,
    theta: float,
    count: int,
    rng: np.random.Generator,
    *,
    at_random: bool = False,
) -> np.ndarray:
    """The next `count` items (indices): strata by deficit, most informative first (or, with
    `at_random`, at random within each stratum)."""
    free = ~answered
    if not free.any():
        return np.array([], dtype=np.int64)
    strata = bank.strata
    sizes = np.bincount(strata)
    taken = np.bincount(strata[answered], minlength=len(sizes)).astype(np.float64)
    total = answered.sum() + count
    want = sizes / sizes.sum() * total - taken  # each stratum's share of the new total
    quota = np.zeros(len(sizes), dtype=np.int64)
    left = np.bincount(strata[free], minlength=len(sizes))
    for _ in range(count):
        open_ = np.flatnonzero(quota < left)
        if not len(open_):
            break
        s = open_[np.argmax(want[open_] - quota[open_])]
        quota[s] += 1
    if at_random:
        info = rng.random(len(bank.a))
    else:
        p = _sigmoid(bank.a * theta + bank.d)
        info = bank.a * bank.a * p * (1 - p)
        info = info * (1.0 + 1e-3 * rng.random(len(info)))  # seeded tie-breaking
    info[answered] = -np.inf
    chosen = []
    order = np.argsort(-info, kind="stable")
    by_stratum = strata[order]
    for s in np.flatnonzero(quota):
        chosen.append(order[by_stratum == s][: quota[s]])
    return np.concatenate(chosen) if chosen else np.array([], dtype=np.int64)


def estimate(
    bank: Bank,
    answered: np.ndarray,
    correct: np.ndarray,
    trials: np.ndarray,
    sampled: np.ndarray | None = None,
) -> Estimate:
    """Ability and predicted whole-bank accuracy from the answered items (counts per item).

    `sampled` marks the answered items that were drawn at random within their stratum: their
    residuals (answer - 2PL probability) correct the prediction of the items not answered, per
    stratum (a difference estimator: unbiased by design even where the 2PL model misfits)."""
    idx = np.flatnonzero(answered)
    n = len(bank.a)
    sampled = answered if sampled is None else sampled & answered
    theta, theta_se = ability_map(bank.a[idx], bank.d[idx], correct[idx], trials[idx])
    p = _sigmoid(bank.a * theta + bank.d)
    observed = np.where(answered, correct / np.maximum(trials, 1), 0.0)
    residual = np.where(sampled, observed - p, 0.0)
    strata = bank.strata
    k = np.bincount(strata, weights=sampled.astype(np.float64), minlength=strata.max() + 1)
    mean_residual = np.bincount(strata, weights=residual, minlength=len(k)) / np.maximum(k, 1)
    free = ~answered
    expected = p + mean_residual[strata]
    predicted = (observed[answered].sum() + expected[free].sum()) / n
    # uncertainty: the strata's corrections (sampling), the ability, the unanswered answers
    spread = np.bincount(
        strata, weights=(residual - mean_residual[strata]) ** 2 * sampled, minlength=len(k)
    )
    correction_var = spread / np.maximum(k - 1, 1) / np.maximum(k, 1)
    free_per_stratum = np.bincount(strata[free], minlength=len(k))
    slope = float((bank.a * p * (1 - p))[free].sum()) / n
    expected = np.clip(expected, 0.0, 1.0)
    variance = (
        float((correction_var * free_per_stratum**2).sum()) / n**2
        + (slope * theta_se) ** 2 * float((k < 2).any())  # no correction: the ability's SE
        + float((expected * (1 - expected))[free].sum()) / n**2
    )
    return Estimate(theta, theta_se, float(predicted), float(np.sqrt(variance)), len(idx), "irt")


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
    at_random: float = 1.0  # share of each shard drawn at random (the estimator's sample)
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
        self.sampled = np.zeros(n, dtype=bool)
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
        randoms = round(self.at_random * count)
        drawn = choose(self.bank, self.answered, self.theta, randoms, self.rng, at_random=True)
        self.sampled[drawn] = True
        busy = self.answered.copy()
        busy[drawn] = True
        informative = choose(self.bank, busy, self.theta, count - len(drawn), self.rng)
        return np.concatenate([drawn, informative])

    def record(self, items: np.ndarray, correct: np.ndarray, trials: np.ndarray) -> Estimate:
        self.answered[items] = True
        self.correct[items] += correct
        self.trials[items] += trials
        if self.bank.usable:
            self.last = estimate(self.bank, self.answered, self.correct, self.trials, self.sampled)
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
        return self.last is not None and self.last.predicted_se <= self.target_se
