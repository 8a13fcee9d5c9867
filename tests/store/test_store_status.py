"""Status counts per condition, from the deduplicated rows."""

from __future__ import annotations

import pytest

from itemeval.store import StudyStore, status_counts, text_hash
from itemeval.store._status import status_table


def test_generate_status(store: StudyStore, solution) -> None:
    store.write_solutions(
        "c1",
        [
            solution("q1", usd=0.01, input_tokens=100, output_tokens=20),
            solution("q2", ok=False, usd=0.0),
            solution("q3", ok=False, error_code="timeout", usd=0.0),
            solution("q4", cached=True, usd=0.0, attempts=0),
        ],
    )
    store.write_solutions("c1", [solution("q2", usd=0.02)])  # q2's retry succeeded
    (status,) = status_counts(store, "solutions", ["c1"], expected=6)
    assert (status.rows, status.done, status.cached) == (4, 3, 1)
    assert status.errors == {"timeout": 1}
    assert status.pending == 3
    assert status.input_tokens == 100 + 10 + 10 + 10  # q1, q2 (retry), q3 (error), q4
    assert status.usd == pytest.approx(0.01 + 0.02)
    assert status.usd_spent == pytest.approx(0.01 + 0.02)  # the failed attempt cost 0


def test_grade_status_counts_parse_failures(store: StudyStore, grade) -> None:
    store.write_grades(
        "judge",
        [
            grade("gen", "a", solution_hash=text_hash("A")),
            grade("gen", "b", solution_hash=text_hash("B"), parse_ok=False),
            grade("gen", "c", solution_hash=text_hash("C"), ok=False),
        ],
    )
    store.write_grades("judge", [grade("gen", "a", solution_hash=text_hash("A"))])  # duplicate
    (status,) = status_counts(store, "grades", None, expected={"judge": 4})
    assert (status.condition_id, status.rows, status.done) == ("judge", 3, 2)
    assert status.parse_failures == 1 and status.errors == {"rate_limited": 1}
    assert status.usd == pytest.approx(3 * 0.0005)
    assert status.usd_spent == pytest.approx(4 * 0.0005)
    table = status_table([status])
    assert table.column("errors").to_pylist() == ["rate_limited=1"]


def test_status_of_a_condition_without_rows(store: StudyStore) -> None:
    (status,) = status_counts(store, "solutions", ["nothing-yet"], expected=10)
    assert (status.rows, status.done, status.pending, status.usd) == (0, 0, 10, 0.0)


def test_prompt_cache_savings_count_paid_rows_at_the_models_prices(store: StudyStore, solution):
    from itemeval.providers.money import Pricing

    pricing = Pricing.load()
    store.write_solutions(
        "c1",
        [
            solution("q1", input_tokens=5000, cached_input_tokens=4096, model="sim/strong"),
            solution("q2", input_tokens=5000, cached_input_tokens=1024, model="sim/weak"),
            # A response-cache hit paid nothing: its prompt-cache reads saved nothing here.
            solution("q3", input_tokens=5000, cached_input_tokens=4096, cached=True, usd=0.0),
        ],
    )
    (status,) = status_counts(store, "solutions", ["c1"], pricing=pricing)
    assert status.cached_input_tokens == 4096 + 1024 + 4096
    strong, weak = pricing.price("sim/strong"), pricing.price("sim/weak")
    assert strong is not None and weak is not None
    expected = 4096 * (3.00 - 0.30) / 1e6 + 1024 * (0.10 - 0.01) / 1e6
    assert status.prompt_cache_saved_usd == pytest.approx(expected)
    assert status.as_dict()["prompt_cache_saved_usd"] == pytest.approx(expected)
    (unpriced,) = status_counts(store, "solutions", ["c1"])
    assert unpriced.prompt_cache_saved_usd == 0.0
