"""`itemeval status` keeps the report's numbers it printed beside the store
(`<store>/analysis/status.json`, `report.kept_numbers`) and answers from them only while the
store's fragments and the study are what they were computed from: checked against the same
command with every row read (`ITEMEVAL_SUMMARIES=off`, which never uses them), after newer rows
change grades, after the study changes, with the file damaged, and with a fragment written while the
numbers were being computed (then nothing is kept)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from export_studies import run, write_study

import itemeval.api.study as study_api
from itemeval.cli.main import main
from itemeval.config import load_study
from itemeval.store import GRADES, SOLUTIONS, StudyStore
from itemeval.store._summary import SUMMARIES_ENV

SMALL = {"facets.replications": 1, "budget.policy": "dev", "budget.dev_items": 6}


@pytest.fixture
def study(tmp_path: Path) -> Path:
    outcome = run(tmp_path, **SMALL).outcome
    assert outcome.status == "completed", outcome.message
    return tmp_path / "study.yaml"


def _kept(path: Path) -> Path:
    return Path(load_study(path).store_url.removeprefix("file://")) / "analysis" / "status.json"


def _status(path: Path, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch, setting: str):
    mp.setenv(SUMMARIES_ENV, setting)
    code = main(["status", str(path), "--json"])
    out = json.loads(capsys.readouterr().out)
    return code, {k: out[k] for k in ("differences", "results")}


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times status computed the numbers (rather than reading them kept)."""
    calls: list[int] = []
    real = study_api.study_numbers

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(study_api, "study_numbers", counting)
    return calls


def test_status_answers_from_the_kept_numbers_until_the_rows_change(
    study: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, computed
) -> None:
    every_row = _status(study, capsys, monkeypatch, "off")
    assert not _kept(study).exists() and len(computed) == 1  # off: nothing kept
    assert _status(study, capsys, monkeypatch, "on") == every_row
    assert _kept(study).exists() and len(computed) == 2
    assert _status(study, capsys, monkeypatch, "on") == every_row
    assert len(computed) == 2  # answered from the kept numbers
    assert every_row[1]["results"] and every_row[1]["differences"]

    # A newer row of every grade of one fragment, the other verdict: the kept numbers are of
    # another store, computed again.
    _regrade_one_fragment(study)
    again = _status(study, capsys, monkeypatch, "on")
    assert len(computed) == 3
    assert again == _status(study, capsys, monkeypatch, "off")
    assert again != every_row


def _regrade_one_fragment(path: Path) -> None:
    store = StudyStore.open(load_study(path).store_url)
    partition = Path(store.partition(GRADES, store.condition_ids(GRADES)[0]).path)
    fragment = sorted(partition.glob("*.parquet"))[0]
    rows = pq.read_table(fragment)
    correct = pc.invert(rows.column("correct"))
    later = pc.add(rows.column("written_at"), pa.scalar(3_600_000_000, pa.duration("us")))
    rows = rows.set_column(rows.schema.get_field_index("correct"), "correct", correct)
    rows = rows.set_column(
        rows.schema.get_field_index("score"), "score", pc.cast(correct, pa.float64())
    )
    rows = rows.set_column(rows.schema.get_field_index("written_at"), "written_at", later)
    pq.write_table(rows.cast(pq.read_schema(fragment)), partition / f"zz{fragment.name}")


def test_a_changed_study_or_a_damaged_file_computes_the_numbers_again(
    study: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, computed
) -> None:
    first = _status(study, capsys, monkeypatch, "on")
    write_study(study.parent, **{**SMALL, "analysis.alpha": 0.01})
    assert _status(study, capsys, monkeypatch, "on") == _status(study, capsys, monkeypatch, "off")
    assert len(computed) == 3
    write_study(study.parent, **SMALL)
    _kept(study).write_text("{not json")
    assert _status(study, capsys, monkeypatch, "on") == first
    assert len(computed) == 4
    assert json.loads(_kept(study).read_text())["numbers"]["results"] == first[1]["results"]


def test_numbers_computed_while_a_fragment_was_written_are_not_kept(
    study: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = StudyStore.open(load_study(study).store_url)
    partition = Path(store.partition(SOLUTIONS, store.condition_ids(SOLUTIONS)[0]).path)
    real = study_api.read_cells

    def writing_meanwhile(*args: Any, **kwargs: Any) -> Any:
        fragment = sorted(partition.glob("*.parquet"))[0]  # its rows again, under a new name
        shutil.copy(fragment, partition / f"zz{fragment.name}")
        return real(*args, **kwargs)

    monkeypatch.setattr(study_api, "read_cells", writing_meanwhile)
    _status(study, capsys, monkeypatch, "on")
    assert not _kept(study).exists()
    monkeypatch.setattr(study_api, "read_cells", real)
    assert _status(study, capsys, monkeypatch, "on") == _status(study, capsys, monkeypatch, "off")
    assert _kept(study).exists()
