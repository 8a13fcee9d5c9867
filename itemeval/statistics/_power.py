"""Power planning: how many items and epochs a paired comparison needs to see a difference.

Two conditions A and B answer the same n items, k epochs each. The per-item difference of their
mean scores has variance

    Var(d) = tau^2 + (s2_within_A + s2_within_B) / k

where tau^2 is the between-item variance of the true per-item differences (what epochs cannot
average away) and s2_within the epoch-to-epoch variance of each. A two-sided paired test at level
alpha detects a true difference delta with probability `power` when

    n = ceil((z_(1 - alpha/2) + z_power)^2 * Var(d) * deff / delta^2)

(normal approximation; `deff` is the design effect of `analysis.cluster_by`, 1 without it).
Each extra epoch costs as much as an extra item, and n x k = z^2 (k tau^2 + 2 s2_within) / delta^2
grows with k: one epoch is cheapest whenever the datasets have enough items.

`DesignVariance.from_pairs` learns tau^2 and s2_within from stored results (one pair of
conditions, or the median over several); `DesignVariance.default()` is the stated conservative
default when nothing is stored: both accuracies at 0.5, no correlation between conditions
(Var(d) = 0.5), and epochs that add nothing.

A plan no study could carry out is flagged (`PowerPlan.warnings`): more answers per condition
than `LARGEST_BENCHMARK` (an item's epochs are not worth more than items), or a cheapest design
dearer than the study's budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

DEFAULT_POWER = 0.8
DEFAULT_ALPHA = 0.05
EPOCH_CHOICES = (1, 2, 3, 5, 10)
#: More items than this is flagged: benchmarks are smaller (the large ones hold tens of
#: thousands of items), so such a plan asks for a difference no study can see.
LARGEST_BENCHMARK = 1_000_000
#: The fewest epochs that fit the datasets' items is offered as a design up to this many.
MOST_EPOCHS = 100


@dataclass(frozen=True)
class DesignVariance:
    between: float  # tau^2: variance of true per-item differences
    within: float  # s2_within of one condition (the two averaged)
    deff: float = 1.0  # design effect of clustering (1 without cluster_by)
    source: str = ""
    pairs: int = 0

    def of_difference(self, epochs: int) -> float:
        return self.between + 2.0 * self.within / max(1, epochs)

    @classmethod
    def default(cls) -> DesignVariance:
        return cls(
            between=0.5,
            within=0.0,
            source=(
                "no stored results: the conservative default (both accuracies 0.5, no "
                "correlation between conditions, epochs add nothing: Var(d) = 0.5)"
            ),
        )

    @classmethod
    def from_pairs(
        cls,
        differences: list[np.ndarray],
        withins: list[float],
        epochs: float,
        deffs: list[float] | None = None,
        source: str = "",
    ) -> DesignVariance:
        """`differences[j]`: per-item differences of pair j (each item's mean over its epochs);
        `withins[j]`: that pair's mean within-item variance (NaN with one epoch); `epochs`: how
        many epochs each item mean averages. Medians over the pairs."""
        observed, taus, ws = [], [], []
        for d, w in zip(differences, withins, strict=True):
            if len(d) < 2:
                continue
            var = float(np.var(d, ddof=1))
            observed.append(var)
            if math.isnan(w):
                taus.append(var)  # one epoch: all of it counts as between (conservative)
                ws.append(0.0)
            else:
                taus.append(max(0.0, var - 2.0 * w / max(1.0, epochs)))
                ws.append(w)
        if not observed:
            return cls.default()
        deff = float(np.median(deffs)) if deffs else 1.0
        return cls(
            between=float(np.median(taus)),
            within=float(np.median(ws)),
            deff=max(1.0, deff),
            source=source,
            pairs=len(observed),
        )


@dataclass(frozen=True)
class PlanRow:
    epochs: int
    items: int
    answers_per_condition: int
    usd: float | None  # the calibrated estimate of this design (every condition), None if unknown
    fits: bool  # the datasets have that many items


@dataclass(frozen=True)
class PowerPlan:
    detect: float
    power: float
    alpha: float
    variance: DesignVariance
    rows: list[PlanRow]
    available_items: int
    usd_per_item_epoch: float | None
    notes: list[str] = field(default_factory=list)
    #: items needed however many epochs (tau^2 alone): no design with fewer items can work
    least_items: int = 0
    #: what the plan assumed, in words (the pair of conditions and its figures)
    assumed: list[str] = field(default_factory=list)
    #: answers no study could act on (more items than benchmarks have; over the budget)
    warnings: list[str] = field(default_factory=list)
    #: the most epochs a design may have (`MOST_EPOCHS`)
    most_epochs: int = MOST_EPOCHS

    @property
    def recommended(self) -> PlanRow | None:
        """The cheapest design (fewest answers) the datasets have items for."""
        fitting = [r for r in self.rows if r.fits]
        return min(fitting, key=lambda r: (r.answers_per_condition, r.epochs)) if fitting else None


def z_value(probability: float) -> float:
    from scipy.stats import norm  # lazy: scipy costs a second to import

    return float(norm.ppf(probability))


def items_needed(
    detect: float,
    variance: DesignVariance,
    epochs: int = 1,
    power: float = DEFAULT_POWER,
    alpha: float = DEFAULT_ALPHA,
) -> int:
    """Items a paired comparison needs (see the module doc)."""
    if not detect > 0:
        raise ValueError(f"the difference to detect must be positive, not {detect}")
    z = z_value(1 - alpha / 2) + z_value(power)
    n = z * z * variance.of_difference(epochs) * variance.deff / (detect * detect)
    return max(2, math.ceil(n))


def power_plan(
    detect: float,
    variance: DesignVariance,
    *,
    power: float = DEFAULT_POWER,
    alpha: float = DEFAULT_ALPHA,
    available_items: int,
    usd_per_item_epoch: float | None,
    epochs: tuple[int, ...] = EPOCH_CHOICES,
) -> PowerPlan:
    if not 0 < power < 1:
        raise ValueError(f"power must be between 0 and 1, not {power}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
    z = z_value(1 - alpha / 2) + z_value(power)
    scale = z * z * variance.deff / (detect * detect)
    least = max(2, math.ceil(scale * variance.between))
    choices = list(epochs)
    # The fewest epochs that fit the items there are, when more than the choices offer:
    # scale (tau^2 + 2 s2 / k) <= N  <=>  k >= 2 s2 / (N / scale - tau^2).
    room = available_items / scale - variance.between
    if variance.within > 0 and room > 0:
        fewest = math.ceil(2 * variance.within / room)
        if max(choices) < fewest <= MOST_EPOCHS:
            choices.append(fewest)
    rows = []
    for k in choices:
        n = items_needed(detect, variance, k, power, alpha)
        usd = usd_per_item_epoch * n * k if usd_per_item_epoch is not None else None
        rows.append(PlanRow(k, n, n * k, usd, n <= available_items))
    result = PowerPlan(
        detect,
        power,
        alpha,
        variance,
        rows,
        available_items,
        usd_per_item_epoch,
        least_items=least,
    )
    fewest = min(r.answers_per_condition for r in rows)
    if fewest > LARGEST_BENCHMARK:
        result.warnings.append(
            f"every design needs more than {LARGEST_BENCHMARK:,} answers per condition (at one "
            f"epoch, {min(rows, key=lambda r: r.epochs).items:,} items), more than benchmarks "
            "have items (the large ones "
            f"hold tens of thousands): a difference of {detect:g} is beyond what a study can "
            "see here; plan for a larger one"
        )
    return result


def flag_budget(plan: PowerPlan, caps: dict[str, float | None]) -> None:
    """Warn when the cheapest design (the recommended one, else the fewest answers) costs more
    than a cap of the study's budget (`budget.max_usd`, ...)."""
    best = plan.recommended or min(plan.rows, key=lambda r: (r.answers_per_condition, r.epochs))
    if best.usd is None:
        return
    for name, cap in caps.items():
        if cap is not None and best.usd > cap:
            plan.warnings.append(
                f"the cheapest design ({best.items:,} items x {best.epochs} epoch(s)) costs "
                f"${best.usd:,.2f}, more than {name} (${cap:,.2f}): a run would stop at the cap "
                "before it has the answers"
            )
