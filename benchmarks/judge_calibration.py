"""Does the corrected accuracy cover the truth? Simulated studies whose truth is known.

    .venv/bin/python benchmarks/judge_calibration.py [--studies 500] [--items 300]
                                                     [--gold 120] [--resamples 1000]
                                                     [--pair-items 2500] [--shared-items 100]
                                                     [--scenarios ...] [--json]

Each simulated study, in-process (no server, no store):

1. a simulated solver (`Simulator.answer`, ability drawn per study in [0.3, 0.9]) answers
   `--items` arithmetic items (numeric targets, difficulty from the item id), 2 epochs;
   the truth of each answer is what the simulator's correct judge decides (the answer's final
   line equals the target);
2. a simulated judge with declared error rates (false pass and false fail drawn per study from
   [0.02, 0.30]) grades every answer through structured output, read by the judge parser;
3. `--gold` answers drawn at random get their true verdict (a person's labels);
4. `itemeval.judging.calibrate` (the code behind the report, `export` and `Study.judges()`)
   gives the raw judged accuracy and the corrected one, each with its 95% interval.

It prints the share of studies whose interval holds the study's true accuracy (the realised
share of right answers), for the corrected interval and the raw one, the mean absolute error
of both point estimates, the measured error rates against the declared ones, and how often the
sensitivity and specificity intervals hold the judge's true rates (the mean over the study's
right answers of `1 - false fail`, over its wrong ones of `1 - false pass`, each answer's rates
as the simulator draws them: the declared ones, moved by the length bias where there is one): the
report's (Wilson at the effective number of answers from the item bootstrap), Wilson counting
every answer as independent, and the item bootstrap's percentiles.

Scenario `shared-answers`, the demo's shape: six solvers (abilities 0.4-0.85) answer
`--shared-items` items directly, 3 epochs each (18 answers an item); right answers are the same
text, and a simulated judge's verdict on the same text of the same item and epoch is one draw,
so an item's answers err together (as in a real study, where models agreeing give the judge the
same answer). A verifiable scorer is gold on every answer, as `gold.scorer` is in the demo. Scenario
`length-bias`: the judge also favours long answers (`judge_length_bias` 0.3) and the second
epoch's answers are chain-of-thought (long): the judge's error rates differ between answers,
which the correction (one pair of rates for all answers) does not assume. The corrected
interval's coverage is also printed per epoch (a group of its own, as a generate condition is in
the report): all answers, then the short and the long ones apart.

Scenario `pairwise`: a candidate (ability drawn in [0.3, 0.9], verbosity in [1, 4]: longer
answers) and a baseline (ability in [0.3, 0.9], verbosity 1) answer `--pair-items` items (chain of
thought, so lengths vary); a simulated pairwise judge (`judge_accuracy` drawn in [0.75, 0.95],
declared `judge_position_bias` 0.10, `judge_length_bias` 0.3: it favours the longer answer)
compares each pair in both orders; `itemeval.judging.analyse_pairwise` gives the position bias
(the share of decisive verdicts won by the first-shown answer, minus 50%), the win rate and the
length-controlled win rate. The true length-controlled win rate is the same judge's expected
win rate with its length term removed (`pairwise_preference(..., length=False)`, its position
bias kept, as both orders are asked); the true win rate is its expected win rate as it is.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass

import numpy as np

from itemeval.calls import VERDICT
from itemeval.judging import Calibration, analyse_pairwise, calibrate, parse_pairwise_verdict
from itemeval.judging._calibration import error_rates
from itemeval.providers import SimModelSpec, SimSettings
from itemeval.scoring import parse_structured_verdict
from itemeval.simulator import Simulator, pairwise_preference, solution_matches
from itemeval.simulator._engine import judge_error_rates

JUDGE_PROMPT = "Grade the response.\nReference: {target}\nResponse: {solution}"


RATE_FORMS = ("items", "answers", "percentile")


@dataclass
class Outcome:
    truth: float
    raw: tuple[float, float, float]
    corrected: tuple[float | None, float | None, float | None]
    false_pass: tuple[float, float | None]  # declared, measured
    false_fail: tuple[float, float | None]
    by_form: list[tuple[float, float | None, float | None]]  # (truth, low, high): short, long
    #: Se and Sp intervals against the declared rates: per form of interval (`RATE_FORMS`:
    #: Wilson at the effective number of answers from the item bootstrap, which the report
    #: gives; Wilson counting every answer as independent; the item bootstrap's percentiles),
    #: per rate (sensitivity, specificity), (low, high)
    rates: dict[str, list[tuple[float | None, float | None]]] | None = None
    #: the judge's true sensitivity and specificity over the study's answers: the mean of
    #: `1 - false fail` over the right answers and of `1 - false pass` over the wrong ones, each
    #: answer's rates as the simulator draws them (the declared ones, moved by a length bias)
    true_rates: tuple[float, float] = (float("nan"), float("nan"))


def true_rates(truth: np.ndarray, errors: np.ndarray) -> tuple[float, float]:
    """(sensitivity, specificity) over the answers: `errors` holds each answer's (false pass,
    false fail) rates."""
    right = truth == 1
    return float(np.mean(1 - errors[right, 1])), float(np.mean(1 - errors[~right, 0]))


def rate_intervals(
    result: Calibration,
    judge: np.ndarray,
    gold: np.ndarray,
    cluster: np.ndarray,
    resamples: int,
    seed: int,
) -> dict[str, list[tuple[float | None, float | None]]]:
    """Se and Sp intervals in each of `RATE_FORMS` (the report's, Wilson over answers, and the
    item bootstrap's percentiles)."""
    rates = [result.rates.sensitivity, result.rates.specificity]
    answers = error_rates(judge, gold)
    both = ~np.isnan(judge) & ~np.isnan(gold)
    j, g, c = judge[both], gold[both], cluster[both]
    clusters = int(cluster.max()) + 1
    per = [
        np.bincount(c, weights=w, minlength=clusters) for w in (j * g, g, (1 - j) * (1 - g), 1 - g)
    ]
    counts = np.vstack(per).T
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, clusters, size=(resamples, clusters))
    drawn += np.arange(resamples)[:, None] * clusters
    weights = np.bincount(drawn.ravel(), minlength=resamples * clusters)
    totals = weights.reshape(resamples, clusters) @ counts
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = [totals[:, 0] / totals[:, 1], totals[:, 2] / totals[:, 3]]
    percentile = []
    for d in draws:
        finite = d[np.isfinite(d)]
        low, high = np.percentile(finite, [2.5, 97.5]) if finite.size else (None, None)
        percentile.append((low, high))
    return {
        "items": [(r.low, r.high) for r in rates],
        "answers": [(r.low, r.high) for r in (answers.sensitivity, answers.specificity)],
        "percentile": percentile,
    }


def one_study(index: int, args: argparse.Namespace, length_bias: float) -> Outcome:
    rng = np.random.default_rng(index)
    ability = float(rng.uniform(0.3, 0.9))
    false_pass, false_fail = (float(x) for x in rng.uniform(0.02, 0.30, size=2))
    models = {
        "solver": SimModelSpec(ability=ability, verbosity=3.0),
        "noisy": SimModelSpec(
            ability=0.5,
            judge_false_pass=false_pass,
            judge_false_fail=false_fail,
            judge_length_bias=length_bias,
        ),
    }
    sim = Simulator(SimSettings(seed=index, models=models))
    truth, judge, cluster, form, errors = [], [], [], [], []
    for item in range(args.items):
        target = str(int(rng.integers(2, 999)))
        for epoch in range(2):
            long_form = length_bias and epoch == 1  # chain of thought: long answers
            prompt = f"Item {item}: compute it." + (
                " Think step by step, then give ANSWER: <value>." if long_form else ""
            )
            hints = {"item_id": f"b{index}-{item}", "epoch": epoch, "target": target}
            hints["modality"] = "single-value"
            answer = sim.answer("sim/solver", [{"role": "user", "content": prompt}], hints=hints)
            solution = answer.text
            right = solution_matches(solution, target)
            reply = sim.answer(
                "sim/noisy",
                [
                    {
                        "role": "user",
                        "content": JUDGE_PROMPT.format(target=target, solution=solution),
                    }
                ],
                hints=hints | {"role": "judge", "solution": solution},
                structured=VERDICT is not None,
            )
            verdict = parse_structured_verdict(reply.text, min_score=0, max_score=1)
            truth.append(float(right))
            judge.append(np.nan if verdict.score is None else float(verdict.score >= 1))
            cluster.append(item)
            form.append(epoch)
            errors.append(judge_error_rates(models["noisy"], solution))
    truth_a = np.array(truth)
    gold = np.full(truth_a.size, np.nan)
    chosen = rng.choice(truth_a.size, size=min(args.gold, truth_a.size), replace=False)
    gold[chosen] = truth_a[chosen]
    result = calibrate(
        np.array(judge),
        gold,
        np.array(cluster, dtype=np.int64),
        np.array(form, dtype=np.int64),
        groups=2,
        resamples=args.resamples,
        seed=index,
    )
    line = result.groups[0]
    judge_a, cluster_a = np.array(judge), np.array(cluster, dtype=np.int64)
    return Outcome(
        true_rates=true_rates(truth_a, np.array(errors)),
        rates=rate_intervals(result, judge_a, gold, cluster_a, args.resamples, index),
        truth=float(truth_a.mean()),
        raw=(line.raw.value, line.raw.low, line.raw.high),  # type: ignore[arg-type]
        corrected=(line.corrected.value, line.corrected.low, line.corrected.high),
        false_pass=(false_pass, result.rates.false_pass),
        false_fail=(false_fail, result.rates.false_fail),
        by_form=[
            (
                float(truth_a[np.array(form) == g].mean()),
                result.groups[g + 1].corrected.low,
                result.groups[g + 1].corrected.high,
            )
            for g in (0, 1)
        ],
    )


SHARED_ABILITIES = (0.85, 0.8, 0.65, 0.6, 0.45, 0.4)


def shared_study(index: int, args: argparse.Namespace) -> Outcome:
    """Scenario `shared-answers` (see the module doc): 18 answers an item that err together,
    a verifiable scorer as gold on every answer."""
    rng = np.random.default_rng(20_000 + index)
    false_pass, false_fail = (float(x) for x in rng.uniform(0.02, 0.30, size=2))
    models = {f"s{i}": SimModelSpec(ability=a) for i, a in enumerate(SHARED_ABILITIES)}
    models["noisy"] = SimModelSpec(
        ability=0.5, judge_false_pass=false_pass, judge_false_fail=false_fail
    )
    sim = Simulator(SimSettings(seed=index, models=models))
    truth, judge, cluster, group = [], [], [], []
    for item in range(args.shared_items):
        target = str(int(rng.integers(2, 999)))
        for epoch in range(3):
            hints = {"item_id": f"s{index}-{item}", "epoch": epoch, "target": target}
            hints["modality"] = "single-value"
            for solver in range(len(SHARED_ABILITIES)):
                messages = [{"role": "user", "content": f"Item {item}: compute it."}]
                solution = sim.answer(f"sim/s{solver}", messages, hints=hints).text
                reply = sim.answer(
                    "sim/noisy",
                    [
                        {
                            "role": "user",
                            "content": JUDGE_PROMPT.format(target=target, solution=solution),
                        }
                    ],
                    hints=hints | {"role": "judge", "solution": solution},
                    structured=True,
                )
                verdict = parse_structured_verdict(reply.text, min_score=0, max_score=1)
                truth.append(float(solution_matches(solution, target)))
                judge.append(np.nan if verdict.score is None else float(verdict.score >= 1))
                cluster.append(item)
                group.append(solver)
    truth_a, judge_a = np.array(truth), np.array(judge)
    cluster_a = np.array(cluster, dtype=np.int64)
    result = calibrate(
        judge_a,
        truth_a,
        cluster_a,
        np.array(group, dtype=np.int64),
        groups=len(SHARED_ABILITIES),
        resamples=args.resamples,
        seed=index,
    )
    line = result.groups[0]
    return Outcome(
        truth=float(truth_a.mean()),
        raw=(line.raw.value, line.raw.low, line.raw.high),  # type: ignore[arg-type]
        corrected=(line.corrected.value, line.corrected.low, line.corrected.high),
        false_pass=(false_pass, result.rates.false_pass),
        false_fail=(false_fail, result.rates.false_fail),
        by_form=[],
        rates=rate_intervals(result, judge_a, truth_a, cluster_a, args.resamples, index),
        true_rates=(1 - false_fail, 1 - false_pass),
    )


DECLARED_POSITION_BIAS = 0.10


def pairwise_study(index: int, items: int) -> dict[str, float]:
    """One pairwise study (scenario `pairwise`): measured and true figures."""
    rng = np.random.default_rng(10_000 + index)
    judge = SimModelSpec(
        ability=0.5,
        judge_accuracy=float(rng.uniform(0.75, 0.95)),
        judge_position_bias=DECLARED_POSITION_BIAS,
        judge_length_bias=0.3,
    )
    models = {
        "cand": SimModelSpec(ability=float(rng.uniform(0.3, 0.9)), verbosity=rng.uniform(1, 4)),
        "base": SimModelSpec(ability=float(rng.uniform(0.3, 0.9))),
        "judge": judge,
    }
    sim = Simulator(SimSettings(seed=index, models=models))
    b = DECLARED_POSITION_BIAS
    rows: dict[str, list] = {"item": [], "first": [], "verdict": [], "diff": []}
    true_win, true_lc = [], []
    for item in range(items):
        target = str(int(rng.integers(2, 999)))
        prompt = f"Item {item}: compute it. Think step by step, then give ANSWER: <value>."
        hints = {"item_id": f"p{index}-{item}", "epoch": 0, "target": target}
        hints["modality"] = "single-value"
        messages = [{"role": "user", "content": prompt}]
        cand = sim.answer("sim/cand", messages, hints=hints).text
        base = sim.answer("sim/base", messages, hints=hints).text
        for cand_first in (True, False):
            first, second = (cand, base) if cand_first else (base, cand)
            reply = sim.answer(
                "sim/judge",
                [{"role": "user", "content": "Which response is better?"}],
                hints=hints | {"role": "pairwise", "first": first, "second": second},
                structured=True,
            )
            rows["item"].append(item)
            rows["first"].append(cand_first)
            rows["verdict"].append(parse_pairwise_verdict(reply.text, structured=True))
            rows["diff"].append(len(cand) - len(base))
            # What this judge gives in expectation, with and without its length term.
            for length, out in ((True, true_win), (False, true_lc)):
                p = pairwise_preference(judge, first, second, target, length=length)
                first_wins = 0.5 if first == second else p + (1 - p) * 2 * b
                out.append(first_wins if cand_first else 1 - first_wins)
    result = analyse_pairwise(
        condition=["cand"] * len(rows["item"]),
        baseline="base",
        item=rows["item"],
        condition_first=np.array(rows["first"]),
        verdict=rows["verdict"],
        length_diff=np.array(rows["diff"], dtype=float),
    ).results[0]
    pos = result.position_first_wins
    return {
        "position_bias": float(pos.value) - 0.5,  # type: ignore[arg-type]
        "position_covers": float(pos.low <= 0.5 + b <= pos.high),  # type: ignore[operator]
        "win_rate": float(result.win_rate.value),  # type: ignore[arg-type]
        "true_win_rate": float(np.mean(true_win)),
        "win_covers": float(
            result.win_rate.low <= np.mean(true_win) <= result.win_rate.high  # type: ignore[operator]
        ),
        "lc": float(result.length_controlled.value),  # type: ignore[arg-type]
        "true_lc": float(np.mean(true_lc)),
        "lc_covers": float(
            result.length_controlled.low  # type: ignore[operator]
            <= np.mean(true_lc)
            <= result.length_controlled.high
        ),
    }


def summarise_pairwise(studies: list[dict[str, float]]) -> dict[str, float]:
    def mean(key: str) -> float:
        return float(np.mean([s[key] for s in studies]))

    def mae(a: str, b: str) -> float:
        return float(np.mean([abs(s[a] - s[b]) for s in studies]))

    return {
        "studies": len(studies),
        "declared_position_bias": DECLARED_POSITION_BIAS,
        "mean_position_bias": mean("position_bias"),
        "max_position_error": float(
            max(abs(s["position_bias"] - DECLARED_POSITION_BIAS) for s in studies)
        ),
        "position_within_2_points": float(
            np.mean([abs(s["position_bias"] - DECLARED_POSITION_BIAS) <= 0.02 for s in studies])
        ),
        "coverage_position": mean("position_covers"),
        "mae_win_rate_vs_true_lc": mae("win_rate", "true_lc"),
        "mae_lc_vs_true_lc": mae("lc", "true_lc"),
        "mean_lc_minus_true_lc": float(np.mean([s["lc"] - s["true_lc"] for s in studies])),
        "coverage_lc": mean("lc_covers"),
        "coverage_win_rate": mean("win_covers"),
        "mae_win_rate": mae("win_rate", "true_win_rate"),
    }


def summarise(outcomes: list[Outcome]) -> dict[str, float]:
    def covers(low: float | None, high: float | None, value: float) -> bool:
        return low is not None and high is not None and low <= value <= high

    corrected = [o for o in outcomes if o.corrected[0] is not None]
    return {
        "studies": len(outcomes),
        "corrected_given": len(corrected),
        "coverage_corrected": float(
            np.mean([covers(o.corrected[1], o.corrected[2], o.truth) for o in outcomes])
        ),
        "coverage_raw": float(np.mean([covers(o.raw[1], o.raw[2], o.truth) for o in outcomes])),
        "coverage_corrected_by_epoch": [
            float(
                np.mean(
                    [covers(o.by_form[g][1], o.by_form[g][2], o.by_form[g][0]) for o in outcomes]
                )
            )
            for g in (0, 1)
            if all(o.by_form for o in outcomes)
        ],
        "mae_corrected": float(np.mean([abs(o.corrected[0] - o.truth) for o in corrected])),
        "mae_raw": float(np.mean([abs(o.raw[0] - o.truth) for o in outcomes])),
        "mean_width_corrected": float(
            np.mean([o.corrected[2] - o.corrected[1] for o in corrected if o.corrected[1]])
        ),
        "mae_false_pass": float(
            np.mean([abs(o.false_pass[1] - o.false_pass[0]) for o in outcomes if o.false_pass[1]])
        ),
        "mae_false_fail": float(
            np.mean([abs(o.false_fail[1] - o.false_fail[0]) for o in outcomes if o.false_fail[1]])
        ),
    } | rate_coverage(outcomes)


def rate_coverage(outcomes: list[Outcome]) -> dict[str, float]:
    """How often each form of Se and Sp interval holds the true rate, and its mean width."""
    out: dict[str, float] = {}
    for form in RATE_FORMS:
        for r, name in enumerate(("sensitivity", "specificity")):
            hits, widths = [], []
            for o in outcomes:
                assert o.rates is not None
                low, high = o.rates[form][r]
                true = o.true_rates[r]
                hits.append(low is not None and high is not None and low <= true <= high)
                if low is not None and high is not None:
                    widths.append(high - low)
            out[f"coverage_{name}_{form}"] = float(np.mean(hits))
            out[f"width_{name}_{form}"] = float(np.mean(widths))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--studies", type=int, default=500)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--gold", type=int, default=120)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--pair-items", type=int, default=2500)
    parser.add_argument("--shared-items", type=int, default=100)
    parser.add_argument(
        "--scenarios",
        nargs="+",
        default=["declared", "length-bias", "shared-answers", "pairwise"],
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = {}
    for scenario in args.scenarios:
        started = time.monotonic()
        if scenario == "pairwise":
            pairs = [pairwise_study(i, args.pair_items) for i in range(args.studies)]
            report[scenario] = summarise_pairwise(pairs) | {"seconds": time.monotonic() - started}
            continue
        if scenario == "shared-answers":
            outcomes = [shared_study(i, args) for i in range(args.studies)]
            report[scenario] = summarise(outcomes) | {"seconds": time.monotonic() - started}
            continue
        bias = 0.3 if scenario == "length-bias" else 0.0
        outcomes = [one_study(i, args, bias) for i in range(args.studies)]
        report[scenario] = summarise(outcomes) | {"seconds": time.monotonic() - started}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{args.studies} simulated studies per scenario: {args.items} items x 2 epochs, "
        f"{args.gold} gold labels, {args.resamples} bootstrap resamples; pairwise: "
        f"{args.pair_items} items, both orders"
    )
    for scenario, s in report.items():
        print(f"\n{scenario}  ({s['seconds']:.0f} s)")
        if scenario == "pairwise":
            print_pairwise(s)
            continue
        print(
            f"  coverage of the true accuracy: corrected interval {s['coverage_corrected']:.1%}"
            f" (target >= 94%), raw judged interval {s['coverage_raw']:.1%}"
        )
        print(
            f"  mean absolute error: corrected {s['mae_corrected']:.4f}, raw {s['mae_raw']:.4f};"
            f" corrected interval width {s['mean_width_corrected']:.3f};"
            f" given in {s['corrected_given']} of {s['studies']} studies"
        )
        for name in ("sensitivity", "specificity"):
            print(
                f"  {name} covers the true rate: "
                + "; ".join(
                    f"{form} {s[f'coverage_{name}_{form}']:.1%} (width "
                    f"{s[f'width_{name}_{form}']:.3f})"
                    for form in RATE_FORMS
                )
            )
        if scenario == "shared-answers":
            continue
        short, long = s["coverage_corrected_by_epoch"]
        print(
            f"  per epoch (under length-bias: short answers, then long ones): corrected interval"
            f" {short:.1%} and {long:.1%}"
        )
        print(
            f"  measured vs declared error rates (mean absolute difference): false pass "
            f"{s['mae_false_pass']:.4f}, false fail {s['mae_false_fail']:.4f}"
        )


def print_pairwise(s: dict[str, float]) -> None:
    print(
        f"  position bias: declared {s['declared_position_bias']:.1%}, measured "
        f"{s['mean_position_bias']:.2%} on average; within 2 points in "
        f"{s['position_within_2_points']:.1%} of studies (largest error "
        f"{s['max_position_error']:.2%}); interval coverage {s['coverage_position']:.1%}"
    )
    print(
        f"  length-controlled win rate vs the true one: mean absolute error "
        f"{s['mae_lc_vs_true_lc']:.4f} (mean signed {s['mean_lc_minus_true_lc']:+.4f}), "
        f"interval coverage {s['coverage_lc']:.1%}; the raw win rate is off the true "
        f"length-controlled one by {s['mae_win_rate_vs_true_lc']:.4f}"
    )
    print(
        f"  win rate vs the judge's expected one: mean absolute error {s['mae_win_rate']:.4f},"
        f" interval coverage {s['coverage_win_rate']:.1%}"
    )


if __name__ == "__main__":
    main()
