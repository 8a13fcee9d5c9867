"""Simulated judges err at their declared rates, and a length bias moves them as declared."""

from __future__ import annotations

import numpy as np

from itemeval.providers import SimModelSpec, SimSettings
from itemeval.scoring import parse_structured_verdict
from itemeval.simulator import Simulator


def verdicts(spec: SimModelSpec, solutions: list[str], target: str) -> np.ndarray:
    sim = Simulator(SimSettings(seed=7, models={"j": spec}))
    out = []
    for i, solution in enumerate(solutions):
        hints = {"item_id": f"q{i}", "target": target, "role": "judge", "solution": solution}
        reply = sim.answer(
            "sim/j", [{"role": "user", "content": "grade"}], hints=hints, structured=True
        )
        out.append(parse_structured_verdict(reply.text).score)
    return np.array(out)


def test_declared_false_pass_and_false_fail_rates() -> None:
    spec = SimModelSpec(ability=0.5, judge_false_pass=0.2, judge_false_fail=0.05)
    n = 4000
    passed_wrong = verdicts(spec, ["ANSWER: 41"] * n, "42").mean()
    passed_right = verdicts(spec, ["ANSWER: 42"] * n, "42").mean()
    assert abs(passed_wrong - 0.2) < 0.02 and abs((1 - passed_right) - 0.05) < 0.012


def test_a_length_bias_passes_long_wrong_answers_more_often() -> None:
    spec = SimModelSpec(
        ability=0.5, judge_false_pass=0.1, judge_false_fail=0.1, judge_length_bias=0.3
    )
    short = verdicts(spec, ["ANSWER: 41"] * 3000, "42").mean()
    long = verdicts(spec, ["x" * 1200 + "\nANSWER: 41"] * 3000, "42").mean()
    assert abs(short - 0.1) < 0.02 and abs(long - 0.4) < 0.03


def test_shared_errors_correlate_judges_as_declared() -> None:
    """Three judges with equal error rates and a shared share `s` of their draws: their error
    correlation is s squared, and the panel is worth 3 / (1 + 2 s^2) independent judges."""
    from itemeval.judging import panel_agreement

    n, share = 4000, 0.7
    solutions = [f"ANSWER: {41 + i % 2}" for i in range(n)]
    truth = np.array([float(i % 2) for i in range(n)])  # "ANSWER: 42" is right
    columns = []
    for name in ("a", "b", "c"):
        spec = SimModelSpec(
            ability=0.5, judge_false_pass=0.25, judge_false_fail=0.25, judge_shared_errors=share
        )
        sim = Simulator(SimSettings(seed=7, models={name: spec}))
        scores = []
        for i, solution in enumerate(solutions):
            hints = {"item_id": f"q{i}", "target": "42", "role": "judge", "solution": solution}
            reply = sim.answer(
                f"sim/{name}", [{"role": "user", "content": "grade"}], hints=hints, structured=True
            )
            scores.append(parse_structured_verdict(reply.text).score)
        columns.append(np.array(scores, dtype=float))
    agreement = panel_agreement(np.column_stack(columns), truth)
    assert abs(agreement.mean_error_correlation - share**2) < 0.05
    assert abs(agreement.effective_judges - 3 / (1 + 2 * share**2)) < 0.12
