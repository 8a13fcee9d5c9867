"""`itemeval validate` and `itemeval convert`, run through the real CLI entry point."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from itemeval.cli.main import main
from itemeval.datasets.format import read_dataset
from itemeval.storage import resolve

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "configs" / "datasets"
MAPPING = {
    "id_template": "qa.{{ _index }}",
    "input": "question",
    "target": "answer",
    "modality": "single-value",
    "task_prompt": "Answer with a number.",
    "metadata": ["topic"],
    "dataset": {
        "title": "Tiny QA",
        "description": "Two questions",
        "creator": "Tester",
        "publisher": "Tests",
        "created": "2025-05-19",
        "language": "eng",
        "license": "CC0-1.0",
        "source": "made up in the test",
        "subject": "arithmetic",
    },
}
ROWS = [
    {"question": "2+2?", "answer": 4, "topic": "add"},
    {"question": "3×3?", "answer": "9", "topic": "mul"},
    {"question": "10-7?", "answer": "3", "topic": "sub"},
]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(path: Path, text: str | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def jsonl(rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


@pytest.fixture
def qa(tmp_path) -> tuple[str, str]:
    source = write(tmp_path / "qa.jsonl", jsonl(ROWS))
    mapping = write(tmp_path / "qa-mapping.yaml", yaml.safe_dump(MAPPING, allow_unicode=True))
    return source, mapping


def test_validate_the_sample_datasets(capsys):
    paths = sorted(str(p) for p in SAMPLES.iterdir() if p.is_dir())
    assert len(paths) >= 3
    code, out, _ = run(capsys, "validate", *paths)
    assert code == 0, out
    assert "dataset 'arithmetic': 33 items (cloze 5, single-value 28)" in out
    assert "dataset 'science-mc': 28 items (choiceof4 28)" in out
    assert "dataset 'facts-tf': 30 items (boolean 25, ternary 5)" in out
    assert "dataset 'capitals-short': 25 items (short-prose 25)" in out
    assert "0 invalid" in out


def test_sample_datasets_follow_the_brief():
    for directory in (p for p in SAMPLES.iterdir() if p.is_dir()):
        items = list(read_dataset(str(directory)).iter_items())
        assert 20 <= len(items) <= 40
        assert all(item.difficulty is not None for item in items)


def test_validate_lists_every_problem_and_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad"
    write(
        bad / "bad.yaml",
        yaml.safe_dump(
            {
                "identifier": "bad",
                "created": "2025-05-19",
                "creator": "x",
                "description": "d",
                "hasPart": ["bad.jsonl"],
                "language": "eng",
                "license": "x",
                "publisher": "p",
                "source": "s",
                "subject": "s",
            }
        ),
    )
    write(
        bad / "bad.jsonl",
        jsonl(
            [
                {"identifier": "a", "modality": "choiceof3", "prompt": "p", "response": "D"},
                {"identifier": "b", "modality": "boolean", "prompt": "p", "response": "true"},
                {
                    "identifier": "c",
                    "modality": "boolean",
                    "prompt": "p",
                    "response": "True",
                    "difficulty": 1.5,
                },
            ]
        ),
    )
    code, out, _ = run(capsys, "validate", str(bad), str(SAMPLES / "arithmetic"))
    assert code == 2
    assert "bad: INVALID (2 errors)" in out
    assert "bad.jsonl:1, item 'a', field 'response'" in out and "outside choiceof3" in out
    assert "bad.jsonl:3, item 'c', field 'difficulty'" in out
    assert "  1 warning:" in out and """'true' read as "True\"""" in out
    assert "arithmetic: ok" in out and "2 paths, 34 items, 1 invalid, 1 warning" in out


def test_validate_tabular_files(qa, tmp_path, capsys):
    source, mapping = qa
    code, out, _ = run(capsys, "validate", source, "--mapping", mapping)
    assert code == 0 and "3 items (single-value 3)" in out
    code, out, _ = run(capsys, "validate", source)
    assert code == 2 and "not an item file" in out and "--mapping" in out
    csv = write(tmp_path / "t.csv", "question,answer\n1+1?,2\n")
    code, out, _ = run(capsys, "validate", csv)
    assert code == 2 and "needs --mapping" in out
    code, out, _ = run(capsys, "validate", str(tmp_path / "absent.jsonl"))
    assert code == 2 and "no such file" in out


def test_convert_writes_a_valid_dataset(qa, root_url, capsys):
    source, mapping = qa
    out_url = root_url + "/tiny"
    code, out, err = run(
        capsys,
        "convert",
        source,
        "--mapping",
        mapping,
        "--out",
        out_url,
        "--id",
        "tiny-qa",
        "--items-per-part",
        "2",
        "--set",
        "version=1.0",
    )
    assert code == 0, err
    assert "wrote dataset 'tiny-qa' (spec dialect): 3 items (single-value 3) in 2 parts" in out
    reader = read_dataset(out_url)
    assert reader.meta.identifier == "tiny-qa" and reader.meta.version == "1.0"
    assert reader.meta.has_part == ["tiny-qa_000.jsonl", "tiny-qa_001.jsonl"]
    items = list(reader.iter_items())
    assert [(i.identifier, i.prompt, i.response) for i in items] == [
        ("qa.0", "2+2?", "4"),
        ("qa.1", "3×3?", "9"),
        ("qa.2", "10-7?", "3"),
    ]
    assert items[0].extras == {"topic": "add"} and items[0].task_prompt == "Answer with a number."
    assert reader.validate().ok
    code, out, _ = run(capsys, "validate", out_url)
    assert code == 0 and "dataset 'tiny-qa': 3 items (single-value 3)" in out
    code, _, err = run(
        capsys, "convert", source, "--mapping", mapping, "--out", out_url, "--id", "tiny-qa"
    )
    assert code == 2 and "already there" in err
    code, _, _ = run(
        capsys,
        "convert",
        source,
        "--mapping",
        mapping,
        "--out",
        out_url,
        "--id",
        "tiny-qa",
        "--overwrite",
    )
    assert code == 0 and read_dataset(out_url).meta.has_part == ["tiny-qa.jsonl"]


def assert_nothing_written(path: Path) -> None:
    assert not path.exists() or not any(path.iterdir())


def test_convert_writes_nothing_when_a_row_is_invalid(tmp_path, capsys):
    rows = [
        *ROWS,
        {"question": "", "answer": "1", "topic": "x"},
        {"question": "ok?", "answer": None, "topic": "y"},
    ]
    source = write(tmp_path / "qa.jsonl", jsonl(rows))
    mapping = write(tmp_path / "m.yaml", yaml.safe_dump(MAPPING))
    code, _, err = run(
        capsys, "convert", source, "--mapping", mapping, "--out", str(tmp_path / "out")
    )
    assert code == 2
    assert "qa.jsonl:4, item 'qa.3', field 'prompt (from mapping.input)'" in err
    assert "qa.jsonl:5, item 'qa.4', field 'mapping.target': column 'answer' is null" in err
    assert_nothing_written(tmp_path / "out")


def test_convert_writes_nothing_when_a_column_is_missing(tmp_path, capsys):
    source = write(tmp_path / "t.csv", "question,answer\n1+1?,2\n")
    mapping = write(tmp_path / "m.yaml", yaml.safe_dump({**MAPPING, "metadata": ["topc"]}))
    code, _, err = run(
        capsys, "convert", source, "--mapping", mapping, "--out", str(tmp_path / "out")
    )
    assert code == 2
    assert "t.csv:1" in err and "field 'mapping.metadata.topc'" in err
    assert "'topc'" in err and "its columns: question, answer" in err
    assert_nothing_written(tmp_path / "out")


def test_convert_fills_missing_dataset_attributes_with_a_warning_each(qa, tmp_path, capsys):
    source, _ = qa
    bare = {k: v for k, v in MAPPING.items() if k != "dataset"}  # a throwaway conversion
    mapping = write(tmp_path / "bare.yaml", yaml.safe_dump(bare))
    code, out, err = run(
        capsys, "convert", source, "--mapping", mapping, "--out", str(tmp_path / "out")
    )
    assert code == 0, err
    filled = {
        "creator": "unknown",
        "publisher": "unknown",
        "subject": "unknown",
        "language": "und",
        "license": "NOASSERTION",
        "source": source,
        "description": f"out: items converted from {source}",
        "created": dt.date.today().isoformat(),
    }
    for name, value in filled.items():
        assert (
            f"bare.yaml, field 'dataset.{name}': required attribute not given; wrote {value!r} "
            f"(hint: add `{name}:` under `dataset:` in the mapping file, or pass --set {name}=...)"
        ) in err
    reader = read_dataset(str(tmp_path / "out"))
    assert reader.meta.not_given() == [] and reader.meta.license == "NOASSERTION"
    assert reader.meta.identifier == "out" and reader.meta_warnings == []
    code, out, _ = run(capsys, "validate", "--strict", str(tmp_path / "out"))
    assert code == 0, out  # what convert writes is complete


def test_convert_strict_refuses_missing_attributes(qa, tmp_path, capsys):
    source, _ = qa
    partial = {
        **MAPPING,
        "dataset": {k: v for k, v in MAPPING["dataset"].items() if k not in ("creator", "license")},
    }
    mapping = write(tmp_path / "partial.yaml", yaml.safe_dump(partial))
    args = ["convert", source, "--mapping", mapping, "--out", str(tmp_path / "out"), "--strict"]
    code, _, err = run(capsys, *args)
    assert code == 2
    assert "partial.yaml, field 'dataset.creator'" in err and "--set creator=" in err
    assert "field 'dataset.license'" in err and "--strict: 2 warnings; nothing written" in err
    assert_nothing_written(tmp_path / "out")
    code, _, err = run(capsys, *args, "--set", "creator=Me", "--set", "license=MIT")
    assert code == 0, err
    assert read_dataset(str(tmp_path / "out")).meta.creator == "Me"


def test_convert_rejects_bad_attributes_even_when_lenient(qa, tmp_path, capsys):
    source, mapping = qa
    code, _, err = run(
        capsys,
        "convert",
        source,
        "--mapping",
        mapping,
        "--out",
        str(tmp_path / "out"),
        "--set",
        "created=May 2025",
    )
    assert code == 2 and "field 'dataset.created'" in err and "YYYY-MM-DD" in err
    assert_nothing_written(tmp_path / "out")


def test_convert_rejects_non_utf8_source(tmp_path, capsys):
    source = write(tmp_path / "l.csv", b"question,answer,topic\nfine,1,a\ncaf\xe9,2,b\n")
    mapping = write(tmp_path / "m.yaml", yaml.safe_dump(MAPPING))
    code, _, err = run(
        capsys, "convert", source, "--mapping", mapping, "--out", str(tmp_path / "out")
    )
    assert code == 2 and "l.csv:3" in err and "not valid UTF-8" in err
    assert_nothing_written(tmp_path / "out")


def test_the_installed_command_runs(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "itemeval", "validate", str(SAMPLES / "facts-tf")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "dataset 'facts-tf': 30 items" in result.stdout


def test_convert_from_s3_source(qa, root_url, capsys):
    source, mapping = qa
    remote = root_url + "/src/qa.jsonl"
    resolve(remote).write_atomic(Path(source).read_bytes())
    code, out, err = run(
        capsys, "convert", remote, "--mapping", mapping, "--out", root_url + "/converted"
    )
    assert code == 0, err
    assert "wrote dataset 'tiny" not in out and "3 items" in out
    assert read_dataset(root_url + "/converted").meta.identifier == "converted"


def test_convert_rewrites_an_item_format_dataset_in_either_dialect(tmp_path, capsys):
    source = str(SAMPLES / "facts-tf")
    out = tmp_path / "facts-ce"
    code, stdout, err = run(
        capsys,
        "convert",
        source,
        "--out",
        str(out),
        "--dialect",
        "commoneval",
        "--set",
        "TITLE=Facts, re-written",
    )
    assert code == 0, err
    assert stdout.startswith("wrote dataset 'facts-tf' (commoneval dialect): 30 items")
    written = yaml.safe_load((out / "facts-tf.yaml").read_text())
    assert written["title"] == "Facts, re-written" and "TITLE" not in written
    lines = [json.loads(line) for line in (out / "facts-tf.jsonl").read_text().splitlines()]
    assert {line["response"] for line in lines if line["modality"] == "ternary"} == {
        "True",
        "False",
        "Unknown",
    }
    code, _, err = run(capsys, "convert", str(out), "--out", str(tmp_path / "back"))
    assert code == 0, err
    again = list(read_dataset(str(tmp_path / "back")).iter_items())
    assert again == list(read_dataset(source).iter_items())


def test_convert_says_what_a_source_needs(qa, tmp_path, capsys):
    source, mapping = qa
    code, _, err = run(capsys, "convert", source, "--out", str(tmp_path / "a"))
    assert code == 2 and "needs --mapping" in err and "configs/mappings/" in err
    code, _, err = run(
        capsys,
        "convert",
        str(SAMPLES / "facts-tf"),
        "--mapping",
        mapping,
        "--out",
        str(tmp_path / "b"),
    )
    assert code == 2 and "needs no mapping" in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_convert_refuses_what_the_reader_dialect_cannot_express(tmp_path, capsys):
    source = tmp_path / "src"
    write(
        source / "src.yaml",
        yaml.safe_dump({**MAPPING["dataset"], "identifier": "src", "hasPart": ["src.jsonl"]}),
    )
    write(
        source / "src.jsonl",
        jsonl(
            [
                {"identifier": "ok.1", "modality": "boolean", "prompt": "p", "response": True},
                {"identifier": "odd~2", "modality": "boolean", "prompt": "p", "response": False},
                {
                    "identifier": "mc.3",
                    "modality": "choiceof3",
                    "prompt": "Which?",
                    "response": "A",
                },
            ]
        ),
    )
    out = tmp_path / "out"
    code, _, err = run(capsys, "convert", str(source), "--out", str(out), "--dialect", "commoneval")
    assert code == 2
    assert "item 'odd~2', field 'identifier': the commoneval reader accepts only" in err
    assert "item 'mc.3', field 'choices'" in err and "lines lettered A to C" in err
    assert_nothing_written(out)
    code, _, err = run(capsys, "convert", str(source), "--out", str(out))  # the spec's: fine
    assert code == 0, err


def test_convert_strict_refuses_what_the_reader_dialect_leaves_out(tmp_path, capsys):
    source = str(SAMPLES / "arithmetic")
    code, _, err = run(
        capsys,
        "convert",
        source,
        "--out",
        str(tmp_path / "a"),
        "--dialect",
        "commoneval",
        "--set",
        "x-team=evals",
    )
    assert code == 0 and "field 'x-team': not written: the commoneval reader" in err
    assert "x-team" not in yaml.safe_load((tmp_path / "a" / "arithmetic.yaml").read_text())
    code, _, err = run(
        capsys,
        "convert",
        source,
        "--out",
        str(tmp_path / "b"),
        "--dialect",
        "commoneval",
        "--set",
        "x-team=evals",
        "--strict",
    )
    assert code == 2 and "--strict: 1 warning; nothing written" in err
    assert not (tmp_path / "b").exists()
