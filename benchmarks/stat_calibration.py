"""Do the statistics keep their promises? Simulated studies with known truth, in-process.

    .venv/bin/python benchmarks/stat_calibration.py [--studies 1000] [--seed 0] [--json FILE]

Each case draws many studies (fresh items each time) from a response model whose expected
accuracies are known, runs the same code the report runs (`statistics.paired.compare`,
`statistics.intervals.bootstrap_proportion`) and counts:

1. coverage: how often the 95% paired interval holds the true difference, and each
   condition's interval its true accuracy (target 94-96%);
2. the family-wise false-positive rate when every condition has the same true accuracy: the
   share of studies where at least one Holm-adjusted p < 0.05 (target <= 5%);
3. power: the items `statistics.power` plans (from a pilot's variance) for the true difference,
   and how often a study of that size detects it (target 80%, within 5 points);
4. the median width of the paired interval over the unpaired one (both conditions' own
   intervals combined, sqrt(h_A^2 + h_B^2)), on items of varied difficulty;
5. a clustered case (items in groups sharing a difficulty and a gap between the conditions):
   intervals over items under-cover, intervals over clusters (`analysis.cluster_by`) cover.

Response models: `sim` is the simulator's own (`simulator._model.p_correct`, logistic in
ability - difficulty, slope 8); `guess` adds a guessing floor (multiple choice with 4 options:
p = 1/4 + 3/4 logistic, with another slope per model); `topics` gives each model its own skill
per topic (5 topics, items spread over them), so the conditions' gap varies between items in a
way the simulator never draws. The truth of each case is its population value, computed over
2,000,000 items drawn from the same distribution.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from itemeval.simulator._model import SLOPE  # noqa: E402
from itemeval.statistics._intervals import bootstrap_proportion  # noqa: E402
from itemeval.statistics._paired import compare  # noqa: E402
from itemeval.statistics._power import DesignVariance, items_needed  # noqa: E402
from itemeval.statistics._tallies import Tallies  # noqa: E402

RESAMPLES = 1000
TRUTH_ITEMS = 2_000_000


def logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@dataclass(frozen=True)
class Model:
    """A response model: item draws and each condition's chance on each item."""

    name: str
    abilities: tuple[float, ...]

    def items(self, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        return {"difficulty": rng.uniform(0, 1, n), "topic": rng.integers(0, 5, n)}

    def p(self, items: dict[str, np.ndarray]) -> np.ndarray:
        d = items["difficulty"][:, None]
        a = np.asarray(self.abilities)[None, :]
        if self.name == "sim":
            return logistic(SLOPE * (a - d))
        if self.name == "guess":  # 4 options: a guessing floor, each model its own slope
            slopes = np.linspace(5.0, 11.0, len(self.abilities))[None, :]
            return 0.25 + 0.75 * logistic(slopes * (a - d))
        if self.name == "topics":  # each model's own skill per topic
            skill = np.random.default_rng(99).normal(0, 0.15, (5, len(self.abilities)))
            return logistic(SLOPE * (a + skill[items["topic"]] - d))
        raise ValueError(self.name)

    def truth(self) -> np.ndarray:
        """Population accuracy of each condition."""
        rng = np.random.default_rng(12345)
        return self.p(self.items(rng, TRUTH_ITEMS)).mean(axis=0)


def answers(model: Model, rng: np.random.Generator, n: int, epochs: int) -> np.ndarray:
    """(items, epochs, conditions) of 0/1."""
    p = model.p(model.items(rng, n))
    return (rng.uniform(size=(n, epochs, p.shape[1])) < p[:, None, :]).astype(np.float64)


def tallies(x: np.ndarray, clusters: np.ndarray | None = None) -> Tallies:
    items, epochs, k = x.shape
    item = np.repeat(np.arange(items), epochs * k)
    cluster = item if clusters is None else clusters[item]
    unit = np.tile(np.arange(k), items * epochs)
    return Tallies.from_rows(
        [f"c{j}" for j in range(k)],
        unit,
        cluster,
        x.ravel(),
        binary=True,
        item_clusters=clusters is None,
    )


def coverage_case(model: Model, studies: int, n: int, epochs: int, seed: int) -> dict[str, float]:
    truth = model.truth()
    true_diff = float(truth[0] - truth[1])
    rng = np.random.default_rng(seed)
    paired_hits, condition_hits, condition_total, ratios = 0, 0, 0, []
    for s in range(studies):
        x = answers(model, rng, n, epochs)
        family = compare(tallies(x), resamples=RESAMPLES, seed=s)
        pair = family.pair(0, 1)
        paired_hits += pair.low <= true_diff <= pair.high
        halves = []
        for j in range(2):
            own = bootstrap_proportion(
                x[:, :, j].sum(1), np.full(n, float(epochs)), resamples=RESAMPLES, seed=s
            )
            condition_hits += own.covers(float(truth[j]))
            condition_total += 1
            halves.append((own.high - own.low) / 2)
        ratios.append((pair.high - pair.low) / (2 * math.hypot(*halves)))
    return {
        "true_difference": true_diff,
        "paired_coverage": paired_hits / studies,
        "condition_coverage": condition_hits / condition_total,
        "median_width_paired_over_unpaired": float(np.median(ratios)),
    }


def null_case(model: Model, studies: int, n: int, epochs: int, k: int, seed: int) -> float:
    """Every condition the same true accuracy (the same model, k prompts): the share of
    studies where Holm calls at least one of the k (k - 1) / 2 differences real."""
    rng = np.random.default_rng(seed)
    false = 0
    for s in range(studies):
        p = np.repeat(model.p(model.items(rng, n))[:, :1], k, axis=1)  # k identical conditions
        x = (rng.uniform(size=(n, epochs, k)) < p[:, None, :]).astype(np.float64)
        family = compare(tallies(x), resamples=200, seed=s)
        false += bool(family.real())
    return false / studies


def power_case(model: Model, studies: int, epochs: int, seed: int) -> dict[str, float]:
    """Plan from a pilot of 2,000 items, then run studies of the planned size."""
    truth = model.truth()
    true_diff = float(truth[0] - truth[1])
    rng = np.random.default_rng(seed)
    pilot = answers(model, rng, 2000, epochs)
    means = pilot.mean(axis=1)
    within = (pilot.var(axis=1, ddof=1).mean(axis=0).mean()) if epochs > 1 else math.nan
    variance = DesignVariance.from_pairs([means[:, 0] - means[:, 1]], [within], float(epochs))
    n = items_needed(abs(true_diff), variance, epochs, power=0.8, alpha=0.05)
    detected = 0
    for s in range(studies):
        pair = compare(tallies(answers(model, rng, n, epochs)), resamples=50, seed=s).pair(0, 1)
        detected += pair.p_value < 0.05 and np.sign(pair.difference) == np.sign(true_diff)
    return {"true_difference": true_diff, "planned_items": n, "power": detected / studies}


def clustered_case(studies: int, seed: int, groups: int = 40, size: int = 10) -> dict[str, float]:
    """Items in `groups` groups of `size`: a group shares its difficulty and its own gap
    between the two conditions (a passage one model reads better). The truth is the
    population difference."""
    rng = np.random.default_rng(seed)

    def draw(g: int, r: np.random.Generator) -> np.ndarray:
        difficulty = np.repeat(r.uniform(0, 1, g), size) + r.normal(0, 0.05, g * size)
        gap = np.repeat(r.normal(0, 0.25, g), size)
        return np.stack(
            [logistic(SLOPE * (0.6 + gap - difficulty)), logistic(SLOPE * (0.55 - difficulty))],
            axis=1,
        )

    truth_p = draw(TRUTH_ITEMS // size, np.random.default_rng(777)).mean(axis=0)
    true_diff = float(truth_p[0] - truth_p[1])
    codes = np.repeat(np.arange(groups), size)
    hits = {"items": 0, "clusters": 0}
    for s in range(studies):
        p = draw(groups, rng)
        x = (rng.uniform(size=(groups * size, 1, 2)) < p[:, None, :]).astype(np.float64)
        for kind, clusters in (("items", None), ("clusters", codes)):
            pair = compare(tallies(x, clusters), resamples=RESAMPLES, seed=s).pair(0, 1)
            hits[kind] += pair.low <= true_diff <= pair.high
    return {
        "true_difference": true_diff,
        "item_level_coverage": hits["items"] / studies,
        "cluster_level_coverage": hits["clusters"] / studies,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=1000, help="studies per case (1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    n = args.studies
    started = time.perf_counter()
    results: dict[str, object] = {"studies_per_case": n}
    print(f"Calibration over simulated studies ({n:,} per case, seed {args.seed})\n")

    print("1. Coverage of 95% intervals (target 94-96%) and 4. paired / unpaired width")
    print(
        f"{'model':<8}{'items':>6}{'epochs':>7}{'true diff':>10}{'paired':>9}{'per cond':>10}"
        f"{'width ratio':>13}"
    )
    coverage = []
    for i, (name, items, epochs) in enumerate(
        [("sim", 200, 1), ("sim", 200, 3), ("guess", 300, 1), ("topics", 200, 2)]
    ):
        model = Model(name, (0.62, 0.55))
        row = coverage_case(model, n, items, epochs, args.seed + i)
        coverage.append({"model": name, "items": items, "epochs": epochs, **row})
        print(
            f"{name:<8}{items:>6}{epochs:>7}{row['true_difference']:>10.4f}"
            f"{row['paired_coverage']:>9.1%}{row['condition_coverage']:>10.1%}"
            f"{row['median_width_paired_over_unpaired']:>13.2f}"
        )
    results["coverage"] = coverage

    print("\n2. Family-wise false positives, every condition equal (Holm, alpha 0.05; <= 5%)")
    nulls = []
    for i, (name, k, epochs) in enumerate([("sim", 5, 1), ("guess", 5, 3), ("topics", 4, 1)]):
        rate = null_case(Model(name, (0.6,)), n, 200, epochs, k, args.seed + 10 + i)
        nulls.append({"model": name, "conditions": k, "epochs": epochs, "fwer": rate})
        print(f"{name:<8}{k} conditions ({k * (k - 1) // 2} pairs), {epochs} epoch(s): {rate:.1%}")
    results["null"] = nulls

    print("\n3. Power at the planned size (target 80%, within 5 points)")
    powers = []
    cases = [("sim", (0.62, 0.57), 1), ("guess", (0.65, 0.57), 1), ("topics", (0.72, 0.6), 3)]
    for i, (name, abilities, epochs) in enumerate(cases):
        row = power_case(Model(name, abilities), n, epochs, args.seed + 20 + i)
        powers.append({"model": name, "epochs": epochs, **row})
        print(
            f"{name:<8}{epochs} epoch(s): true difference {row['true_difference']:.4f}, "
            f"planned {row['planned_items']:,} items, power {row['power']:.1%}"
        )
    results["power"] = powers

    print("\n5. Clustered items (40 groups of 10 sharing difficulty and gap)")
    row = clustered_case(n, args.seed + 30)
    results["clustered"] = row
    print(
        f"true difference {row['true_difference']:.4f}: intervals over items cover "
        f"{row['item_level_coverage']:.1%}, over clusters {row['cluster_level_coverage']:.1%}"
    )
    results["seconds"] = time.perf_counter() - started
    print(f"\n{time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
