"""Counts in plan, estimate and validate output agree with their nouns ("1 condition",
"2 conditions")."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml

from itemeval.cli.main import main
from itemeval.cli.options import counted

REPO = Path(__file__).resolve().parents[2]
# a number followed by a noun in the plural, where the number is 1
SINGULAR_WITH_PLURAL = re.compile(
    r"(?<![\d.,$])1 (conditions|items|epochs|paths|warnings|errors|parts)\b"
)


def test_counted():
    assert counted(0, "item") == "0 items"
    assert counted(1, "item") == "1 item"
    assert counted(1319, "item") == "1,319 items"
    assert counted(2, "more warning line") == "2 more warning lines"


def one_of_everything(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "configs" / "datasets" / "arithmetic", tmp_path / "arithmetic")
    study = {
        "study": "tiny",
        "datasets": [{"path": "arithmetic"}],
        "endpoints": {"sim": {"kind": "sim"}},
        "models": [{"id": "sim/strong", "endpoint": "sim"}],
        "facets": {"prompt": ["builtin:direct"], "scorer": ["auto"], "replications": 1},
        "cache": {"location": str(tmp_path / "cache")},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def test_plan_and_estimate_with_one_of_everything(tmp_path, capsys):
    study = one_of_everything(tmp_path)
    store = str(tmp_path / "store")
    assert main(["plan", str(study), "--limit", "1", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "Study tiny: 1 item (first 1 of each dataset: arithmetic 1/33), 1 epoch" in out
    assert "Cells: generate 1 condition x 1 item x 1 epoch = 1;" in out
    assert not SINGULAR_WITH_PLURAL.search(out), out
    assert main(["estimate", str(study), "--limit", "1", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "Study tiny: 1 item (" in out and not SINGULAR_WITH_PLURAL.search(out), out


def test_validate_with_one_of_everything(tmp_path, capsys):
    directory = tmp_path / "one"
    directory.mkdir()
    meta = {"identifier": "one", "hasPart": ["one.jsonl"], "created": "2025-01-01"}
    meta |= {k: "x" for k in ("creator", "description", "language", "license", "source")}
    meta |= {"subject": "x", "publisher": None}  # one warning
    (directory / "one.yaml").write_text(yaml.safe_dump(meta))
    items = [
        {"identifier": "a", "modality": "boolean", "prompt": "p", "response": True},
        {"identifier": "b", "modality": "boolean", "prompt": "p", "response": "maybe"},
    ]
    (directory / "one.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    assert main(["validate", str(directory)]) == 2
    out = capsys.readouterr().out
    assert "INVALID (1 error)" in out and "dataset 'one': 1 item (boolean 1)" in out
    assert "  1 warning:" in out and out.rstrip().endswith("1 path, 1 item, 1 invalid, 1 warning")
    assert not SINGULAR_WITH_PLURAL.search(out), out
