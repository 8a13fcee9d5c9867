"""`DatasetSource` as a study's `datasets:` entry, format inference, and the item-format handle."""

import pytest
from adapter_files import put, put_items_dataset, put_jsonl
from pydantic import ValidationError

from itemeval.datasets.adapters import DatasetSource, MappingSpec, open_source
from itemeval.errors import ConfigError, DatasetError


def test_unknown_keys_are_rejected():
    with pytest.raises(ValidationError, match="extra"):
        DatasetSource(path="x.jsonl", mappings={"input": "q"})


def test_name_defaults_from_the_path_and_must_be_a_slug():
    assert DatasetSource(path="data/ARC-Easy-Test.jsonl", mapping={"input": "q"}).name == (
        "arc-easy-test"
    )
    assert DatasetSource(path="data/mmlu/test/*.csv", mapping={"input": "q"}).name == "test"
    assert DatasetSource(path="s3://b/datasets/arithmetic/").name == "arithmetic"
    with pytest.raises(ValidationError, match="slug"):
        DatasetSource(name="My Data", path="x")


def test_field_combinations_are_checked():
    with pytest.raises(ValidationError, match="needs a `mapping`"):
        DatasetSource(path="x.csv", format="csv")
    with pytest.raises(ValidationError, match="not items"):
        DatasetSource(path="x", format="items", mapping={"input": "q"})
    with pytest.raises(ValidationError, match="Hugging Face"):
        DatasetSource(path="x.jsonl", format="jsonl", mapping={"input": "q"}, revision="abc")
    with pytest.raises(ValidationError, match="`input`"):
        DatasetSource(path="x.jsonl", mapping={"target": "a"})


def test_items_directory_is_inferred_and_adapted(root_url):
    put_items_dataset(
        root_url + "/ds",
        [
            {
                "identifier": "a",
                "modality": "boolean",
                "prompt": "Sky blue?",
                "response": True,
                "support": "look up",
                "gradingScheme": "exact",
                "Topic": "sky",
            },
            {
                "identifier": "b",
                "modality": "choiceof2",
                "prompt": "Pick\nA. x\nB. y",
                "response": "B",
                "taskPrompt": "Own prompt.",
                "difficulty": 0.4,
            },
        ],
        taskPrompt="Dataset prompt.",
    )
    handle = open_source(DatasetSource(name="facts", path=root_url + "/ds"))
    assert handle.format == "items"
    items = [i for batch in handle.iter_batches(10) for i in batch]
    first, second = items
    assert (first.id, first.input, first.target, first.modality) == (
        "a",
        "Sky blue?",
        "True",
        "boolean",
    )
    assert first.dataset == "facts"
    assert first.task_prompt == "Dataset prompt." and second.task_prompt == "Own prompt."
    assert first.metadata == {"support": "look up", "Topic": "sky"}
    assert first.grading_scheme == "exact"
    assert second.difficulty == 0.4
    assert handle.warnings == []  # JSON true is how booleans are written
    assert handle.fingerprint() == handle.fingerprint_details().digest


def test_relative_paths_resolve_against_the_base_dir(tmp_path):
    study = tmp_path / "study"
    put_jsonl(str(study / "data" / "q.jsonl"), [{"q": "2+2?", "a": 4}])
    put(
        str(study / "maps" / "m.yaml"),
        "input: q\ntarget: a\nmodality: single-value\ndataset: {identifier: ignored-here}\n",
    )
    source = DatasetSource(path="data/q.jsonl", mapping="maps/m.yaml")
    handle = open_source(source, base_dir=study)
    (item,) = next(handle.iter_batches(5))
    assert (item.id, item.input, item.target) == ("q.q.0", "2+2?", "4")


def test_format_inference_errors(tmp_path):
    with pytest.raises(ConfigError, match="no such file or directory"):
        open_source(DatasetSource(path=str(tmp_path / "nothing")))
    put(str(tmp_path / "mixed" / "a.csv"), "q\nx\n")
    put(str(tmp_path / "mixed" / "b.jsonl"), "{}\n")
    with pytest.raises(ConfigError, match="csv, jsonl"):
        open_source(DatasetSource(path=str(tmp_path / "mixed"), mapping={"input": "q"}))
    put(str(tmp_path / "x.csv"), "q\nx\n")
    with pytest.raises(ConfigError, match="needs a `mapping`"):
        open_source(DatasetSource(path=str(tmp_path / "x.csv")))
    with pytest.raises(DatasetError, match="no csv files"):
        open_source(DatasetSource(path=str(tmp_path / "none" / "*.csv"), mapping={"input": "q"}))


def test_inline_mapping_object_is_accepted():
    spec = MappingSpec(input="q")
    assert DatasetSource(path="x.jsonl", mapping=spec).mapping is spec
