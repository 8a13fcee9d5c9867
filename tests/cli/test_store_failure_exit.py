"""Exit 2 means nothing was written; a store that fails after a run began writing is exit 5,
and both the message and the run's manifest say what the run had stored."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from runtime_files import write_study

from itemeval.cli.main import main
from itemeval.errors import ExitCode
from itemeval.runtime import _driver as driver


def test_a_store_failing_between_stages_is_exit_5_and_the_manifest_says_what_was_written(
    tmp_path, capsys, monkeypatch
):
    path = write_study(tmp_path, **{"budget.dev_items": 3, "facets.replications": 1})
    stage = driver._stage

    def then_damage_the_store(plan, name, *args, **kwargs):
        result = stage(plan, name, *args, **kwargs)
        if name == "generate":  # a damaged fragment, met when the grade stage reads solutions
            fragment = sorted((tmp_path / "store" / "solutions").rglob("*.parquet"))[0]
            (fragment.parent / f"0{fragment.name}").write_bytes(b"not parquet")
        return result

    monkeypatch.setattr(driver, "_stage", then_damage_the_store)
    code = main(["run", str(path), "--yes", "--no-ray"])
    err = capsys.readouterr().err
    assert code == ExitCode.STORE_FAILED == 5, err
    assert "stored so far: generate 24 rows" in err and "not a readable store fragment" in err
    (manifest,) = (tmp_path / "store" / "manifests").glob("*.json")
    record = json.loads(manifest.read_text())
    assert manifest.name in err
    assert record["outcome"] == "failed"
    assert "stored so far: generate 24 rows" in record["error"]
    assert record["counts"]["generate"]["done"] == 24
    stored = [
        f
        for f in (tmp_path / "store" / "solutions").rglob("*.parquet")
        if not f.name.startswith("0")
    ]
    assert sum(pq.read_metadata(f).num_rows for f in stored) == 24  # the rows are kept


def test_bad_input_is_exit_2_and_writes_nothing(tmp_path, capsys):
    path = write_study(tmp_path, **{"facets.prompt": ["../outside/prompt"]})
    assert main(["run", str(path), "--yes", "--no-ray"]) == ExitCode.BAD_INPUT
    assert "outside the prompts folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.yaml"]
