"""`itemeval export` into a folder that holds an earlier export writes only what changed: an
unchanged store writes nothing; after new items, superseded rows, new and removed conditions the
folder equals a fresh full export row for row (every part read, nothing deduplicated), and a
process killed between two files leaves the earlier export readable and is recovered by the
next export."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from export_studies import DATASETS, INLINE, Run, read_table, run

from itemeval.export import ExportOptions, export_study
from itemeval.store import StudyStore, compact

KEY = ["grade_condition_id", "gen_condition_id", "item_id", "epoch"]

#: Two datasets, two models, a scorer and a judge that sometimes breaks its contract or fails:
#: rows of every kind (samples, parse failures, grade errors).
STUDY: dict[str, Any] = {
    "study": "grow",
    "datasets": [
        {"name": "arithmetic", "path": str(DATASETS / "arithmetic")},
        {"name": "science-mc", "path": str(DATASETS / "science-mc")},
    ],
    "endpoints": {
        "sim": {
            "kind": "sim",
            "max_attempts": 1,
            "sim": {"judge_malformed_rate": 0.1, "faults": {"server_error": 0.03}},
        }
    },
    "models": [
        {"id": "sim/strong", "endpoint": "sim", "name": "strong"},
        {"id": "sim/weak", "endpoint": "sim", "name": "weak"},
    ],
    "facets": {"replications": 2, "scorer": ["auto"], "grader": ["judge"]},
    "graders": {"judge": {"model": "sim/judge", "endpoint": "sim", "max_tokens": 200}},
    "budget": {"policy": "dev", "dev_items": 6},
    "runtime": {"shard_size": 16},
}
#: Small parts, so that appending, filling up and replacing parts all happen.
PART_ROWS = 8
SMALL_PART_ROWS = 3


@pytest.fixture(autouse=True)
def _small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("itemeval.export._parts.PART_ROWS", PART_ROWS)
    monkeypatch.setattr("itemeval.export._pair_update.SMALL_PART_ROWS", SMALL_PART_ROWS)


def _study(**changes: Any) -> dict[str, Any]:
    study = copy.deepcopy(STUDY)
    for dotted, value in changes.items():
        node = study
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    return study


def _rerun(folder: Path, study: dict[str, Any]) -> Run:
    return run(folder, study, INLINE)


def _export(result: Run, out: Path, **options: Any):
    return export_study(result.plan(), ExportOptions(out=str(out), **options))


def _files(out: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under `out` (hidden ones too): mtime, size and content digest."""
    found = {}
    for folder, _, names in os.walk(out):
        for name in names:
            path = Path(folder) / name
            stat = path.stat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(out))] = (stat.st_mtime_ns, stat.st_size, digest)
    return found


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in KEY])


def _eee(out: Path) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Aggregates (without the times an export stamps) and samples (lines without the
    evaluation id that carries such a time, sorted) by file."""
    aggregates, samples = {}, {}
    root = out / "eee"
    for path in sorted(root.rglob("*.json")):
        record = json.loads(path.read_text())
        record.pop("retrieved_timestamp")
        record.pop("evaluation_id")
        detailed = record.get("detailed_evaluation_results")
        if detailed:
            detailed.pop("checksum")  # lines may be in another order
        aggregates[str(path.relative_to(root))] = record
    for path in sorted(root.rglob("*_samples.jsonl")):
        lines = []
        for line in path.read_text().splitlines():
            record = json.loads(line)
            record.pop("evaluation_id")
            lines.append(json.dumps(record, sort_keys=True))
        samples[str(path.relative_to(root))] = sorted(lines)
    return aggregates, samples


def assert_same_tables(incremental: Path, fresh: Path, *, csv: bool = False) -> None:
    mine, theirs = read_table(incremental, csv=csv), read_table(fresh, csv=csv)
    # Every part read, nothing deduplicated: each key once.
    assert mine.group_by(KEY).aggregate([]).num_rows == mine.num_rows
    assert _sorted(mine).equals(_sorted(theirs)), f"csv={csv}"


def assert_same_export(incremental: Path, fresh: Path) -> None:
    for csv in (False, True):
        assert_same_tables(incremental, fresh, csv=csv)
    mine_aggregates, mine_samples = _eee(incremental)
    fresh_aggregates, fresh_samples = _eee(fresh)
    assert mine_samples == fresh_samples
    assert mine_aggregates == fresh_aggregates
    # The study's files, byte for byte (computed again only when their inputs changed).
    for name in ("comparisons", "rankings", "variance_components"):
        assert pq.read_table(incremental / f"{name}.parquet").equals(
            pq.read_table(fresh / f"{name}.parquet")
        )
    study_files = [
        f"{name}.{fmt}"
        for name in ("comparisons", "rankings", "variance_components")
        for fmt in ("parquet", "csv")
    ] + ["judges.json", "pairwise.json"]
    for name in study_files:
        assert (incremental / name).exists() == (fresh / name).exists(), name
        if (fresh / name).exists():
            assert (incremental / name).read_bytes() == (fresh / name).read_bytes(), name
    mine_summary = json.loads((incremental / "export.json").read_text())
    fresh_summary = json.loads((fresh / "export.json").read_text())
    for key in ("rows", "counts", "eee"):
        assert mine_summary[key] == fresh_summary[key], key
    # Every samples file is what its manifest entry says (lines and checksum).
    for pair in mine_summary["manifest"]["pairs"].values():
        for evaluation in pair["evaluations"].values():
            if evaluation.get("samples"):
                data = (incremental / evaluation["samples"]).read_bytes()
                if "checksum" in evaluation:  # 0.3.0 records carry it
                    assert hashlib.sha256(data).hexdigest() == evaluation["checksum"]
                tail = hashlib.sha256(data[-(1 << 20) :]).hexdigest()
                assert tail == evaluation["tail"]
                assert data.count(b"\n") == evaluation["samples_rows"]
    # The manifest names exactly the files there are (no leftover, nothing staged).
    named = set(mine_summary["manifest"]["sizes"])
    owned = {
        p
        for p in _files(incremental)
        if p.split("/", 1)[0] in ("long_table", "long_table_csv", "eee", "_export")
    }
    assert owned == {p for p in named if "/" in p}


def test_an_unchanged_store_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    result = _rerun(tmp_path / "study", STUDY)
    out = tmp_path / "out"
    first = _export(result, out)
    assert not first.unchanged and first.rows > 0
    files = _files(out)

    # Nor does it compute the statistics again: their inputs' fingerprint is the manifest's.
    def no_cells(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an export of an unchanged store read the study's cells")

    monkeypatch.setattr("itemeval.export._study.study_cells", no_cells)
    again = _export(result, out)
    assert again.unchanged and again.rows == first.rows and again.rows_written == 0
    assert _files(out) == files  # the same files, bytes and modification times

    # A compaction moves every row to new fragments: no row changed, so no table, sample or
    # statistics file is written; only the key indexes (where rows are) and export.json.
    compact(StudyStore.open(result.store_url))
    third = _export(result, out)
    assert third.rows_written == 0 and third.pairs_changed == 0

    def _results(found: dict[str, tuple[int, int, str]]) -> dict[str, tuple[int, int, str]]:
        return {p: v for p, v in found.items() if p != "export.json" and "_export/" not in p}

    assert _results(_files(out)) == _results(files)
    assert _export(result, out).unchanged


@pytest.mark.parametrize("path", ["advanced", "cells"])
def test_new_items_superseded_rows_and_new_conditions_equal_a_fresh_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
):
    """Each pair's state is advanced from its key index by the fragments written since, or
    (`cells`) read again from the store's cells: both give what a fresh export gives."""
    if path == "cells":
        monkeypatch.setattr("itemeval.export._pair_update.ADVANCE_BYTES", 0)
    folder = tmp_path / "study"
    out = tmp_path / "out"
    result = _rerun(folder, STUDY)
    _export(result, out)
    first_parts = {
        p: v for p, v in _files(out).items() if p.startswith("long_table/") and "part-" in p
    }

    # More items: new keys only, in every pair.
    result = _rerun(folder, _study(**{"budget.dev_items": 10}))
    grown = _export(result, out)
    assert 0 < grown.rows_written < grown.rows
    assert grown.pairs_advanced == (
        len(result.plan().design.grade) * 2 if path == "advanced" else 0
    )
    assert_same_export(out, _fresh(result, tmp_path / "fresh-1"))
    # Full parts of rows that did not change were left as they were.
    kept = {p: v for p, v in _files(out).items() if p in first_parts}
    assert kept and all(first_parts[p] == v for p, v in kept.items())

    # A re-generation (its grades become stale), a re-grade, and a third model.
    plan = result.plan()
    store = plan.store
    strong = plan.design.generate[0].id
    judge = plan.design.judges[0].id
    store.write_solutions(
        strong,
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
    graded = store.read_grades([judge]).filter(pc.equal(pc.field("gen_condition_id"), strong))
    row = graded.filter(pc.equal(pc.field("status"), "ok")).slice(0, 1).to_pylist()[0]
    row.pop("grade_condition_id", None)
    row |= {
        "score": 1.0 - (row["score"] or 0.0),
        "correct": not row["correct"],
        "run_id": "regrade",
        "written_at": datetime.now(UTC),
    }
    store.write_grades(judge, [row])
    # A later failed call of a cell that has an answer changes nothing (`ok` beats `error`).
    failed = graded.filter(pc.equal(pc.field("status"), "ok")).slice(1, 1).to_pylist()[0]
    failed.pop("grade_condition_id", None)
    failed |= {
        "status": "error",
        "error_code": "server_error",
        "score": None,
        "correct": None,
        "run_id": "failed-later",
        "written_at": datetime.now(UTC),
    }
    store.write_grades(judge, [failed])
    models = [*STUDY["models"], {"id": "sim/medium", "endpoint": "sim", "name": "medium"}]
    result = _rerun(folder, _study(**{"budget.dev_items": 10, "models": models}))
    changed = _export(result, out)
    assert 0 < changed.rows_written < changed.rows
    fresh = _fresh(result, tmp_path / "fresh-2")
    assert_same_export(out, fresh)
    table = read_table(out)
    stale = table.filter(pc.fill_null(table.column("grade_stale"), False))
    assert set(stale.column("item_id").to_pylist()) == {"arithmetic.001"}
    regraded = table.filter(
        pc.and_(
            pc.equal(table.column("item_id"), row["item_id"]),
            pc.and_(
                pc.equal(table.column("epoch"), row["epoch"]),
                pc.and_(
                    pc.equal(table.column("grade_condition_id"), judge),
                    pc.equal(table.column("gen_condition_id"), strong),
                ),
            ),
        )
    )
    assert regraded.column("grade_run_id").to_pylist() == ["regrade"]
    assert "failed-later" not in set(table.column("grade_run_id").to_pylist())

    # Fewer items and a model less: rows leave, the parts that held them are replaced.
    result = _rerun(folder, _study(**{"budget.dev_items": 4}))
    shrunk = _export(result, out)
    assert shrunk.rows < changed.rows
    assert_same_export(out, _fresh(result, tmp_path / "fresh-3"))
    assert _export(result, out).unchanged


def test_options_that_change_the_files_rewrite_them(tmp_path: Path):
    result = _rerun(tmp_path / "study", STUDY)
    out = tmp_path / "out"
    _export(result, out, formats=("parquet",))
    _export(result, out, formats=("parquet", "csv", "eee"), eee_version="0.3.0")
    assert_same_export(out, _fresh(result, tmp_path / "fresh", eee_version="0.3.0"))
    _export(result, out, formats=("parquet",))
    # What is no longer exported is gone, and so are the folders it leaves empty.
    assert not (out / "eee").exists() and not (out / "long_table_csv").exists()
    assert_same_tables(out, _fresh(result, tmp_path / "fresh-parquet", formats=("parquet",)))


def _fresh(result: Run, out: Path, **options: Any) -> Path:
    _export(result, out, **options)
    return out


_KILLER = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {tests!r})
    import itemeval.export._manifest as manifest
    from itemeval.config import load_study
    from itemeval.export import ExportOptions, export_study
    from itemeval.planning import make_plan
    import itemeval.export._parts as parts
    import itemeval.export._pair_update as update

    parts.PART_ROWS = {part_rows}
    update.SMALL_PART_ROWS = {small}
    where, after = {where!r}, {after}
    calls = [0]

    def counted(original):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] > after:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)
        return call

    if where == "staging":  # between two staged files, before the manifest
        manifest.Commit.done = counted(manifest.Commit.done)
    elif where == "appending":  # new samples written at the end of a file, then killed
        commit = manifest.AppendedFile.commit

        def appended(self):
            self.handle.flush()
            os.kill(os.getpid(), signal.SIGKILL)

        manifest.AppendedFile.commit = appended
    else:  # between two moves of the published manifest's pending list
        apply, replace = manifest.apply_pending, os.replace

        def applying(out, pending):
            os.replace = counted(replace)
            try:
                apply(out, pending)
            finally:
                os.replace = replace

        manifest.apply_pending = applying
    plan = make_plan(load_study({study_path!r}), with_pending=False)
    export_study(plan, ExportOptions(out={out!r}))
    """
)


@pytest.mark.parametrize("where", ["staging", "appending", "publishing"])
def test_a_killed_export_leaves_the_last_one_and_the_next_one_recovers(tmp_path: Path, where: str):
    folder = tmp_path / "study"
    out = tmp_path / "out"
    result = _rerun(folder, STUDY)
    _export(result, out)
    before = read_table(out)
    control = tmp_path / "control"
    shutil.copytree(out, control)
    result = _rerun(folder, _study(**{"budget.dev_items": 10}))
    script = _KILLER.format(
        tests=str(Path(__file__).parent),
        part_rows=PART_ROWS,
        small=SMALL_PART_ROWS,
        where=where,
        after=5,
        study_path=str(result.study_path),
        out=str(out),
    )
    env = os.environ | {"PYTHONPATH": str(Path(__file__).parents[2])}
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    staged = [p for p in _files(out) if Path(p).name.startswith((".staged-", ".tmp-"))]
    manifest = json.loads((out / "export.json").read_text())["manifest"]
    if where in ("staging", "appending"):
        # Killed before the manifest: the folder still reads as the last export (a samples
        # file added to is cut back by the next export, its first bytes checked).
        assert staged and "pending" not in manifest
        assert _sorted(read_table(out)).equals(_sorted(before))
    if where == "appending":
        sizes = manifest["sizes"]
        longer = [p for p, v in _files(out).items() if p in sizes and v[1] > sizes[p]]
        assert longer and all(p.endswith("_samples.jsonl") for p in longer)
    if where == "publishing":
        assert manifest["pending"]["moves"]  # published, but not every move done
    recovered = _export(result, out)
    # Published: the next export finishes the moves, then finds nothing else to do; else it
    # does what the killed one did, from the previous export (nothing made again from scratch).
    assert recovered.unchanged == (where == "publishing")
    if where != "publishing":
        assert recovered.rows_written == _export(result, control).rows_written
    assert_same_export(out, _fresh(result, tmp_path / "fresh"))
    assert not [p for p in _files(out) if Path(p).name.startswith((".staged-", ".tmp-"))]


def test_a_damaged_file_is_made_again(tmp_path: Path):
    result = _rerun(tmp_path / "study", STUDY)
    out = tmp_path / "out"
    _export(result, out)
    part = sorted((out / "long_table").rglob("*.parquet"))[0]
    part.write_bytes(part.read_bytes()[:-100])  # truncated
    samples = sorted((out / "eee").rglob("*_samples.jsonl"))[0]
    samples.unlink()
    repaired = _export(result, out)
    assert not repaired.unchanged and repaired.rows_written > 0
    assert_same_export(out, _fresh(result, tmp_path / "fresh"))


def test_an_earlier_layout_is_replaced(tmp_path: Path):
    """0.1.0 wrote one long_table.parquet and long_table.csv: the first export of this version
    removes them once its own files are published."""
    result = _rerun(tmp_path / "study", STUDY)
    out = tmp_path / "out"
    out.mkdir()
    (out / "long_table.parquet").write_bytes(b"an earlier export")
    (out / "long_table.csv").write_bytes(b"an earlier export")
    (out / "export.json").write_text(json.dumps({"rows": 3, "files": {}}))
    _export(result, out)
    assert not (out / "long_table.parquet").exists() and not (out / "long_table.csv").exists()
    assert_same_export(out, _fresh(result, tmp_path / "fresh"))


def test_the_table_reads_back_with_dataset_readers(tmp_path: Path):
    """DuckDB and pyarrow read the folder as a hive-partitioned dataset."""
    import duckdb

    result = _rerun(tmp_path / "study", STUDY)
    out = tmp_path / "out"
    exported = _export(result, out, formats=("parquet",))
    counted = duckdb.sql(
        f"SELECT grade_condition_id, count(*) FROM read_parquet('{out}/long_table/**/*.parquet',"
        " hive_partitioning = true) GROUP BY ALL"
    ).fetchall()
    assert sum(n for _, n in counted) == exported.rows
    assert {g for g, _ in counted} == {c.id for c in result.plan().design.grade}
    table = pq.read_table(out / "long_table")
    assert table.num_rows == exported.rows and "gen_condition_id" in table.column_names


def test_study_results_reads_the_store(tmp_path: Path):
    """`Study.results()` reads the store (not an export) and gives the same rows."""
    from itemeval.api import Study

    result = _rerun(tmp_path / "study", STUDY)
    out = tmp_path / "out"
    _export(result, out, formats=("parquet",))
    table = Study.from_yaml(result.study_path).results()
    assert _sorted(table).equals(_sorted(read_table(out)))


def test_samples_files_that_grow_keep_their_checksum(tmp_path: Path):
    """0.3.0 aggregates carry their samples file's sha256: right after lines are added."""
    folder = tmp_path / "study"
    out = tmp_path / "out"
    _export(_rerun(folder, STUDY), out, eee_version="0.3.0")
    result = _rerun(folder, _study(**{"budget.dev_items": 10}))
    _export(result, out, eee_version="0.3.0")
    assert_same_export(out, _fresh(result, tmp_path / "fresh", eee_version="0.3.0"))
    for path in (out / "eee").rglob("*.json"):
        detailed = json.loads(path.read_text())["detailed_evaluation_results"]
        data = (out / "eee" / detailed["file_path"]).read_bytes()
        assert detailed["checksum"] == hashlib.sha256(data).hexdigest()
        assert detailed["total_rows"] == data.count(b"\n")
