"""A store written before the `tier` column (solutions/1, grades/1, by the code at 8119a43,
kept in `data/store_v1`) keeps working: its rows read as `tier = live` everywhere (reads, status,
the long table, the report), a new run adds solutions/2 fragments beside them, and compaction
rewrites a mixed partition in the current schema without losing a row."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from itemeval import Study
from itemeval.store import GRADE_SCHEMA, SOLUTION_SCHEMA, StudyStore, compact
from itemeval.store._schemas import OLDER_SCHEMAS, schema_name

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    """The store of 8119a43 and its study (in-process simulator), copied to `tmp_path`."""
    shutil.copytree(DATA / "store_v1", tmp_path / "store")
    study = yaml.safe_load((DATA / "store_v1_study.yaml").read_text())
    study["store"] = str(tmp_path / "store")
    # Its runs leave their fragments as written: the tests read them beside the older ones
    # (a run that compacts rewrites them: the last test).
    study.setdefault("runtime", {})["compact"] = False
    for dataset in study["datasets"]:
        dataset["path"] = str(REPO / "configs" / "datasets" / Path(dataset["path"]).name)
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    return tmp_path


def _schemas(store: Path, stage: str) -> set[str]:
    """The schema versions of a stage's fragments, by their columns (compaction does not keep
    the name in the metadata)."""
    current = SOLUTION_SCHEMA if stage == "solutions" else GRADE_SCHEMA
    versions = {schema_name(current): current} | {
        schema_name(o.schema): o.schema for o in OLDER_SCHEMAS[schema_name(current)]
    }
    found = set()
    for path in (store / stage).rglob("*.parquet"):
        stored = pq.read_schema(path)
        found |= {n for n, s in versions.items() if stored.equals(s, check_metadata=False)}
    return found


def test_the_fixture_is_an_older_store(old_store):
    assert _schemas(old_store / "store", "solutions") == {"solutions/1"}
    assert _schemas(old_store / "store", "grades") == {"grades/1"}
    (older,) = OLDER_SCHEMAS[schema_name(SOLUTION_SCHEMA)]
    assert older.schema.names == [n for n in SOLUTION_SCHEMA.names if n != "tier"]


def test_older_rows_read_as_live(old_store):
    store = StudyStore.open(str(old_store / "store"))
    solutions = store.read("solutions", dedup=False)
    grades = store.read("grades", columns=["tier", "grader"], dedup=False)
    assert solutions.num_rows == 6 and grades.num_rows == 12
    assert solutions.schema.field("tier").type == SOLUTION_SCHEMA.field("tier").type
    assert set(solutions.column("tier").to_pylist()) == {"live"}
    assert set(grades.column("tier").to_pylist()) == {"live"}


def test_status_export_and_report_of_an_older_store(old_store):
    study = Study.from_yaml(old_store / "study.yaml")
    status = study.status()
    solutions = [c for c in status.conditions if c["stage"] == "solutions"]
    assert solutions[0]["done"] == 6 and solutions[0]["batch"] == 0
    assert status.batch["rows"] == 0 and status.batch["open"] == []
    table = study.results()
    assert table.num_rows == 12
    assert set(table.column("solution_tier").to_pylist()) == {"live"}
    assert set(table.column("grade_tier").to_pylist()) == {"live"}
    study.report(out=str(old_store / "report"))
    markdown = (old_store / "report" / "report.md").read_text()
    assert "Saved by the batch tier" not in markdown and "batch rows" in markdown


def test_a_new_run_adds_current_fragments_and_compaction_rewrites_them(old_store):
    study = Study.from_yaml(old_store / "study.yaml")
    outcome = study.run(limit=4, in_process=True, yes=True, quiet=True)
    assert outcome.ok, outcome.message
    root = old_store / "store"
    assert _schemas(root, "solutions") == {"solutions/1", "solutions/2"}
    store = StudyStore.open(str(root))
    before = store.read("solutions", dedup=False)
    assert before.num_rows == 8  # 6 older rows, 2 new cells (4 items of each dataset now)
    results = compact(store)
    assert all(r.rows_written == r.rows_read for r in results)
    assert _schemas(root, "solutions") == {"solutions/2"}
    assert _schemas(root, "grades") == {"grades/2"}
    after = store.read("solutions", dedup=False)
    assert after.num_rows == 8 and set(after.column("tier").to_pylist()) == {"live"}
    assert pc.sum(after.column("usd")).as_py() == pytest.approx(
        pc.sum(before.column("usd")).as_py()
    )
    grades = store.read("grades", dedup=False)
    assert grades.num_rows == 16 and set(grades.column("tier").to_pylist()) == {"live"}


def test_a_run_that_compacts_rewrites_the_older_fragments_it_merges(old_store: Path) -> None:
    path = old_store / "study.yaml"
    study = yaml.safe_load(path.read_text())
    study["runtime"]["compact"] = True
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    outcome = Study.from_yaml(path).run(limit=4, in_process=True, yes=True, quiet=True)
    assert outcome.ok, outcome.message
    root = old_store / "store"
    assert _schemas(root, "solutions") == {"solutions/2"}
    assert _schemas(root, "grades") == {"grades/2"}
    store = StudyStore.open(str(root))
    solutions = store.read("solutions", dedup=False)
    assert solutions.num_rows == 8 and set(solutions.column("tier").to_pylist()) == {"live"}
    assert store.read("grades", dedup=False).num_rows == 16
