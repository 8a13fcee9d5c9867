"""The round trip: a study exported to Every Eval Ever and imported into a fresh store gives the
same leaderboard, to the last digit, and the same per-item grades (docs/importing.md)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from export_studies import Run

from itemeval import Study
from itemeval.export import ExportOptions, export_study
from itemeval.importing import import_sources
from itemeval.report import leaderboard_text


def _grades(table: pa.Table) -> set[tuple]:
    final = [
        row
        for row in table.to_pylist()
        if row["graded"]
        and row["grade_status"] == "ok"
        and row["parse_ok"]
        and row["correct"] is not None
        and not row["grade_stale"]
    ]
    return {
        (
            r["gen_condition_id"].rsplit("--", 1)[0],
            r["grade_condition_id"].rsplit("--", 1)[0],
            r["item_id"],
            r["epoch"],
            r["score"],
            r["correct"],
            r["solution_text"],
        )
        for r in final
    }


@pytest.mark.parametrize("version", ["0.2.0", "0.3.0"])
def test_export_then_import_gives_the_same_leaderboard_and_grades(
    version: str, demo_run: Run, tmp_path: Path
):
    plan = demo_run.plan()
    out = tmp_path / "out"
    export_study(plan, ExportOptions(out=str(out), formats=("eee",), eee_version=version))
    store = tmp_path / "fresh"
    result = import_sources(str(store), [str(out / "eee")])
    assert result.rejected == {}
    assert result.import_id is not None

    imported = Study.from_store(str(store))
    assert imported.leaderboard() == leaderboard_text(plan)
    native = Study.from_yaml(demo_run.study_path).results()
    assert _grades(imported.results()) == _grades(native)

    again = import_sources(str(store), [str(out / "eee")])
    assert again.import_id is None and again.samples == 0
    assert len(again.skipped) == len(result.files)


def test_the_report_says_where_an_imported_condition_matches_a_native_one(
    demo_run: Run, tmp_path: Path
):
    out = tmp_path / "out"
    export_study(demo_run.plan(), ExportOptions(out=str(out), formats=("eee",)))
    store = tmp_path / "fresh"
    import_sources(str(store), [str(out / "eee")])
    mapping = yaml.safe_load(demo_run.study_path.read_text())
    # the imported datasets stand in for the study's own (same names: the store pins them)
    datasets = [
        {"name": d["name"], "path": str(store / "imported" / "datasets" / d["name"])}
        for d in mapping["datasets"]
    ]
    mapping |= {"store": str(store), "imported": ["*"], "datasets": datasets}
    study = Study.from_dict(mapping, base_dir=demo_run.study_path.parent)
    design = study.design()
    result = study.report(str(tmp_path / "report"))
    markdown = Path(result.markdown).read_text()
    for native in design.generate:
        assert (
            f"{native.slug} (imported from itemeval) has the same model, parameters and prompt "
            f"as {native.slug}:"
        ) in markdown

    # A run reuses nothing it imported unless asked: every native cell is still to generate.
    before = study.plan().plan.pending_generate
    native_ids = [c.id for c in design.generate]
    assert all(before.count(i) == len(before.item_ids) * 2 for i in native_ids)
    reused = study.reuse_imported()  # `run --reuse-imported`
    assert {r.native for r in reused} == set(native_ids) and all(r.rows > 0 for r in reused)
    after = study.plan().plan.pending_generate
    for r in reused:
        assert after.count(r.native) == before.count(r.native) - r.rows
    assert all(r.rows == 0 for r in study.reuse_imported())  # nothing twice


def test_a_native_store_reads_without_its_study(demo_run: Run):
    native = Study.from_yaml(demo_run.study_path)
    alone = Study.from_store(demo_run.store_url)  # conditions from the runs' manifests
    assert _grades(alone.results()) == _grades(native.results())
    board = alone.leaderboard()
    assert all(c.slug in board for c in native.design().generate)
    status = alone.status()
    assert {r["condition_id"] for r in status.conditions} == {
        c.id for c in (*native.design().generate, *native.design().grade)
    }
