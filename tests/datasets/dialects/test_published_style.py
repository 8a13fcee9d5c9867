"""A dataset laid out like the published CommonEval data (`published-style-tf/`, written for these
tests): `publisher: null`, `title: ''`, `taskPrompt: ''`, `licenseNotes: ''`, JSON booleans as
responses. It validates (with named, counted warnings), converts in both dialects and runs in a
study; `validate --strict` refuses it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from reference_reader import read_with_reference_reader

from itemeval.cli.main import main
from itemeval.datasets.format import read_dataset

PUBLISHED = Path(__file__).resolve().parent / "published-style-tf"
YAML = PUBLISHED / "published-style-tf.yaml"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_it_validates_with_each_deviation_named_and_counted(capsys):
    code, out, _ = run(capsys, "validate", str(PUBLISHED))
    assert code == 0, out
    assert f"{PUBLISHED}: ok" in out
    assert "dataset 'published-style-tf': 12 items (boolean 12)" in out
    assert "  4 warnings:" in out
    assert f"{YAML}, field 'publisher': required attribute is null; read as not given" in out
    for field in ("title", "licenseNotes"):
        assert f"{YAML}, field '{field}': empty; read as not given" in out
    assert f"{YAML}, field 'taskPrompt': empty taskPrompt treated as absent" in out
    assert "response" not in out  # JSON booleans are how booleans are written
    assert out.rstrip().endswith("1 path, 12 items, 0 invalid, 4 warnings")


def test_strict_validation_refuses_it(capsys):
    code, out, _ = run(capsys, "validate", "--strict", str(PUBLISHED))
    assert code == 2
    assert f"{PUBLISHED}: INVALID under --strict (4 warnings)" in out
    assert out.rstrip().endswith("1 path, 12 items, 1 invalid, 4 warnings")


def test_it_converts_in_both_dialects(tmp_path, capsys):
    items = list(read_dataset(str(PUBLISHED)).iter_items())
    assert [i.response for i in items[:2]] == ["True", "False"]
    for dialect in ("spec", "commoneval"):
        out_dir = tmp_path / dialect
        code, out, err = run(
            capsys, "convert", str(PUBLISHED), "--out", str(out_dir), "--dialect", dialect
        )
        assert code == 0, err
        assert f"wrote dataset 'published-style-tf' ({dialect} dialect): 12 items" in out
        assert "field 'publisher': required attribute not given; wrote 'unknown'" in err
        written = read_dataset(str(out_dir))
        assert written.meta_warnings == [] and written.meta.publisher == "unknown"
        assert written.meta.source == "Written for the itemeval tests (original statements)."
        back = list(written.iter_items())
        assert [i.spec_attributes() for i in back] == [i.spec_attributes() for i in items]
    _, read = read_with_reference_reader(tmp_path / "commoneval")
    assert [i.response for i in read[:2]] == [True, False]
    code, _, err = run(
        capsys, "convert", str(PUBLISHED), "--out", str(tmp_path / "strict"), "--strict"
    )
    assert code == 2 and "--strict: 4 warnings; nothing written" in err
    assert not (tmp_path / "strict").exists()


def test_it_runs_in_a_study(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(PUBLISHED, tmp_path / "published-style-tf")
    study = {
        "study": "published-style",
        "datasets": [{"path": "published-style-tf"}],
        "endpoints": {"sim": {"kind": "sim", "requests_per_minute": 60000}},
        "models": [{"id": "sim/strong", "endpoint": "sim"}],
        "facets": {"prompt": ["builtin:direct"], "scorer": ["auto"]},
        "budget": {"policy": "full"},
        "cache": {"location": str(tmp_path / "cache")},
    }
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    code, out, err = run(capsys, "plan", "study.yaml")
    assert code == 0, err
    assert "published-style-tf 12/12" in out
    assert "field 'publisher': required attribute is null" in err  # shown, not fatal
    code, out, err = run(capsys, "run", "study.yaml", "--no-ray", "--yes", "--quiet")
    assert code == 0, err
    code, out, err = run(capsys, "status", "study.yaml", "--json")
    assert code == 0, err
    conditions = json.loads(out)["conditions"]
    assert [(c["stage"], c["done"], c["errors"]) for c in conditions] == [
        ("solutions", 12, {}),
        ("grades", 12, {}),
    ]
