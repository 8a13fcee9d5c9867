"""The Hugging Face adapter, on datasets built in the test (never the network)."""

import pytest

from itemeval.datasets.adapters import DatasetSource, open_source
from itemeval.errors import ConfigError

datasets = pytest.importorskip("datasets")

MAPPING = {
    "id_template": "hf.{{ _stem }}.{{ _index }}",
    "input": "question",
    "choices": {"column": "choices"},
    "target": "answer",
    "metadata": ["subject"],
}
ROWS = {
    "question": ["2+2?", "Capital of France?", "Colour of the sky?"],
    "choices": [["3", "4"], ["Rome", "Paris", "Oslo"], ["blue", "red", "green", "gold"]],
    "answer": ["B", "B", "A"],
    "subject": ["math", "geo", "nature"],
}


def test_saved_dataset(tmp_path):
    datasets.Dataset.from_dict(ROWS).save_to_disk(str(tmp_path / "saved"))
    handle = open_source(
        DatasetSource(name="hf-local", path="saved", format="hf", mapping=MAPPING),
        base_dir=tmp_path,
    )
    items = [i for b in handle.iter_batches(2) for i in b]
    assert [i.id for i in items] == ["hf.saved.0", "hf.saved.1", "hf.saved.2"]
    assert [i.modality for i in items] == ["choiceof2", "choiceof3", "choiceof4"]
    assert items[1].input == "Capital of France?\n\nA. Rome\nB. Paris\nC. Oslo"
    assert items[1].target == "B" and items[1].metadata["subject"] == "geo"
    details = handle.fingerprint_details()
    assert details.files and details.mapping and details.revision is None


def test_saved_dataset_dict_needs_a_split_and_format_is_inferred(tmp_path):
    whole = datasets.Dataset.from_dict(ROWS)
    datasets.DatasetDict({"test": whole, "dev": whole.select([0])}).save_to_disk(
        str(tmp_path / "dd")
    )
    with pytest.raises(ConfigError, match=r"choose a split: (test, dev|dev, test)"):
        list(
            open_source(DatasetSource(path=str(tmp_path / "dd"), mapping=MAPPING)).iter_batches(10)
        )
    handle = open_source(DatasetSource(path=str(tmp_path / "dd"), mapping=MAPPING, split="dev"))
    assert handle.format == "hf"
    (batch,) = handle.iter_batches(10)
    assert [i.id for i in batch] == ["hf.dev.0"]


def test_missing_column_is_named(tmp_path):
    datasets.Dataset.from_dict(ROWS).save_to_disk(str(tmp_path / "saved"))
    handle = open_source(
        DatasetSource(path=str(tmp_path / "saved"), format="hf", mapping={"input": "questoin"})
    )
    report = handle.validate()
    assert not report.ok
    assert "mapping.input names column 'questoin'" in str(report.log.errors[0])


def test_hub_dataset_without_revision_is_a_config_error():
    source = DatasetSource(
        path="someone/some-benchmark", format="hf", mapping=MAPPING, split="test"
    )
    with pytest.raises(ConfigError) as info:
        open_source(source)
    text = str(info.value)
    assert "field 'revision'" in text and "someone/some-benchmark" in text
    assert "commit sha" in text and info.value.exit_code == 2


def test_hub_dataset_with_a_branch_revision_warns_and_is_fingerprinted_by_revision():
    source = DatasetSource(
        path="someone/some-benchmark", format="hf", mapping=MAPPING, split="test", revision="main"
    )
    handle = open_source(source)  # nothing is fetched until items are read
    assert [w.field for w in handle.warnings] == ["revision"]
    details = handle.fingerprint_details()
    assert details.revision == "someone/some-benchmark@main:test" and not details.files
    pinned = open_source(source.model_copy(update={"revision": "a" * 40}))
    assert pinned.warnings == [] and pinned.fingerprint() != handle.fingerprint()
