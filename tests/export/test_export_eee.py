"""Every Eval Ever records of a real run: every record validates against the packaged schemas
(seed formats and 0.3.0), aggregates and samples agree, no nulls, string-only detail maps, and
failed or unparsed grades are left out and counted."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow.compute as pc
import pytest
from export_studies import Run, eee_files, jsonl, read_table

from itemeval.export import ExportOptions, eee_schema, export_study

UUID4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


@pytest.fixture(scope="module", params=["0.2.0", "0.3.0"])
def exported(request: pytest.FixtureRequest, demo_run: Run, tmp_path_factory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp(f"eee-{request.param}")
    options = ExportOptions(out=str(out), formats=("parquet", "eee"), eee_version=request.param)
    result = export_study(demo_run.plan(), options)
    assert result.eee_evaluations > 0 and result.eee_samples > 0
    return request.param, out


def _nulls(value: Any, path: str = "") -> list[str]:
    if value is None:
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _nulls(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _nulls(v, f"{path}[{i}]")]
    return []


def test_every_record_validates_and_has_no_nulls(exported):
    version, out = exported
    aggregates, samples = eee_files(out)
    aggregate_schema = jsonschema.Draft7Validator(eee_schema("aggregate", version))
    instance_schema = jsonschema.Draft7Validator(eee_schema("instance", version))
    assert aggregates and len(aggregates) == len(samples)
    records = 0
    for path in aggregates:
        record = json.loads(path.read_text())
        errors = [e.message for e in aggregate_schema.iter_errors(record)]
        assert not errors, (path, errors[:3])
        assert not _nulls(record), (path, _nulls(record)[:3])
        records += 1
    for path in samples:
        for line in jsonl(path):
            errors = [e.message for e in instance_schema.iter_errors(line)]
            assert not errors, (path, errors[:3])
            assert not _nulls(line), (path, _nulls(line)[:3])
            records += 1
    assert records > 2000


def test_aggregates_and_samples_agree(exported, demo_run: Run):
    version, out = exported
    aggregates, _ = eee_files(out)
    plan = demo_run.plan()
    # One evaluation per generate condition x dataset x grade condition (all were graded).
    assert len(aggregates) == len(plan.design.generate) * len(plan.datasets) * len(
        plan.design.grade
    )
    for path in aggregates:
        assert re.fullmatch(rf".*/eee/data/[^/]+/sim/(strong|medium|weak)/{UUID4}\.json", str(path))
        record = json.loads(path.read_text())
        samples_path = path.with_name(path.stem + "_samples.jsonl")
        lines = jsonl(samples_path)
        result = record["evaluation_results"][0]
        score = result["score_details"]
        assert {line["evaluation_id"] for line in lines} == {record["evaluation_id"]}
        assert {line["model_id"] for line in lines} == {record["model_info"]["id"]}
        assert {line["evaluation_name"] for line in lines} == {result["evaluation_name"]}
        correct = sum(line["evaluation"]["is_correct"] for line in lines)
        assert score["score"] == pytest.approx(correct / len(lines))
        details = score["details"]
        assert float(details["ci_lower"]) <= score["score"] <= float(details["ci_upper"])
        assert int(details["graded_answers"]) == len(lines)
        assert details["confidence_level"] == "0.95"
        if version == "0.3.0":
            described = record["detailed_evaluation_results"]
            assert described["total_rows"] == len(lines)
            assert described["checksum"] == hashlib.sha256(samples_path.read_bytes()).hexdigest()
            assert str(samples_path).endswith(described["file_path"])
            interval = score["uncertainty"]["confidence_interval"]
            assert interval["lower"] <= score["score"] <= interval["upper"]
            assert {line["evaluation_result_id"] for line in lines} == {
                result["evaluation_result_id"]
            }
            for mapping in (details, record["model_info"]["additional_details"]):
                assert all(isinstance(v, str) for v in mapping.values())
        else:
            assert record["detailed_evaluation_results_per_samples"] == samples_path.name


def test_samples_carry_the_long_table_values(exported, demo_run: Run):
    version, out = exported
    table = read_table(out)
    final = table.filter(
        pc.and_(
            pc.and_(pc.equal(table.column("grade_status"), "ok"), table.column("parse_ok")),
            pc.is_valid(table.column("correct")),
        )
    )
    by_key = {
        (r["gen_condition_id"], r["grade_condition_id"], r["item_id"], r["epoch"]): r
        for r in final.to_pylist()
    }
    _, samples = eee_files(out)
    seen = 0
    for path in samples:
        for line in jsonl(path):
            meta = line["metadata"]
            row = by_key[
                (
                    meta["gen_condition_id"],
                    meta["grade_condition_id"],
                    line["sample_id"],
                    int(meta["epoch"]),
                )
            ]
            raw = line["output"]["raw"]
            assert (raw[0] if version == "0.3.0" else raw) == row["solution_text"]
            reference = line["input"]["reference"]
            assert (reference[0] if version == "0.3.0" else reference) == row["target"]
            assert line["input"]["raw"] == row["input"]
            assert line["evaluation"] == {"score": row["score"], "is_correct": row["correct"]}
            assert line["token_usage"]["input_tokens"] == row["solution_input_tokens"]
            if row["grader_kind"] == "scorer" and row["extracted"] is not None:
                assert line["answer_attribution"][0]["extracted_value"] == row["extracted"]
            assert row["input"] in line["input"]["formatted"]  # the rendered prompt
            seen += 1
    # Every final grade is a sample, and nothing else is.
    assert seen == final.num_rows


def test_failed_and_unparsed_grades_are_counted_not_sampled(exported, demo_run: Run):
    _, out = exported
    table = read_table(out)
    summary = json.loads((out / "export.json").read_text())
    excluded = summary["eee"]["excluded"]
    unparsed = table.filter(
        pc.and_(pc.equal(table.column("grade_status"), "ok"), pc.invert(table.column("parse_ok")))
    )
    failed = table.filter(pc.equal(table.column("grade_status"), "error"))
    assert unparsed.num_rows > 0 and failed.num_rows > 0
    assert (
        sum(v for k, v in excluded.items() if k.startswith("parse_failure_")) == unparsed.num_rows
    )
    assert sum(v for k, v in excluded.items() if k.startswith("grade_error_")) == failed.num_rows
    assert summary["eee"]["samples"] + unparsed.num_rows + failed.num_rows == table.num_rows


def _row(**changes: Any) -> dict[str, Any]:
    from itemeval.export._eee.records import SAMPLE_COLUMNS

    row: dict[str, Any] = dict.fromkeys(SAMPLE_COLUMNS)
    row |= {
        "gen_condition_id": "m_direct_default--0123456789ab",
        "grade_condition_id": "auto--ba9876543210",
        "model": "acme/model-x",
        "prompt": "builtin:direct",
        "model_config": "default",
        "grader_kind": "scorer",
        "grader": "auto",
        "item_id": "q.001",
        "dataset": "quiz",
        "epoch": 0,
        "input": "Which one?\nA. x\nB. y",
        "target": "B",
        "metadata": '{"choices": ["x", "y"]}',
        "solution_text": "ANSWER: B",
        "extracted": "B",
        "score": 1.0,
        "correct": True,
    }
    return row | changes


def test_instance_records_leave_absent_values_out():
    from itemeval.export._eee.records import (
        DatasetSourceInfo,
        Evaluation,
        RecordContext,
        build_instance,
        item_choices,
    )
    from itemeval.results import GenerateFacets, GradeFacets

    generate = GenerateFacets(
        "m_direct_default--0123456789ab",
        "m_direct_default",
        "acme/model-x",
        "x",
        "builtin:direct",
        "default",
        "{}",
        "api",
    )
    grade = GradeFacets("auto--ba9876543210", "auto", "scorer", "auto", None, None, None, None)
    dataset = DatasetSourceInfo("quiz", 1, "f" * 64, "data/quiz", None)
    for version in ("0.2.0", "0.3.0"):
        context = RecordContext("s", version, "1.5", "unknown", "third_party", 1)
        evaluation = Evaluation(context, generate, grade, dataset, "openai", "{{ input }}", None)
        choices = item_choices({"choices": ["x", "y"]})
        record = build_instance(evaluation, _row(), "Which one?", choices)
        errors = list(
            jsonschema.Draft7Validator(eee_schema("instance", version)).iter_errors(record)
        )
        assert not errors, [e.message for e in errors]
        assert not _nulls(record)
        assert record["input"]["choices"] == ["x", "y"]
        assert "token_usage" not in record and "performance" not in record
        assert "grader_model" not in record["metadata"] and record["metadata"]["epoch"] == "0"
        assert record["answer_attribution"][0]["extracted_value"] == "B"
        assert evaluation.folder == "data/quiz/acme/model-x"
        assert re.fullmatch(UUID4, evaluation.uuid)
        judged = build_instance(evaluation, _row(grader_kind="judge", extracted=None))
        assert judged["answer_attribution"] == [] and "choices" not in judged["input"]
    assert item_choices({"choices": [1, 2]}) is None and item_choices({}) is None
