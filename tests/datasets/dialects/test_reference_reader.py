"""The two dialects against the reference reader itself (commoneval 0.2.1): what itemeval writes
in the `commoneval` dialect the reader reads without error, item by item with the reader's class
for its modality; what the reader writes, itemeval reads."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml
from commoneval import dataset as reader_dataset
from commoneval import item as reader_item
from reference_reader import read_with_reference_reader

from itemeval.datasets.format import (
    DatasetMeta,
    Dialect,
    Item,
    ProblemLog,
    read_dataset,
    write_dataset,
)
from itemeval.errors import DatasetError

META = {
    "identifier": "every-modality",
    "created": "2025-05-19",
    "creator": "itemeval tests",
    "description": "One item of every modality",
    "language": "eng",
    "license": "CC0-1.0",
    "publisher": "itemeval tests",
    "source": "written in the test",
    "subject": "testing",
    "hasPart": [],
}

ITEMS = [
    Item(identifier="b1", modality="boolean", prompt="Is ice cold?", response="True"),
    Item(identifier="b2", modality="boolean", prompt="Is fire cold?", response="False"),
    Item(identifier="t1", modality="ternary", prompt="Rain tomorrow?", response="I don't know"),
    Item(identifier="t2", modality="ternary", prompt="Is 2 even?", response="True"),
    Item(
        identifier="c2",
        modality="choiceof2",
        prompt="Pick the even number.",
        response="B",
        extras={"choices": ["3", "4"], "topic": "parity"},
    ),
    Item(identifier="c3", modality="choiceof3", prompt="Largest?\nA. 1\nB. 9\nC. 5", response="B"),
    Item(
        identifier="c4",
        modality="choiceof4",
        prompt="Planet nearest the Sun?\n\nA) Venus\nB) Mercury\nC) Earth\nD) Mars",
        response="B",
        difficulty=0.1,
    ),
    Item(
        identifier="c5",
        modality="choiceof5",
        prompt="Vowel?\n(A) b\n(B) c\n(C) d\n(D) e\n(E) f",
        response="D",
        task_prompt="Answer with the letter.",
    ),
    Item(identifier="z1", modality="cloze", prompt="Two plus two is ___.", response="four"),
    Item(identifier="s1", modality="single-value", prompt="7 x 6?", response="42", support="7*6"),
    Item(identifier="p1", modality="short-prose", prompt="Capital of Peru?", response="Lima"),
    Item(
        identifier="l1",
        modality="long-prose",
        prompt="Explain rain.",
        response="Water vapour condenses and falls.",
        extras={"gradingScheme": "Mentions condensation."},
    ),
]


def write(tmp_path: Path, dialect: Dialect, items=ITEMS, **meta) -> Path:
    out = tmp_path / dialect.value
    write_dataset(str(out), DatasetMeta(**{**META, **meta}), items, dialect=dialect)
    return out


def test_the_reader_reads_every_modality_we_write(tmp_path):
    _, read = read_with_reference_reader(write(tmp_path, Dialect.COMMONEVAL))
    by_id = {i.identifier: i for i in read}
    assert [type(by_id[i.identifier]).__name__ for i in ITEMS] == [
        "BooleanItem",
        "BooleanItem",
        "TernaryItem",
        "TernaryItem",
        "ClosedSetItem",
        "ClosedSetItem",
        "ClosedSetItem",
        "ClosedSetItem",
        "OpenEndedItem",
        "OpenEndedItem",
        "OpenEndedItem",
        "OpenEndedItem",
    ]
    assert by_id["b1"].response is True and by_id["b2"].response is False
    assert by_id["t1"].response == reader_item.Ternary.UNKNOWN
    assert by_id["t2"].response == reader_item.Ternary.TRUE
    assert (by_id["c2"].response, by_id["c2"].choices) == (1, ["3", "4"])
    assert by_id["c2"].otherargs["topic"] == "parity"
    assert (by_id["c3"].response, by_id["c3"].choices) == (1, ["1", "9", "5"])  # from the prompt
    assert by_id["c4"].choices == ["Venus", "Mercury", "Earth", "Mars"]
    assert by_id["c4"].difficulty == 0.1
    assert by_id["c5"].response == 3 and by_id["c5"].taskPrompt == "Answer with the letter."
    assert by_id["s1"].modality is reader_item.Modality.SINGLEVALUE and by_id["s1"].support == "7*6"
    assert by_id["p1"].modality is reader_item.Modality.SHORTPROSE
    assert by_id["l1"].modality is reader_item.Modality.LONGPROSE
    assert by_id["l1"].otherargs == {"gradingScheme": "Mentions condensation."}


def test_itemeval_reads_its_commoneval_dialect_back(tmp_path):
    reader = read_dataset(str(write(tmp_path, Dialect.COMMONEVAL)))
    back = list(reader.iter_items())
    for original, read in zip(ITEMS, back, strict=True):
        assert read.spec_attributes() == original.spec_attributes()
        found_choices = (
            {"choices": read.extras.get("choices")} if original.modality.n_choices else {}
        )
        assert read.extras == {**original.extras, **found_choices}
    warned = {(w.field, w.message) for w in reader.log.warnings}
    assert (
        "modality",
        """'singlevalue' read as "single-value" (the reference reader's spelling)""",
    ) in warned
    assert (
        "response",
        """'Unknown' read as "I don't know" (the reference reader's spelling)""",
    ) in warned


def test_the_spec_dialect_is_lossless_and_carries_only_spec_keys(tmp_path):
    out = write(tmp_path, Dialect.SPEC)
    back = list(read_dataset(str(out)).iter_items())
    assert [i.to_dict() for i in back] == [i.to_dict() for i in ITEMS]
    records = [json.loads(line) for line in (out / "every-modality.jsonl").read_text().splitlines()]
    spec_keys = {
        "identifier",
        "modality",
        "prompt",
        "response",
        "difficulty",
        "support",
        "taskPrompt",
    }
    assert all(set(r) <= spec_keys for r in records)
    assert [r["response"] for r in records[:2]] == [True, False]  # JSON booleans
    assert records[2]["response"] == "I don't know"
    attributes = (out / "every-modality.attributes.jsonl").read_text().splitlines()
    assert [json.loads(line)["identifier"] for line in attributes] == ["c2", "l1"]


def test_what_the_reader_writes_itemeval_reads(tmp_path):
    """Items built and written by commoneval itself (`write_jsonline`, `write_yaml`)."""
    made = [
        reader_item.BooleanItem(
            identifier="rb",
            modality=reader_item.Modality.BOOLEAN,
            prompt="Sky blue?",
            response=True,
        ),
        reader_item.TernaryItem(
            identifier="rt",
            modality=reader_item.Modality.TERNARY,
            prompt="Life on Mars?",
            response=reader_item.Ternary.UNKNOWN,
        ),
        reader_item.ClosedSetItem(
            identifier="rc",
            modality=reader_item.Modality.CHOICEOF3,
            prompt="Capital of France?",
            response=1,
            choices=["London", "Paris", "Berlin"],
        ),
        reader_item.OpenEndedItem(
            identifier="rs",
            modality=reader_item.Modality.SHORTPROSE,
            prompt="A primary colour?",
            response="Red",
            otherargs={"source_row": 7},
        ),
    ]
    directory = tmp_path / "made"
    directory.mkdir()
    with (directory / "made.jsonl").open("w") as handle:
        for made_item in made:
            handle.write(json.dumps(made_item.as_dict()) + "\n")
    dataset = reader_dataset.Dataset(
        "made",
        created=dt.date(2025, 5, 1),
        creator="Biblica",
        description="Written by the reference reader",
        source="the test",
        subject="test",
        hasPart=["made.jsonl"],
    )
    with (directory / "made.yaml").open("w") as handle:
        dataset.write_yaml(handle)

    reader = read_dataset(str(directory))
    items = {i.identifier: i for i in reader.iter_items()}
    assert items["rb"].response == "True"
    assert items["rt"].response == "I don't know"
    assert items["rc"].response == "B" and items["rc"].extras == {"choices": made[2].choices}
    assert items["rc"].task_prompt.startswith("Choose one of the following 3 options")
    assert items["rs"].modality.value == "short-prose" and items["rs"].extras == {"source_row": 7}
    assert reader.meta.publisher is None and reader.meta.title is None
    assert {w.field for w in reader.meta_warnings} >= {"publisher", "title", "taskPrompt"}
    assert all(w.severity == "warning" for w in reader.meta_warnings)


@pytest.mark.parametrize(
    ("item", "field", "message"),
    [
        (
            Item(identifier="a~1", modality="boolean", prompt="p", response="True"),
            "identifier",
            "only letters, digits, - _ . in identifiers",
        ),
        (
            Item(identifier="mc", modality="choiceof4", prompt="Which one?", response="A"),
            "choices",
            "it has no `choices` attribute and its prompt has no lines lettered A to D",
        ),
        (
            Item(
                identifier="mc",
                modality="choiceof2",
                prompt="p",
                response="A",
                extras={"choices": ["x", "y", "z"]},
            ),
            "choices",
            "`choices` must be a list of 2 texts for choiceof2, found 3 entries",
        ),
    ],
)
def test_items_the_reader_cannot_take_are_refused_before_writing(tmp_path, item, field, message):
    with pytest.raises(DatasetError) as info:
        write(tmp_path, Dialect.COMMONEVAL, items=[ITEMS[0], item])
    (problem,) = info.value.problems
    assert (problem.item, problem.field) == (item.identifier, field) and message in problem.message
    assert not any((tmp_path / "commoneval").iterdir())


@pytest.mark.parametrize(
    ("meta", "field"),
    [
        ({"language": ["eng", "fra"]}, "language"),
        ({"created": (dt.date.today() + dt.timedelta(days=1)).isoformat()}, "created"),
        ({"creator": None}, "creator"),
        ({"datePublished": "2025-01-01"}, "datePublished"),  # before created
    ],
)
def test_dataset_attributes_the_reader_cannot_take_are_refused(tmp_path, meta, field):
    with pytest.raises(DatasetError) as info:
        write(tmp_path, Dialect.COMMONEVAL, **meta)
    assert [p.field for p in info.value.problems] == [field]
    assert not (tmp_path / "commoneval").exists() or not any((tmp_path / "commoneval").iterdir())


def test_the_reader_dialect_leaves_out_ad_hoc_dataset_attributes_with_a_warning(tmp_path):
    log = ProblemLog()
    out = tmp_path / "ce"
    meta = DatasetMeta(**{**META, "language": ["eng"]}, extras={"x-team": "evals"})
    write_dataset(str(out), meta, ITEMS[:1], dialect="commoneval", log=log)
    assert [(w.field, w.severity) for w in log.warnings] == [("x-team", "warning")]
    written = yaml.safe_load((out / "every-modality.yaml").read_text())
    assert "x-team" not in written and written["language"] == "eng"
    read_with_reference_reader(out)
