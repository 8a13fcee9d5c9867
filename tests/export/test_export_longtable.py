"""`itemeval export`: the long table on real runs: one row per grading event, parquet and CSV
agree, every column joined from the right place, streaming batches, compacted stores, stale
grades, ungraded cells, other filesystems, and nothing half-written on failure."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from export_studies import Run, read_table, run

from itemeval.export import ExportOptions, export_study
from itemeval.results import LONG_TABLE_SCHEMA, LongTableScan
from itemeval.results._columns import markdown_table
from itemeval.runtime import RunOptions
from itemeval.store import StudyStore, compact, read_snapshot_info

KEY = ["grade_condition_id", "gen_condition_id", "item_id", "epoch"]


def _export(demo_run: Run, out: Path, **options) -> pa.Table:
    plan = demo_run.plan()
    result = export_study(plan, ExportOptions(out=str(out), formats=("parquet",), **options))
    assert result.files["parquet"] == str(out / "long_table")
    return read_table(out)


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in KEY])


def test_one_row_per_grading_event_and_csv_equals_parquet(demo_run: Run, tmp_path: Path):
    plan = demo_run.plan()
    result = export_study(plan, ExportOptions(out=str(tmp_path), formats=("parquet", "csv")))
    table = read_table(tmp_path)
    assert table.schema.equals(LONG_TABLE_SCHEMA, check_metadata=False)

    store = StudyStore.open(demo_run.store_url)
    stored = store.read("grades", columns=["gen_condition_id", "item_id", "epoch", "status"])
    assert table.num_rows == stored.num_rows == result.rows
    assert table.group_by(KEY).aggregate([]).num_rows == table.num_rows  # keys are unique
    expected_keys = set(zip(*[stored.column(k).to_pylist() for k in KEY], strict=True))
    assert set(zip(*[table.column(k).to_pylist() for k in KEY], strict=True)) == expected_keys
    # The run had failures of both kinds; they are rows too.
    assert pc.sum(pc.equal(table.column("grade_status"), "error")).as_py() > 0
    assert pc.sum(pc.invert(table.column("parse_ok"))).as_py() > 0

    csv = read_table(tmp_path, csv=True)
    assert csv.num_rows == table.num_rows
    for name in table.column_names:
        assert csv.column(name).to_pylist() == table.column(name).to_pylist(), name

    summary = json.loads((tmp_path / "export.json").read_text())
    assert summary["rows"] == table.num_rows and summary["counts"]["stale"] == 0
    assert sum(p["rows"] for p in summary["counts"]["pairs"]) == table.num_rows


def test_every_column_comes_from_the_right_row(demo_run: Run, tmp_path: Path):
    table = _export(demo_run, tmp_path)
    plan = demo_run.plan()
    store = plan.store

    # Facets: each row's readable names are those of its conditions.
    generate = {c.id: c for c in plan.design.generate}
    grade = {c.id: c for c in plan.design.grade}
    facets = ["gen_condition_id", "model", "model_name", "prompt", "model_config", "params"]
    facets += ["grade_condition_id", "grader_kind", "grader", "grader_model", "rubric"]
    rows = table.select(facets).to_pylist()
    for row in rows[:: max(1, len(rows) // 200)]:
        g, j = generate[row["gen_condition_id"]], grade[row["grade_condition_id"]]
        assert (row["model"], row["model_name"], row["prompt"], row["model_config"]) == (
            g.model_id,
            g.model_label,
            g.prompt.name,
            g.config_name,
        )
        assert json.loads(row["params"]) == g.params.as_dict()
        assert row["grader_kind"] == j.kind
        assert row["grader"] == (j.grader_name if j.kind == "judge" else j.scorer)
        assert row["rubric"] == (j.rubric.name if j.rubric else None)

    # Items: input, target, modality, difficulty, metadata from the items snapshot.
    info = read_snapshot_info(store, "capitals-short", plan.datasets[3].fingerprint)
    items = {r["item_id"]: r for r in pq.read_table(info.location.path).to_pylist()}
    mine = table.filter(pc.equal(table.column("dataset"), "capitals-short")).to_pylist()
    assert mine
    for row in mine:
        item = items[row["item_id"]]
        for name in ("input", "target", "modality", "difficulty", "metadata", "task_prompt"):
            assert row[name] == item[name], name
    assert any("continent" in json.loads(r["metadata"]) for r in mine)

    # Solutions and grades: the logical rows of the store, matched by key.
    cid = plan.design.generate[0].id
    solutions = store.read_solutions([cid], columns=["item_id", "epoch", "text", "usd", "status"])
    by_key = {(r["item_id"], r["epoch"]): r for r in solutions.to_pylist()}
    judge = plan.design.judges[0].id
    grades = store.read_grades([judge]).filter(pc.equal(pc.field("gen_condition_id"), cid))
    grade_by_key = {(r["item_id"], r["epoch"]): r for r in grades.to_pylist()}
    pair = table.filter(
        pc.and_(
            pc.equal(table.column("gen_condition_id"), cid),
            pc.equal(table.column("grade_condition_id"), judge),
        )
    )
    assert pair.num_rows == len(grade_by_key)
    for row in pair.to_pylist():
        solution, grade_row = (
            by_key[(row["item_id"], row["epoch"])],
            grade_by_key[(row["item_id"], row["epoch"])],
        )
        assert row["solution_text"] == solution["text"]
        assert row["solution_usd"] == solution["usd"]
        assert row["score"] == grade_row["score"] and row["correct"] == grade_row["correct"]
        assert row["judge_text"] == grade_row["judge_text"]
        assert row["judge_reasoning"] == grade_row["reasoning"]
        assert row["parse_code"] == grade_row["parse_code"]
        assert row["grade_usd"] == grade_row["usd"] and row["graded_at"] == grade_row["written_at"]
        assert row["graded"] is True and row["grade_stale"] is False


def test_small_batches_and_a_compacted_store_give_the_same_table(
    demo_run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    reference = _export(demo_run, tmp_path / "a")
    tiny = _export(demo_run, tmp_path / "b", batch_rows=7)
    assert _sorted(tiny).equals(_sorted(reference))

    # A compacted copy of the store, written with row groups of 100 rows, so rows are fetched
    # row group by row group from big fragments.
    copy = tmp_path / "compacted"
    StudyStore.open(demo_run.store_url).root.fs.copy(demo_run.store_url, str(copy), recursive=True)
    monkeypatch.setattr("itemeval.store.fragments.ROW_GROUP_ROWS", 100)
    monkeypatch.setattr("itemeval.store._compact_merge.ROW_GROUP_ROWS", 100)
    # The run compacted its partitions already: without their summaries (derived data) every
    # fragment is written again, in the small row groups.
    for summary in Path(copy).rglob("_summary"):
        summary.unlink()
    compact(StudyStore.open(str(copy)))
    plan = demo_run.plan(store_url=str(copy))
    # One compacted fragment per generate condition in each grade partition (and a summary).
    fragments = [p for p in (copy / "grades").rglob("*.parquet") if not p.name.startswith("_")]
    assert len(fragments) == len(plan.design.grade) * len(plan.design.generate)
    assert pq.ParquetFile(fragments[0]).num_row_groups > 2
    export_study(plan, ExportOptions(out=str(tmp_path / "c"), formats=("parquet",)))
    compacted = read_table(tmp_path / "c")
    assert _sorted(compacted).equals(_sorted(reference))


def test_batches_stay_bounded(demo_run: Run):
    scan = LongTableScan(demo_run.plan(), batch_rows=50)
    sizes = [batch.num_rows for _, batch in scan]
    assert max(sizes) <= 50 and sum(sizes) == scan.counts.rows


def test_a_changed_solution_marks_its_grades_stale(tmp_path: Path):
    study = {**_small(), "facets": {"replications": 1, "scorer": ["auto"]}}
    result = run(tmp_path, study)
    plan = result.plan()
    cid = plan.design.generate[0].id
    store = plan.store
    # A forced re-generation wrote a different answer after the grade.
    store.write_solutions(
        cid,
        [
            {
                "item_id": "arithmetic.001",
                "epoch": 0,
                "status": "ok",
                "text": "a different answer",
                "request_hash": "forced",
                "model": "sim/strong",
                "run_id": "later",
            }
        ],
    )
    export_study(plan, ExportOptions(out=str(tmp_path / "out"), formats=("parquet",)))
    table = read_table(tmp_path / "out")
    stale = table.filter(pc.field("grade_stale"))
    assert stale.column("item_id").to_pylist() == ["arithmetic.001"]
    assert stale.column("solution_text").to_pylist() == ["a different answer"]
    assert pc.sum(table.column("grade_stale")).as_py() == 1


def test_ungraded_cells_only_when_asked(tmp_path: Path):
    options = RunOptions(no_ray=True, yes=True, quiet=True, stages=("generate",))
    result = run(tmp_path, _small(), options)
    plan = result.plan()
    out = tmp_path / "out"
    graded = export_study(plan, ExportOptions(out=str(out), formats=("parquet",)))
    assert graded.rows == 0 and read_table(out).num_rows == 0

    everything = export_study(
        plan, ExportOptions(out=str(out), formats=("parquet",), include_ungraded=True)
    )
    table = read_table(out)
    solutions = StudyStore.open(result.store_url).read("solutions", columns=["item_id"])
    assert table.num_rows == everything.rows == solutions.num_rows * len(plan.design.grade)
    assert not any(table.column("graded").to_pylist())
    assert table.column("grade_status").null_count == table.num_rows
    assert set(table.column("solution_status").to_pylist()) == {"ok"}


@pytest.mark.s3
def test_export_to_s3(demo_run: Run, s3_bucket: str, tmp_path: Path):
    import s3fs

    out = f"{s3_bucket}/exports/demo"
    fs = s3fs.S3FileSystem()
    fs.pipe(f"{out}/eee/data/gone/old/model/stale.json", b"{}")  # an earlier export's record
    fs.pipe(f"{out}/long_table.parquet", b"0.1.0's single file")
    result = export_study(demo_run.plan(), ExportOptions(out=out))
    assert result.files["parquet"] == f"{out}/long_table"
    remote = read_table(out)
    local = _export(demo_run, tmp_path)
    assert _sorted(remote).equals(_sorted(local))
    fs.invalidate_cache()
    assert sorted(p.rsplit("/", 1)[1] for p in fs.ls(out)) == [
        "_export",
        "comparisons.csv",
        "comparisons.parquet",
        "eee",
        "export.json",
        "judges.json",  # the study has a judge: its analysis (itemeval.judging)
        "long_table",
        "long_table_csv",
        "rankings.csv",
        "rankings.parquet",
        "variance_components.csv",
        "variance_components.parquet",
    ]
    records = fs.glob(f"{out}/eee/data/**/*.json")
    samples = fs.glob(f"{out}/eee/data/**/*_samples.jsonl")
    assert len(records) == len(samples) == result.eee_evaluations > 0
    # What the earlier export left is gone once this one is published; nothing staged stays.
    assert not fs.exists(f"{out}/eee/data/gone/old/model/stale.json")
    assert not fs.glob(f"{out}/**/.staged-*")
    # Again, unchanged: nothing is written.
    before = {p: fs.info(p)["ETag"] for p in fs.find(out)}
    again = export_study(demo_run.plan(), ExportOptions(out=out))
    fs.invalidate_cache()
    assert again.unchanged and {p: fs.info(p)["ETag"] for p in fs.find(out)} == before


def test_a_failed_export_leaves_no_partial_file(demo_run: Run, tmp_path: Path):
    copy = tmp_path / "store"
    StudyStore.open(demo_run.store_url).root.fs.copy(demo_run.store_url, str(copy), recursive=True)
    out = tmp_path / "out"
    plan = demo_run.plan(store_url=str(copy))
    # Damage the last grade partition: the export reads the first one, then fails.
    last = plan.design.grade[-1].id
    (copy / "grades" / f"grade_condition_id={last}" / "zz-damaged.parquet").write_bytes(b"junk")
    with pytest.raises(Exception, match="zz-damaged"):
        export_study(plan, ExportOptions(out=str(out)))
    assert not out.exists() or sorted(os.listdir(out)) == []


def _small() -> dict:
    return {
        "study": "small",
        "datasets": [
            {
                "name": "arithmetic",
                "path": str(Path(__file__).parents[2] / "configs/datasets/arithmetic"),
            }
        ],
        "endpoints": {"sim": {"kind": "sim"}},
        "models": [{"id": "sim/strong", "endpoint": "sim"}],
        "facets": {"replications": 1},
        "budget": {"policy": "dev", "dev_items": 6},
    }


def test_the_docs_list_every_long_table_column():
    docs = (Path(__file__).parents[2] / "docs" / "results.md").read_text(encoding="utf-8")
    assert markdown_table() in docs, "regenerate the column table in docs/results.md"
