"""The round trip: a study exported to Every Eval Ever and imported into a fresh store gives the
same leaderboard, to the last digit, and the same per-item grades (docs/importing.md)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from export_studies import Run

from itemeval import Study
from itemeval.export import ExportOptions, export_study, leaderboard_text
from itemeval.importing import import_sources


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
