"""`itemeval.Study`: the same validation, errors and results as the CLI, which is a thin layer
over it; runs on local Ray; the long table from the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

import itemeval
from itemeval.cli.main import main
from itemeval.errors import ConfigError, InputError

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / "configs" / "datasets"


def _mapping(folder: Path, **extra: Any) -> dict[str, Any]:
    return {
        "study": "api",
        "store": str(folder / "store"),
        "datasets": [
            {"name": "arithmetic", "path": str(DATASETS / "arithmetic")},
            {"name": "science-mc", "path": str(DATASETS / "science-mc")},
        ],
        "endpoints": {"sim": {"kind": "sim"}},
        "models": [{"id": "sim/strong", "endpoint": "sim"}, {"id": "sim/weak", "endpoint": "sim"}],
        "sampling": {"max_tokens": 128},
        "facets": {"prompt": ["builtin:direct", "builtin:cot"], "grader": ["judge"]},
        "graders": {"judge": {"model": "sim/judge", "endpoint": "sim", "max_tokens": 200}},
        "budget": {"policy": "dev", "dev_items": 3},
        "cache": {"location": str(folder / "cache")},
        **extra,
    }


def _file(folder: Path, **extra: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(_mapping(folder, **extra), sort_keys=False))
    return path


def _cli_json(capsys, *argv: str) -> Any:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def _plain(payload: Any) -> Any:
    return json.loads(json.dumps(payload, default=str))


def test_plan_estimate_and_status_are_what_the_cli_prints(tmp_path, capsys):
    path = _file(tmp_path)
    study = itemeval.Study.from_yaml(path)
    assert _cli_json(capsys, "plan", str(path)) == _plain(study.plan().to_json())
    estimate = _cli_json(capsys, "estimate", str(path), "--limit", "2")
    assert estimate == _plain(study.estimate(limit=2).to_json())
    status = _cli_json(capsys, "status", str(path), "--condition", "*cot*")
    assert status == _plain(study.status(condition="*cot*").to_json())
    # from_dict gives the same study (a mapping has no file, so only the config hash differs)
    same = itemeval.Study.from_dict(_mapping(tmp_path))
    assert same.plan().to_json() == study.plan().to_json()


def test_a_mapping_error_names_the_field_path(tmp_path):
    bad = _mapping(tmp_path, sampling={"temprature": 0.2})
    with pytest.raises(ConfigError) as caught:
        itemeval.Study.from_dict(bad)
    (problem,) = caught.value.problems
    assert problem.field == "sampling.temprature" and problem.file is None
    assert problem.line is None and "did you mean 'temperature'" in str(problem)
    with pytest.raises(ConfigError, match="a study must be a mapping"):
        itemeval.Study.from_dict(["not", "a", "mapping"])  # type: ignore[arg-type]


def test_a_file_error_names_file_line_and_field(tmp_path):
    path = _file(tmp_path, sampling={"temprature": 0.2})
    with pytest.raises(ConfigError) as caught:
        itemeval.Study.from_yaml(path)
    (problem,) = caught.value.problems
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "temprature" in t)
    assert (problem.file, problem.line, problem.field) == (str(path), line, "sampling.temprature")


def test_relative_paths_of_a_mapping_resolve_against_base_dir(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "arithmetic").symlink_to(DATASETS / "arithmetic")
    mapping = _mapping(tmp_path)
    mapping["datasets"] = [{"name": "arithmetic", "path": "data/arithmetic"}]
    study = itemeval.Study.from_dict(mapping, base_dir=tmp_path)
    assert study.plan().selection.items == 3
    with pytest.raises(ConfigError, match="arithmetic"):
        itemeval.Study.from_dict(mapping, base_dir=tmp_path / "elsewhere").plan()


def test_stages_are_checked(tmp_path):
    study = itemeval.Study.from_dict(_mapping(tmp_path))
    with pytest.raises(InputError, match="unknown stage"):
        study.run("evaluate", in_process=True)


@pytest.mark.ray
def test_run_on_local_ray_then_results(tmp_path, ray_local):
    study = itemeval.Study.from_yaml(_file(tmp_path))
    generated = study.run("generate", quiet=True)
    assert generated.ok and set(generated.stages) == {"generate"}
    assert generated.stages["generate"].counts.done == 4 * 6  # conditions x items
    assert study.plan().pending == {"generate": 0, "grade": 2 * 24}
    graded = study.run(stages=["grade"], quiet=True)
    assert graded.ok and graded.stages["grade"].counts.done == 2 * 24
    assert study.run(quiet=True).status == "nothing_to_do"

    table = study.results()
    assert table.num_rows == 2 * 24  # one row per grading event (judge and auto)
    assert set(table.column("grader_kind").to_pylist()) == {"judge", "scorer"}
    # The same rows `export` streams to parquet.
    exported = study.export(str(tmp_path / "out"), formats=["parquet"])
    written = pq.read_table(exported.files["parquet"])
    key = ["grade_condition_id", "gen_condition_id", "item_id", "epoch"]
    assert sorted(written.select(key).to_pylist(), key=str) == sorted(
        table.select(key).to_pylist(), key=str
    )
    frame = table.to_pandas()
    assert frame.groupby("model_name")["correct"].mean().index.tolist() == [
        "sim/strong",
        "sim/weak",
    ]
    ungraded = study.results(include_ungraded=True)
    assert ungraded.num_rows == table.num_rows  # every solution is graded
