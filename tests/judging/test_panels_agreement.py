"""Panels combine stored verdicts by their rule; agreement, error correlation and the effective
number of judges on verdicts whose truth is known."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from itemeval.judging import PanelRule, Shape, combine, panel_agreement, panel_grades
from itemeval.judging._agreement import effective_judges, kappa


def test_majority_and_its_tie_rule() -> None:
    passed = np.array([[1, 1, 0], [1, 0, 0], [1, 0, 1]], dtype=bool)
    verdict, score = combine(passed, passed.astype(float), PanelRule("majority"))
    assert verdict.tolist() == [True, False, True]
    assert score.tolist() == pytest.approx([2 / 3, 1 / 3, 2 / 3])
    split = np.array([[1, 0], [1, 1], [0, 0]], dtype=bool)
    assert combine(split, split.astype(float), PanelRule("majority", "fail"))[0].tolist() == [
        False,
        True,
        False,
    ]
    assert combine(split, split.astype(float), PanelRule("majority", "pass"))[0].tolist() == [
        True,
        True,
        False,
    ]


def test_mean_and_median_against_the_pass_score() -> None:
    scores = np.array([[2.0, 4.0, 9.0], [6.0, 6.0, 0.0]])
    passed = scores >= 5
    mean, value = combine(passed, scores, PanelRule("mean", pass_score=5.0))
    assert value.tolist() == [5.0, 4.0] and mean.tolist() == [True, False]
    median, value = combine(passed, scores, PanelRule("median", pass_score=5.0))
    assert value.tolist() == [4.0, 6.0] and median.tolist() == [False, True]
    even = np.array([[3.0, 7.0]])
    assert combine(even >= 5, even, PanelRule("median", "fail", 5.0))[1].tolist() == [3.0]
    assert combine(even >= 5, even, PanelRule("median", "pass", 5.0))[1].tolist() == [7.0]


def test_a_threshold_makes_the_mean_of_pass_fail_verdicts_an_average():
    """Over pass/fail verdicts the rubric's pass score (1) makes `mean` unanimity: a panel of a
    lenient and a strict judge scores below both (the study file refuses it without a
    `threshold`). At 0.5 it passes what at least half passed: at or above the more lenient
    judge with two members, the majority with three."""
    rng = np.random.default_rng(8)
    truth = rng.random(5000) < 0.7
    lenient = np.where(truth, rng.random(truth.size) < 0.97, rng.random(truth.size) < 0.5)
    strict = np.where(truth, rng.random(truth.size) < 0.8, rng.random(truth.size) < 0.1)
    two = np.column_stack([lenient, strict])
    unanimous, _ = combine(two, two.astype(float), PanelRule("mean", pass_score=1.0))
    assert unanimous.mean() < min(lenient.mean(), strict.mean())
    assert (unanimous == (lenient & strict)).all()
    half, share = combine(two, two.astype(float), PanelRule("mean", pass_score=0.5))
    assert (half == (lenient | strict)).all() and half.mean() >= max(lenient.mean(), strict.mean())
    assert share.tolist() == two.mean(axis=1).tolist()
    third = truth ^ (rng.random(truth.size) < 0.2)
    three = np.column_stack([lenient, strict, third])
    mean_half, _ = combine(three, three.astype(float), PanelRule("mean", pass_score=0.5))
    majority, _ = combine(three, three.astype(float), PanelRule("majority"))
    assert (mean_half == majority).all()
    median, _ = combine(three, three.astype(float), PanelRule("median", pass_score=1.0))
    assert (median == majority).all()


def _grades(rows: list[tuple[int, int, int, int, bool, bool]]) -> pa.Table:
    grade, gen, item, epoch, correct, valid = zip(*rows, strict=True)
    n = len(rows)
    return pa.table(
        {
            "grade": pa.array(grade, pa.int32()),
            "gen": pa.array(gen, pa.int32()),
            "item": pa.array(item, pa.int32()),
            "dataset": pa.array([0] * n, pa.int32()),
            "epoch": pa.array(epoch, pa.int32()),
            "correct": pa.array(correct),
            "score": pa.array([float(c) for c in correct]),
            "valid": pa.array(valid),
        }
    )


def test_a_panel_grades_the_answers_every_member_graded() -> None:
    shape = Shape(gens=2, items=3, epochs=1)
    rows = [
        # grade, gen, item, epoch, correct, valid
        (0, 0, 0, 0, True, True),
        (1, 0, 0, 0, True, True),
        (2, 0, 0, 0, False, True),
        (0, 1, 2, 0, False, True),
        (1, 1, 2, 0, False, True),
        (2, 1, 2, 0, True, True),
        (0, 0, 1, 0, True, True),  # member 1 failed to parse here, member 2 never graded it
        (1, 0, 1, 0, True, False),
    ]
    panel = panel_grades(_grades(rows), [0, 1, 2], 7, PanelRule(), shape)
    columns = [panel.column(c).to_pylist() for c in ("gen", "item", "correct")]
    got = sorted(zip(*columns, strict=True))
    assert got == [(0, 0, True), (1, 2, False)]
    assert set(panel.column("grade").to_pylist()) == {7}


def test_kappa_of_known_tables() -> None:
    a = np.array([1, 1, 0, 0], dtype=bool)
    assert kappa(a, a) == (1.0, 1.0)
    assert kappa(a, ~a) == (0.0, -1.0)


def test_errors_that_coincide_are_worth_one_judge_and_independent_ones_all_of_them() -> None:
    rng = np.random.default_rng(3)
    gold = (rng.random(20_000) < 0.6).astype(float)
    shared = rng.random(gold.size) < 0.2
    same = np.column_stack([np.where(shared, 1 - gold, gold)] * 4)
    agreement = panel_agreement(same, gold)
    assert agreement.mean_error_correlation == pytest.approx(1.0)
    assert agreement.effective_judges == pytest.approx(1.0)
    flips = rng.random((gold.size, 4)) < 0.2
    independent = np.where(flips, 1 - gold[:, None], gold[:, None])
    agreement = panel_agreement(independent, gold)
    assert abs(agreement.mean_error_correlation) < 0.03
    assert agreement.effective_judges == pytest.approx(4.0, abs=0.3)
    assert effective_judges(6, 0.36) == pytest.approx(6 / (1 + 5 * 0.36))
    assert panel_agreement(independent).effective_judges is None  # no gold, no claim


def test_a_members_parse_failure_is_the_panels_and_never_pending():
    """A member's parse failure is final, so the panel's verdict on that answer never comes:
    the panel has a parse failure there (not valid), which its coverage counts as such; a
    member's provider error (retried by a later run) and a stale parse failure leave it
    pending."""
    shape = Shape(gens=1, items=4, epochs=1)
    rows = [
        # grade, gen, item, epoch, correct, valid, ok, parse_ok, stale
        (0, 0, 0, 0, True, True, True, True, False),
        (1, 0, 0, 0, True, True, True, True, False),
        (0, 0, 1, 0, True, True, True, True, False),
        (1, 0, 1, 0, None, False, True, False, False),  # member 1: parse failure
        (0, 0, 2, 0, True, True, True, True, False),
        (1, 0, 2, 0, None, False, False, True, False),  # member 1: provider error
        (0, 0, 3, 0, True, True, True, True, False),
        (1, 0, 3, 0, None, False, True, False, True),  # a stale parse failure
    ]
    names = ["grade", "gen", "item", "epoch", "correct", "valid", "ok", "parse_ok", "stale"]
    columns = dict(zip(names, zip(*rows, strict=True), strict=True))
    table = pa.table(
        {
            **{k: pa.array(columns[k], pa.int32()) for k in ("grade", "gen", "item", "epoch")},
            "dataset": pa.array([0] * len(rows), pa.int32()),
            "score": pa.array([None if c is None else float(c) for c in columns["correct"]]),
            **{k: pa.array(columns[k], pa.bool_()) for k in names[4:]},
        }
    )
    panel = panel_grades(table, [0, 1], 5, PanelRule(), shape).to_pylist()
    by_item = {row["item"]: row for row in panel}
    assert sorted(by_item) == [0, 1]  # items 2 and 3 may still get a verdict
    assert by_item[0]["valid"] and by_item[0]["correct"]
    never = by_item[1]
    assert not never["valid"] and never["ok"] and not never["parse_ok"]
    assert never["parse_code"] == "member_parse_failure" and never["correct"] is None
