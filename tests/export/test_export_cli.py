"""`itemeval export` and `itemeval report` from the command line: outputs, defaults, selections,
and bad input (exit code 2, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
from export_studies import Run, read_parquet, read_table, run

from itemeval.api import Study
from itemeval.cli.main import main
from itemeval.errors import ExitCode


def test_export_json_and_a_condition_selection(demo_run: Run, tmp_path: Path, capsys):
    study = str(demo_run.study_path)
    out = tmp_path / "all"
    assert main(["export", study, "--out", str(out), "--format", "parquet", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == read_table(out).num_rows > 0
    assert summary["files"]["parquet"] == str(out / "long_table")

    strong = tmp_path / "strong"
    code = main(
        ["export", study, "--out", str(strong), "--format", "csv", "--condition", "strong_*"]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "Exported" in printed and "long_table_csv" in printed
    table = read_table(strong, csv=True)
    assert set(table.column("model_name").to_pylist()) == {"strong"}
    # Selecting generate conditions keeps every grader.
    assert set(table.column("grader_kind").to_pylist()) == {"scorer", "judge"}
    assert not (strong / "long_table").exists()


def test_bad_options_write_nothing(demo_run: Run, tmp_path: Path, capsys):
    study = str(demo_run.study_path)
    out = tmp_path / "out"
    assert (
        main(["export", study, "--out", str(out), "--format", "parquet,xlsx"]) == ExitCode.BAD_INPUT
    )
    assert "--format" in capsys.readouterr().err and not out.exists()
    assert main(["report", study, "--out", str(out), "--resamples", "0"]) == ExitCode.BAD_INPUT
    assert main(["export", study, "--out", str(out), "--condition", "nope"]) == ExitCode.BAD_INPUT
    assert not out.exists()


def test_defaults_write_next_to_the_store(tmp_path: Path, capsys):
    study = {
        "study": "tiny",
        "datasets": [
            {
                "name": "science-mc",
                "path": str(Path(__file__).parents[2] / "configs/datasets/science-mc"),
            }
        ],
        "endpoints": {"sim": {"kind": "sim"}},
        "models": [{"id": "sim/strong", "endpoint": "sim"}, {"id": "sim/weak", "endpoint": "sim"}],
        "budget": {"policy": "dev", "dev_items": 8},
    }
    result = run(tmp_path, study)
    exports = Path(result.store_url) / "exports"
    assert main(["export", str(result.study_path), "--eee-version", "0.3.0"]) == 0
    assert sorted(p.name for p in exports.iterdir()) == [
        "_export",
        "comparisons.csv",
        "comparisons.parquet",
        "eee",
        "export.json",
        "long_table",
        "long_table_csv",
        "rankings.csv",
        "rankings.parquet",
        "variance_components.csv",
        "variance_components.parquet",
    ]
    assert len(list((exports / "eee").rglob("*.json"))) == 2  # 2 models x 1 dataset x 1 scorer
    # one pair of conditions under the one grader: strong minus weak on the same 8 items
    comparisons = read_parquet(exports / "comparisons.parquet").to_pylist()
    assert len(comparisons) == 1
    pair = comparisons[0]
    assert pair["scope"] == "conditions" and pair["items"] == 8 and pair["test"] == "mcnemar_exact"
    assert pair["ci_low"] <= pair["difference"] <= pair["ci_high"]
    assert pair["p_adjusted"] == pair["p_value"]  # a family of one pair
    api = Study.from_yaml(result.study_path).comparisons()  # the Python API: the same tables
    assert api.comparisons.to_pylist() == comparisons
    assert api.rankings.equals(read_parquet(exports / "rankings.parquet"))
    aggregates = [
        json.loads(p.read_text())
        for p in (exports / "eee").rglob("*.json")
        if "samples" not in p.name and "evaluation_results" in p.read_text()
    ]
    uncertainty = aggregates[0]["evaluation_results"][0]["score_details"]["uncertainty"]
    assert {"standard_error", "confidence_interval", "standard_deviation"} <= set(uncertainty)
    capsys.readouterr()
    assert main(["report", str(result.study_path)]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0].startswith("Leaderboard of tiny: accuracy by scorer: auto")
    assert "sim-strong" in printed.splitlines()[4]  # ranked first
    assert printed.splitlines()[3].split()[:2] == ["tier", "rank"]
    assert "Which differences are real" in printed
    assert (exports / "report.html").exists() and (exports / "report.md").exists()
    table = read_table(exports)
    assert table.num_rows == 16 and pc.all(table.column("graded")).as_py()
