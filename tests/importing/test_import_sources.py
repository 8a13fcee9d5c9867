"""`itemeval import`: real files of every kind, rejections by reason, `--strict`, and an import
that fails half way leaving nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from itemeval.cli.main import main
from itemeval.errors import ExitCode
from itemeval.importing import _catalog as catalog_module
from itemeval.importing import import_sources, read_imports
from itemeval.importing._writer import ImportWriter
from itemeval.store import StudyStore

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "every_eval_ever"
if not SHARED.exists():
    SHARED = Path("/work/shared/data/every_eval_ever")
needs_data = pytest.mark.skipif(not SHARED.exists(), reason=f"{SHARED} is absent")


def _line(sample_id: str, **changes) -> dict:
    record = {
        "schema_version": "0.3.0",
        "evaluation_id": "bench/org_model/1",
        "model_id": "org/model",
        "evaluation_name": "bench",
        "sample_id": sample_id,
        "interaction_type": "single_turn",
        "input": {"raw": f"What is {sample_id}?", "reference": [f"answer {sample_id}"]},
        "output": {"raw": [f"answer {sample_id}"]},
        "answer_attribution": [],
        "evaluation": {"score": 1.0, "is_correct": True},
    }
    for key, value in changes.items():
        if value is None:
            record.pop(key, None)
        else:
            record[key] = value
    return record


#: The dataset of the records below and the prefix of their item ids: items are keyed by their
#: benchmark (the library that ran them and the dataset it names), not by their id alone.
DATASET = "lm_eval.bench"
PREFIX = DATASET + "~"


def _aggregate(path: Path) -> None:
    """The aggregate record of an instance file (`<name>.json` beside `<name>_samples.jsonl`):
    an instance file is imported only with it."""
    aggregate = {
        "schema_version": "0.3.0",
        "evaluation_id": "bench/org_model/1",
        "model_info": {"name": "model", "id": "org/model"},
        "eval_library": {"name": "lm_eval", "version": "0.4.9"},
        "evaluation_results": [
            {
                "evaluation_name": "bench",
                "metric_config": {"metric_name": "exact_match"},
                "generation_config": {"generation_args": {"temperature": 0.0}},
            }
        ],
    }
    path.write_text(json.dumps(aggregate))


def _bad_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    _aggregate(folder / "records.json")
    path = folder / "records_samples.jsonl"
    lines = [
        json.dumps(_line("a")),
        json.dumps(_line("b")),
        "{not json",
        json.dumps(_line("c", input={"raw": "What is c?"})),  # no reference
        json.dumps(_line("a")),  # the same sample and metric again
        json.dumps(_line("d", evaluation=None)),  # schema: no evaluation
        json.dumps(_line("b", input={"raw": "Another b?", "reference": ["x"]})),  # item conflict
        json.dumps(_line("e", schema_version="9.9")),
        json.dumps(_line("f")),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _fragments(store: Path) -> list[Path]:
    return sorted(store.glob("solutions/*/*.parquet")) + sorted(store.glob("grades/*/*.parquet"))


def test_every_record_imports_or_is_rejected_with_a_named_reason(tmp_path: Path):
    source = _bad_file(tmp_path / "src")
    result = import_sources(str(tmp_path / "store"), [str(source)])
    assert result.rejected == {
        "conflicting_item": 1,
        "duplicate_sample_id": 1,
        "invalid_json": 1,
        "missing_reference": 1,
        "schema_violation": 1,
        "unknown_schema_version": 1,
    }
    assert result.samples == 3 and result.solutions == 3 and result.grades == 3
    assert any("records_samples.jsonl:3: invalid_json" in e for e in result.examples)
    # physical truth: the rows stored, read without deduplication
    rows = [pq.read_table(p) for p in _fragments(tmp_path / "store")]
    assert sum(t.num_rows for t in rows) == 6
    grades = [
        t for p, t in zip(_fragments(tmp_path / "store"), rows, strict=True) if "grades" in p.parts
    ]
    assert sorted(grades[0].column("item_id").to_pylist()) == [PREFIX + i for i in "abf"]
    assert set(grades[0].column("run_id").to_pylist()) == {result.import_id}
    assert grades[0].column("request_id").to_pylist()[0].startswith("records_samples.jsonl:")
    record = read_imports(StudyStore.open(str(tmp_path / "store")))[0]
    assert {f.tool for f in record.files} == {"every_eval_ever"}
    assert all(len(f.sha256) == 64 for f in record.files)


def test_strict_refuses_at_the_first_rejection_and_writes_nothing(tmp_path: Path, capsys):
    source = _bad_file(tmp_path / "src")
    store = tmp_path / "store"
    code = main(["import", str(source), "--store", str(store), "--strict"])
    assert code == ExitCode.IMPORT_REFUSED == 6
    err = capsys.readouterr().err
    assert "records_samples.jsonl:3: record rejected (invalid_json)" in err
    assert _fragments(store) == [] and not (store / "imports").exists()


def test_a_failure_before_the_record_leaves_no_rows(tmp_path: Path, monkeypatch):
    source = _bad_file(tmp_path / "src")
    store = tmp_path / "store"

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("itemeval.importing._run.write_import", fail)
    with pytest.raises(OSError):
        import_sources(str(store), [str(source)])
    assert _fragments(store) == []
    assert read_imports(StudyStore.open(str(store))) == []
    monkeypatch.undo()
    again = import_sources(str(store), [str(source)])  # nothing recorded: imported now
    assert again.samples == 3 and catalog_module.read_imports(StudyStore.open(str(store)))


@needs_data
def test_every_shared_file_imports_or_is_rejected_with_reasons(tmp_path: Path, capsys):
    store = tmp_path / "store"
    code = main(["import", str(SHARED), "--store", str(store)])
    assert code == ExitCode.OK
    out = capsys.readouterr().out
    result = import_sources(str(store), [str(SHARED)])  # everything was imported before
    assert result.import_id is None
    files = {p for p in SHARED.rglob("*") if p.is_file()}
    skipped = {Path(p) for p in result.skipped}
    rejected = {Path(r.split(": ", 1)[0]) for r in result.rejected_files}
    assert files == skipped | rejected, sorted(map(str, files - skipped - rejected))
    # instance files without their aggregate (a folder of the shared data holds only those)
    orphans = set((SHARED / "examples/v0.3.0/converted_here_nulls_dropped").rglob("*.jsonl"))
    assert rejected == {SHARED / "SOURCE.md"} | set((SHARED / "schemas").rglob("*.json")) | orphans
    assert orphans and all(f"{p}: no_aggregate" in " ".join(result.rejected_files) for p in orphans)
    assert "Rejected" in out
    record = read_imports(StudyStore.open(str(store)))[0]
    tools = {f.tool for f in record.files}
    assert tools == {"every_eval_ever", "lm_eval", "inspect_ai", "helm"}
    assert record.samples > 150 and record.aggregates  # aggregate-only records are kept
    # each tool's conditions are in the store, with their grades
    report = main(["status", "--store", str(store)])
    assert report == ExitCode.OK


def _tool_records(folder: Path, lines: int, bad_line: int) -> Path:
    """An aggregate of another tool and its instance file, one bad line in the middle."""
    folder.mkdir(parents=True)
    _aggregate(folder / "a.json")
    text = []
    for n in range(1, lines + 1):
        if n == bad_line:
            text.append('{"sample_id": "broken", "input": ')
            continue
        record = _line(f"s{n % 40}", metadata={"epoch": str(n // 40)})
        record["evaluation"] = {"score": float(n % 3 == 0), "is_correct": n % 3 == 0}
        text.append(json.dumps(record))
    (folder / "a_samples.jsonl").write_text("\n".join(text) + "\n")
    return folder


def _stored(store: Path) -> list[tuple]:
    table = pq.read_table(next(store.glob("grades/*/*.parquet")))
    columns = ["item_id", "epoch", "score", "correct", "request_id", "solution_hash"]
    return sorted(zip(*(table.column(c).to_pylist() for c in columns), strict=True))


def test_the_fast_path_stores_what_the_line_path_stores(tmp_path: Path, monkeypatch):
    source = _tool_records(tmp_path / "src", 300, bad_line=150)
    monkeypatch.setattr("itemeval.importing._eee_columns.CHUNK_BYTES", 8192)  # many chunks
    batches = []
    add_batch = ImportWriter.add_batch

    def counted(self, batch):
        batches.append(batch.table.num_rows)
        return add_batch(self, batch)

    monkeypatch.setattr(ImportWriter, "add_batch", counted)
    fast = import_sources(str(tmp_path / "fast"), [str(source)])
    assert len(batches) > 5 and sum(batches) < 299  # chunks in columns, the bad one by lines
    monkeypatch.setattr("itemeval.importing._eee_columns.fast_path_applies", lambda facts: False)
    slow = import_sources(str(tmp_path / "slow"), [str(source)])
    assert fast.rejected == slow.rejected == {"invalid_json": 1}
    assert "a_samples.jsonl:150: invalid_json" in fast.examples[0]
    assert fast.samples == slow.samples == 299
    assert _stored(tmp_path / "fast") == _stored(tmp_path / "slow")
    assert len(_stored(tmp_path / "fast")) == 299


def test_an_import_never_repins_a_studys_own_dataset(tmp_path: Path):
    from itemeval.datasets import pin_datasets, read_locks
    from itemeval.datasets.adapters import DatasetSource, open_source

    store = tmp_path / "store"
    native = open_source(
        DatasetSource(
            name=DATASET, path=str(Path(__file__).parents[2] / "configs/datasets/arithmetic")
        )
    )
    pin_datasets(str(store), [native])
    result = import_sources(str(store), [str(_bad_file(tmp_path / "src"))])
    assert list(result.datasets) == [f"{DATASET}-imported"]
    locks = read_locks(str(store))
    assert locks.datasets[DATASET].fingerprint == native.fingerprint()
    assert locks.datasets[DATASET].history == []
    assert locks.datasets[f"{DATASET}-imported"].path.endswith(
        f"imported/datasets/{DATASET}-imported"
    )


def test_an_import_into_s3_reads_back_without_a_study(tmp_path: Path, s3_bucket: str):
    from itemeval import Study

    url = f"{s3_bucket}/results"
    source = _bad_file(tmp_path / "src")
    result = import_sources(url, [str(source)])
    assert result.samples == 3 and sum(result.rejected.values()) == 6
    study = Study.from_store(url)
    rows = study.results().to_pylist()
    assert sorted(r["item_id"] for r in rows) == [PREFIX + i for i in "abf"]
    assert "model_bench_lm_eval" in study.leaderboard()
    assert import_sources(url, [str(source)]).import_id is None


def test_a_value_the_columns_cannot_take_falls_back_to_lines(tmp_path: Path):
    source = _tool_records(tmp_path / "src", 20, bad_line=0)
    path = source / "a_samples.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[4])
    record["metadata"] = {"epoch": "1.5"}
    lines[4] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    result = import_sources(str(tmp_path / "store"), [str(source)])
    assert result.rejected == {"schema_violation": 1}
    assert "a_samples.jsonl:5: schema_violation" in result.examples[0]
    assert result.samples == 19


def test_the_fast_path_rejects_duplicates_and_conflicts_with_their_lines(tmp_path: Path):
    source = _tool_records(tmp_path / "src", 20, bad_line=0)
    path = source / "a_samples.jsonl"
    lines = path.read_text().splitlines()
    conflict = json.loads(lines[5])
    conflict["input"] = {"raw": "Another question?", "reference": ["x"]}
    conflict["metadata"] = {"epoch": "7"}
    lines += [lines[2], json.dumps(conflict)]  # lines 21 and 22
    path.write_text("\n".join(lines) + "\n")
    added = []
    add_batch = ImportWriter.add_batch

    def counted(self, batch):
        added.append(batch.table.num_rows)
        return add_batch(self, batch)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ImportWriter, "add_batch", counted)
        result = import_sources(str(tmp_path / "store"), [str(source)])
    assert added == [22]  # one chunk, as columns
    assert result.rejected == {"conflicting_item": 1, "duplicate_sample_id": 1}
    assert any("a_samples.jsonl:21: duplicate_sample_id" in e for e in result.examples)
    assert any("a_samples.jsonl:22: conflicting_item" in e for e in result.examples)
    assert result.samples == 20


@needs_data
def test_an_inspect_eval_archive_imports_like_its_json_log(tmp_path: Path):
    import zipfile

    log = json.loads((SHARED / "raw_tool_outputs/inspect/data_arc_qwen.json").read_text())
    archive = tmp_path / "src" / "arc.eval"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as out:  # the layout inspect_ai writes
        out.writestr("header.json", json.dumps({k: v for k, v in log.items() if k != "samples"}))
        for sample in log["samples"]:
            out.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", json.dumps(sample))
    from_eval = import_sources(str(tmp_path / "a"), [str(archive)])
    from_json = import_sources(
        str(tmp_path / "b"), [str(SHARED / "raw_tool_outputs/inspect/data_arc_qwen.json")]
    )
    assert from_eval.samples == from_json.samples == 3
    assert from_eval.generate[0]["id"] == from_json.generate[0]["id"]
    assert from_eval.files[0]["tool"] == "inspect_ai"
    columns = ["item_id", "epoch", "score", "correct", "solution_hash"]

    def grades(store: Path) -> list[tuple]:
        table = pq.read_table(next(store.glob("grades/*/*.parquet")))
        return sorted(zip(*(table.column(c).to_pylist() for c in columns), strict=True))

    assert grades(tmp_path / "a") == grades(tmp_path / "b")
