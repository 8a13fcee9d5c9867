"""The write gates: `build_table` fills defaults, `check_table` refuses anything inexact."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest

from itemeval.errors import ExitCode, StoreError
from itemeval.store import GRADE_SCHEMA, RESPONSE_SCHEMA, SOLUTION_SCHEMA, text_hash
from itemeval.store._schemas import COLUMNS, build_table, check_table


def test_text_hash_is_first_16_hex_of_sha256() -> None:
    assert text_hash("42") == hashlib.sha256(b"42").hexdigest()[:16]
    assert len(text_hash("")) == 16


def test_build_table_fills_documented_defaults(solution) -> None:
    table = build_table(SOLUTION_SCHEMA, [solution("q1", text="Paris")])
    row = table.to_pylist()[0]
    assert table.schema.equals(SOLUTION_SCHEMA, check_metadata=False)
    assert row["text_hash"] == text_hash("Paris")
    assert row["attempts"] == 1 and row["cached"] is False
    assert row["error_code"] is None and row["written_at"].tzinfo is not None


def test_build_table_defaults_parse_ok_from_status(grade) -> None:
    rows = [grade("g", "q1", solution_hash="h" * 16), grade("g", "q2", solution_hash="h", ok=False)]
    for row in rows:
        row.pop("parse_ok")
    table = build_table(GRADE_SCHEMA, rows)
    assert table.column("parse_ok").to_pylist() == [True, False]
    assert table.column("request_hash").type == pa.string()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"colour": "red"}, None),  # unknown column
        ({"model": None}, "model"),  # required, no default
        ({"epoch": "zero"}, None),  # wrong kind
        ({"status": "done"}, "status"),
        ({"status": "error", "error_code": None}, "error_code"),
        ({"epoch": -1}, "epoch"),
        ({"text_hash": "0" * 16}, "text_hash"),
    ],
)
def test_build_table_rejects_bad_rows(solution, change, field) -> None:
    row = solution("q1")
    row.update(change)
    with pytest.raises(StoreError) as info:
        build_table(SOLUTION_SCHEMA, [row])
    assert info.value.exit_code == ExitCode.BAD_INPUT
    if field:
        assert info.value.problems[0].field == field


def test_build_table_fills_defaults_row_by_row_and_checks_given_hashes(solution) -> None:
    # Some rows carry a value, others take the default; a given text_hash is still verified.
    given = solution("q1", text="Paris", attempts=3, tier="batch")
    table = build_table(SOLUTION_SCHEMA, [given, solution("q2", text="Rome")])
    assert table.column("attempts").to_pylist() == [3, 1]
    assert table.column("tier").to_pylist() == ["batch", "live"]
    assert table.column("text_hash").to_pylist() == [text_hash("Paris"), text_hash("Rome")]
    assert check_table(table, SOLUTION_SCHEMA).equals(table)  # what the store would accept
    wrong = solution("q3", text="Oslo", text_hash=text_hash("Bergen"))
    with pytest.raises(StoreError) as info:
        build_table(SOLUTION_SCHEMA, [solution("q2", text="Rome"), wrong])
    assert info.value.problems[0].field == "text_hash"
    assert "row 1" in info.value.problems[0].message


def test_check_table_never_casts(solution) -> None:
    table = build_table(SOLUTION_SCHEMA, [solution("q1")])
    as_int64 = table.set_column(1, "epoch", table.column("epoch").cast(pa.int64()))
    with pytest.raises(StoreError, match="type int64, the store keeps int32"):
        check_table(as_int64, SOLUTION_SCHEMA)


def test_check_table_names_the_partition_column(solution) -> None:
    table = build_table(SOLUTION_SCHEMA, [solution("q1")])
    with_partition = table.append_column("condition_id", pa.array(["c"]))
    with pytest.raises(StoreError) as info:
        check_table(with_partition, SOLUTION_SCHEMA)
    assert "partition column is not stored" in str(info.value)


def test_check_table_reports_missing_columns_and_nulls(solution) -> None:
    table = build_table(SOLUTION_SCHEMA, [solution("q1")])
    with pytest.raises(StoreError, match="missing column"):
        check_table(table.drop_columns(["model"]), SOLUTION_SCHEMA)
    nulls = table.set_column(
        table.schema.get_field_index("model"), "model", pa.array([None], pa.string())
    )
    with pytest.raises(StoreError, match="null value in row 0"):
        check_table(nulls, SOLUTION_SCHEMA)


def test_check_table_reorders_columns_without_changing_values(solution) -> None:
    table = build_table(SOLUTION_SCHEMA, [solution("q1"), solution("q2")])
    shuffled = table.select(list(reversed(table.column_names)))
    assert check_table(shuffled, SOLUTION_SCHEMA).equals(table)


def test_every_column_is_documented() -> None:
    for name, schema in (
        ("solutions", SOLUTION_SCHEMA),
        ("grades", GRADE_SCHEMA),
        ("responses", RESPONSE_SCHEMA),
    ):
        documented = COLUMNS[name]
        assert [c.name for c in documented] == schema.names
        assert all(len(c.doc) > 10 for c in documented)
        assert "condition_id" not in schema.names and "grade_condition_id" not in schema.names
