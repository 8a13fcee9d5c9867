"""`choiceof6` .. `choiceof26`, itemeval's extension of the item format, in both dialects: the
spec's writes them and itemeval reads them back unchanged (`convert` notes the extension); the
reference reader, commoneval 0.2.1, cannot read a dataset holding one (its `read_items` raises
and keeps no item), so the `commoneval` dialect refuses them, naming each item and its modality,
and writes nothing."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
import yaml
from commoneval import item as reader_item
from reference_reader import read_with_reference_reader

from itemeval.api import convert_dataset
from itemeval.cli.main import main
from itemeval.datasets.format import (
    DatasetMeta,
    Dialect,
    Item,
    Modality,
    read_dataset,
    write_dataset,
)
from itemeval.errors import DatasetError

META = {
    "identifier": "many",
    "created": "2025-05-19",
    "creator": "itemeval tests",
    "description": "Items with up to 26 choices",
    "language": "eng",
    "license": "CC0-1.0",
    "publisher": "itemeval tests",
    "source": "written in the test",
    "subject": "testing",
    "hasPart": [],
}


def lettered(n: int) -> str:
    return "Which one?\n" + "\n".join(
        f"{c}. option {c.lower()}" for c in string.ascii_uppercase[:n]
    )


ITEMS = [
    Item(identifier="c4", modality="choiceof4", prompt=lettered(4), response="D"),
    Item(
        identifier="c10",
        modality="choiceof10",
        prompt=lettered(10),
        response="J",
        extras={"choices": [f"option {c}" for c in "abcdefghij"], "src": "mmlu-pro"},
    ),
    Item(identifier="c6", modality="choiceof6", prompt=lettered(6), response="F"),
    Item(identifier="c26", modality="choiceof26", prompt=lettered(26), response="Z"),
]


def test_the_spec_dialect_writes_them_and_itemeval_reads_them_back(tmp_path):
    out = tmp_path / "spec"
    write_dataset(str(out), DatasetMeta(**META), ITEMS)
    lines = [json.loads(line) for line in (out / "many.jsonl").read_text().splitlines()]
    assert [(r["modality"], r["response"]) for r in lines] == [
        ("choiceof4", "D"),
        ("choiceof10", "J"),
        ("choiceof6", "F"),
        ("choiceof26", "Z"),
    ]
    back = list(read_dataset(str(out)).iter_items())
    assert [i.to_dict() for i in back] == [i.to_dict() for i in ITEMS]
    assert read_dataset(str(out)).validate().log.warning_count == 0


def test_commoneval_0_2_1_reads_none_of_a_dataset_with_one_choiceof10_item(tmp_path):
    """What the reference reader does with our extension (why the dialect refuses it)."""
    out = tmp_path / "ce"
    write_dataset(str(out), DatasetMeta(**META), ITEMS[:1], dialect=Dialect.COMMONEVAL)
    read_with_reference_reader(out)  # fine so far
    c10 = {
        "identifier": "c10",
        "modality": "choiceof10",
        "prompt": ITEMS[1].prompt,
        "response": "J",
        "otherargs": {"choices": ITEMS[1].extras["choices"]},  # all the reader could want
    }
    with (out / "many.jsonl").open("a") as handle:
        handle.write(json.dumps(c10) + "\n")
    with pytest.raises(ValueError, match="'choiceof10' is not a valid Modality"):
        read_with_reference_reader(out)
    with pytest.raises(AssertionError, match="at most 5 choices"):
        reader_item.ClosedSetItem(
            identifier="c10",
            modality=reader_item.Modality.CHOICEOF5,
            prompt="p",
            response=9,
            choices=ITEMS[1].extras["choices"],
        )


def test_the_commoneval_dialect_refuses_them_naming_item_and_modality(tmp_path):
    out = tmp_path / "ce"
    with pytest.raises(DatasetError) as info:
        write_dataset(str(out), DatasetMeta(**META), ITEMS, dialect=Dialect.COMMONEVAL)
    text = str(info.value)
    assert "item 'c10', field 'modality'" in text
    assert "choiceof10 is itemeval's extension of the item format" in text
    assert "commoneval 0.2.1 reader knows choiceof2 .. choiceof5 only" in text
    assert "--dialect spec" in text
    assert not out.exists() or not any(out.iterdir())
    # choiceof2 .. choiceof5 still go through, and the reader reads them
    write_dataset(str(out), DatasetMeta(**META), ITEMS[:1], dialect=Dialect.COMMONEVAL)
    _, read = read_with_reference_reader(out)
    assert [(r.identifier, r.response) for r in read] == [("c4", 3)]


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    write_dataset(str(source), DatasetMeta(**META), ITEMS)
    return source


def test_convert_in_both_dialects(tmp_path, capsys):
    source = _source(tmp_path)
    written = convert_dataset(str(source), str(tmp_path / "spec"))
    assert written.extensions == ["choiceof6", "choiceof10", "choiceof26"]
    assert written.log.warning_count == 0  # an extension, not a deviation: --strict passes
    strict = convert_dataset(str(source), str(tmp_path / "strict"), strict=True)
    assert strict.items == 4

    code = main(["convert", str(source), "--out", str(tmp_path / "cli-spec")])
    out, err = capsys.readouterr()
    assert code == 0
    assert "choiceof10 1, choiceof26 1, choiceof4 1, choiceof6 1" in out
    assert "note: choiceof6, choiceof10, choiceof26: itemeval's extension of the item format" in err

    ce = tmp_path / "cli-ce"
    code = main(["convert", str(source), "--out", str(ce), "--dialect", "commoneval"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    for name, modality in (("c10", "choiceof10"), ("c6", "choiceof6"), ("c26", "choiceof26")):
        assert f"item '{name}', field 'modality': {modality} is itemeval's extension" in err
    assert "item 'c4'" not in err and "Traceback" not in err
    assert not ce.exists() or not any(ce.iterdir())


def test_a_commoneval_dataset_converts_to_the_spec_unchanged(tmp_path):
    """The other way: a reader's-dialect dataset (choiceof2..5) re-written in the spec's."""
    ce = tmp_path / "ce"
    write_dataset(str(ce), DatasetMeta(**META), ITEMS[:1], dialect=Dialect.COMMONEVAL)
    written = convert_dataset(str(ce), str(tmp_path / "spec"))
    assert written.extensions == [] and dict(written.by_modality) == {"choiceof4": 1}
    meta = yaml.safe_load((tmp_path / "spec" / "many.yaml").read_text())
    assert meta["identifier"] == "many"


@pytest.mark.parametrize("n", range(2, 27))
def test_every_count_from_2_to_26_round_trips_in_the_spec_dialect(tmp_path, n):
    last = string.ascii_uppercase[n - 1]
    item = Item(identifier=f"n{n}", modality=f"choiceof{n}", prompt=lettered(n), response=last)
    assert item.modality is Modality.for_choices(n)
    assert item.modality.is_extension is (n > 5)
    write_dataset(str(tmp_path / "d"), DatasetMeta(**META), [item])
    (back,) = read_dataset(str(tmp_path / "d")).iter_items()
    assert back == item
