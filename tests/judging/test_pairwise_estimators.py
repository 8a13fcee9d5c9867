"""Pairwise judging: the estimators against the simulator's declared truth.

A simulated pairwise judge declares its position bias and length bias
(`itemeval.simulator._engine.pairwise_verdict`); the estimators of
`itemeval.judging._pairwise` must find them.
"""

from __future__ import annotations

import numpy as np
import pytest

from itemeval.judging import analyse_pairwise, parse_pairwise_verdict
from itemeval.judging._pairwise import bradley_terry, win_rate
from itemeval.providers import SimModelSpec, SimSettings
from itemeval.simulator import Simulator, pairwise_preference


def _study(
    *, items: int, position_bias: float, length_bias: float, seed: int = 1, verbosity: float = 3.0
):
    judge = SimModelSpec(
        ability=0.5,
        judge_accuracy=0.85,
        judge_position_bias=position_bias,
        judge_length_bias=length_bias,
    )
    models = {
        "cand": SimModelSpec(ability=0.6, verbosity=verbosity),
        "base": SimModelSpec(ability=0.6),
        "judge": judge,
    }
    sim = Simulator(SimSettings(seed=seed, models=models))
    rows: dict[str, list] = {"item": [], "first": [], "verdict": [], "diff": []}
    true_lc = []
    for item in range(items):
        target = str(100 + item)
        hints = {"item_id": f"i{item}", "epoch": 0, "target": target, "modality": "single-value"}
        messages = [{"role": "user", "content": "Compute it. Think step by step. ANSWER: <v>"}]
        cand = sim.answer("sim/cand", messages, hints=hints).text
        base = sim.answer("sim/base", messages, hints=hints).text
        for cand_first in (True, False):
            first, second = (cand, base) if cand_first else (base, cand)
            reply = sim.answer(
                "sim/judge",
                messages,
                hints=hints | {"role": "pairwise", "first": first, "second": second},
                structured=True,
            )
            rows["item"].append(item)
            rows["first"].append(cand_first)
            rows["verdict"].append(parse_pairwise_verdict(reply.text, structured=True))
            rows["diff"].append(len(cand) - len(base))
            p = pairwise_preference(judge, first, second, target, length=False)
            first_wins = 0.5 if first == second else p + (1 - p) * 2 * position_bias
            true_lc.append(first_wins if cand_first else 1 - first_wins)
    analysis = analyse_pairwise(
        condition=["cand"] * len(rows["item"]),
        baseline="base",
        item=rows["item"],
        condition_first=np.array(rows["first"]),
        verdict=rows["verdict"],
        length_diff=np.array(rows["diff"], dtype=float),
    )
    return analysis, float(np.mean(true_lc))


@pytest.mark.parametrize("declared", [0.0, 0.10])
def test_position_bias_is_the_declared_one(declared: float) -> None:
    analysis, _ = _study(items=2000, position_bias=declared, length_bias=0.0)
    measured = analysis.position_first_wins
    assert measured.value is not None and measured.low is not None and measured.high is not None
    assert abs(measured.value - 0.5 - declared) < 0.02
    assert measured.low <= 0.5 + declared <= measured.high
    assert measured.high - measured.low < 0.06


def test_length_controlled_win_rate_removes_the_length_bias() -> None:
    """The judge favours the (longer) candidate: the raw win rate is inflated, the
    length-controlled one is the judge's win rate without its length term."""
    analysis, true_lc = _study(items=1500, position_bias=0.10, length_bias=0.3)
    result = analysis.results[0]
    raw, lc = result.win_rate.value, result.length_controlled.value
    assert raw is not None and lc is not None
    assert raw - true_lc > 0.06  # the bias is there to remove
    assert abs(lc - true_lc) < 0.03
    assert result.length_controlled.low <= true_lc <= result.length_controlled.high  # type: ignore[operator]
    assert result.length_slope.low > 0  # type: ignore[operator]
    # the binned curve rises with the length difference
    bins = result.length_bins
    assert len(bins) >= 3 and bins[-1].win_rate > bins[0].win_rate


def test_win_rate_interval_covers_and_is_paired_by_item() -> None:
    """Outcomes correlated within an item (two orders x epochs): the cluster-robust interval
    covers the truth about 95% of the time; an interval treating verdicts as independent
    would cover far less."""
    rng = np.random.default_rng(7)
    covered = 0
    studies = 300
    for _ in range(studies):
        items = 150
        p_item = rng.beta(0.6, 0.6, size=items)  # strongly item-dependent: heavy clustering
        y = (rng.random((items, 4)) < p_item[:, None]).astype(float)
        cluster = np.repeat(np.arange(items), 4)
        interval = win_rate(y.ravel(), cluster)
        covered += interval.low <= 0.5 <= interval.high  # type: ignore[operator]
    assert 0.92 <= covered / studies <= 0.98


def test_bradley_terry_recovers_strengths() -> None:
    rng = np.random.default_rng(3)
    truth = {"base": 0.0, "a": 0.5, "b": -0.7, "c": 1.2}
    side_a, side_b, outcome, cluster = [], [], [], []
    for name in ("a", "b", "c"):
        for item in range(800):
            p = 1 / (1 + np.exp(-(truth[name] - truth["base"])))
            side_a.append(name)
            side_b.append("base")
            outcome.append(float(rng.random() < p))
            cluster.append(item)
    strengths = {
        s.condition: s
        for s in bradley_terry(
            np.array(outcome), side_a, side_b, np.array(cluster), reference="base"
        )
    }
    for name, value in truth.items():
        s = strengths[name]
        assert s.low is not None and s.high is not None
        assert s.low <= value <= s.high, (name, s)
    assert [n for n in sorted(strengths, key=lambda n: strengths[n].value)] == [
        "b",
        "base",
        "a",
        "c",
    ]


def test_pairwise_verdict_parser() -> None:
    assert parse_pairwise_verdict('{"reasoning": "x", "winner": "first"}', structured=True) == (
        "first"
    )
    assert parse_pairwise_verdict('{"winner": "left"}', structured=True) is None
    text = 'Quoted: ```json\n{"winner": "second"}\n``` mine:\n```json\n{"winner": "tie"}\n```'
    assert parse_pairwise_verdict(text) == "tie"
    assert parse_pairwise_verdict("the first is better") is None


def test_position_bias_counts_only_decisive_verdicts() -> None:
    from itemeval.judging._pairwise import position_bias

    # 6 first wins, 4 second wins, 10 ties: the first-shown answer won 60% of decisive verdicts
    first = np.array([1.0] * 6 + [0.0] * 4 + [0.5] * 10 + [np.nan] * 3)
    result = position_bias(first, np.arange(len(first)))
    assert result.n == 10 and result.value == pytest.approx(0.6)


def test_equal_lengths_give_no_slope_and_the_plain_win_rate() -> None:
    rng = np.random.default_rng(5)
    items = np.repeat(np.arange(200), 2)
    shown = np.tile([True, False], 200)
    verdicts = ["first" if v else "second" for v in rng.random(400) < 0.5]
    analysis = analyse_pairwise(
        condition=["c"] * 400,
        baseline="b",
        item=items,
        condition_first=shown,
        verdict=verdicts,
        length_diff=np.zeros(400),
    )
    result = analysis.results[0]
    assert result.length_slope.value is None
    lc, raw = result.length_controlled, result.win_rate
    assert lc.value == pytest.approx(raw.value, abs=1e-6)
    assert lc.low is not None and lc.low < lc.value < lc.high  # type: ignore[operator]
