"""Every dataset in configs/datasets and the five benchmarks in ../shared/data (converted with
configs/mappings), written by `itemeval convert` in both dialects: the spec's is read back by
itemeval losslessly, the commoneval one is read by the reference reader without error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_reader import read_with_reference_reader

from itemeval.cli.main import main
from itemeval.datasets.adapters import DatasetSource, load_mapping_file, open_source
from itemeval.datasets.format import Item, ProblemLog, read_dataset

REPO = Path(__file__).resolve().parents[3]
SAMPLES = sorted(p for p in (REPO / "configs" / "datasets").iterdir() if p.is_dir())
MAPPINGS = REPO / "configs" / "mappings"
BENCHMARKS = {
    "gsm8k": "gsm8k/test.jsonl",
    "mmlu": "mmlu/test/*.csv",
    "arc": "arc/*.jsonl",
    "boolq": "boolq/dev.jsonl",
    "truthfulqa": "truthfulqa/TruthfulQA.csv",
}
SPEC_KEYS = {"identifier", "modality", "prompt", "response", "difficulty", "support", "taskPrompt"}
READER_RESPONSE = {"I don't know": "Unknown"}


def convert(capsys, source: str, out: Path, dialect: str, mapping: Path | None = None) -> None:
    args = ["convert", source, "--out", str(out), "--dialect", dialect, "--items-per-part", "2000"]
    code = main(args + (["--mapping", str(mapping)] if mapping else []))
    _, err = capsys.readouterr()
    assert code == 0, err


def check_both_dialects(
    capsys, source: str, items: list[Item], meta: dict, tmp_path: Path, mapping: Path | None = None
) -> None:
    # the spec's dialect: lossless for itemeval, only spec keys in the parts
    convert(capsys, source, tmp_path / "spec", "spec", mapping)
    reader = read_dataset(str(tmp_path / "spec"))
    back = [i for batch in reader.iter_batches(5000) for i in batch]
    assert [i.to_dict() for i in back] == [i.to_dict() for i in items]
    assert reader.log.warning_count == 0 and reader.meta_warnings == []
    written = {
        k: v for k, v in reader.meta.to_dict().items() if k not in ("hasPart", "itemAttributes")
    }
    assert written == meta
    for part in reader.parts:
        for line in Path(part.path).read_text(encoding="utf-8").splitlines():
            assert {k.casefold() for k in json.loads(line)} <= {k.casefold() for k in SPEC_KEYS}

    # the reference reader's dialect: commoneval 0.2.1 builds every item
    convert(capsys, source, tmp_path / "commoneval", "commoneval", mapping)
    _, read = read_with_reference_reader(tmp_path / "commoneval")
    assert [i.identifier for i in read] == [i.identifier for i in items]
    for ours, theirs in zip(items, read, strict=True):
        if ours.modality.value == "boolean":
            assert theirs.response is (ours.response == "True")
        elif ours.modality.n_choices:
            assert theirs.response == "ABCDE".index(ours.response)
            assert len(theirs.choices) == ours.modality.n_choices
        else:
            assert theirs.response == READER_RESPONSE.get(ours.response, ours.response)
        assert theirs.prompt == ours.prompt
    # ... and itemeval reads it too, to the same items (the choices are now explicit)
    again = list(read_dataset(str(tmp_path / "commoneval")).iter_items())
    assert [i.spec_attributes() for i in again] == [i.spec_attributes() for i in items]


@pytest.mark.parametrize("sample", SAMPLES, ids=[p.name for p in SAMPLES])
def test_sample_datasets_in_both_dialects(sample, tmp_path, capsys):
    original = read_dataset(str(sample))
    items = list(original.iter_items())
    meta = {
        k: v for k, v in original.meta.to_dict().items() if k not in ("hasPart", "itemAttributes")
    }
    check_both_dialects(capsys, str(sample), items, meta, tmp_path)


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_benchmarks_in_both_dialects(name, shared_data, tmp_path, capsys):
    source = str(shared_data / BENCHMARKS[name])
    mapping_file = MAPPINGS / f"{name}.yaml"
    mapping, attributes = load_mapping_file(str(mapping_file))
    handle = open_source(DatasetSource(name=name, path=source, mapping=mapping))
    log = ProblemLog()
    items = list(handle.scan_items(log))
    log.raise_if_errors()
    assert len(items) > 500
    meta = {k: v for k, v in attributes.items() if k != "hasPart"}
    check_both_dialects(capsys, source, items, meta, tmp_path, mapping_file)


@pytest.mark.parametrize("sample", SAMPLES, ids=[p.name for p in SAMPLES])
def test_sample_datasets_are_what_convert_writes(sample, tmp_path, capsys):
    """The shipped samples are in the spec's dialect, byte for byte as itemeval writes it."""
    convert(capsys, str(sample), tmp_path / "again", "spec")
    written = sorted(p.name for p in (tmp_path / "again").iterdir())
    assert written == sorted(p.name for p in sample.iterdir())
    for name in written:
        ours = (tmp_path / "again" / name).read_text(encoding="utf-8")
        shipped = (sample / name).read_text(encoding="utf-8")
        if name.endswith(".yaml"):  # the samples start with a comment line
            shipped = shipped.split("\n", 1)[1]
        assert ours == shipped, name
