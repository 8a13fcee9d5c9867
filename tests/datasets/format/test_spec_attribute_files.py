"""Attributes files (items' ad hoc attributes beside their part): joined while streaming, and
every way they can be wrong named with the file, the line or item, and the attribute."""

from __future__ import annotations

import pytest
import yaml
from spec_files import META, item, jsonl, put

from itemeval.datasets.format import read_dataset
from itemeval.errors import DatasetError


def dataset(directory: str, items, attributes: str | None, **meta) -> str:
    fields = {**META, "hasPart": ["demo.jsonl"], **meta}
    if attributes is not None:
        fields.setdefault("itemAttributes", {"demo.jsonl": "demo.attributes.jsonl"})
        put(f"{directory}/demo.attributes.jsonl", attributes)
    put(f"{directory}/demo.yaml", yaml.safe_dump(fields))
    put(f"{directory}/demo.jsonl", jsonl(items))
    return directory


def test_records_join_their_items_case_insensitively(root_url):
    attributes = jsonl([{"identifier": "A", "topic": "x"}, {"identifier": "c", "n": [1]}])
    directory = dataset(root_url + "/ok", [item("a"), item("b"), item("c")], attributes)
    items = list(read_dataset(directory).iter_items())
    assert [i.extras for i in items] == [{"topic": "x"}, {}, {"n": [1]}]


CASES = [
    (
        "record-for-no-item",
        [item("a"), item("b")],
        jsonl([{"identifier": "b", "k": 1}, {"identifier": "zz", "k": 2}]),
        [
            "demo.attributes.jsonl:2",
            "item 'zz'",
            "1 record from here on match no item of demo.jsonl",
        ],
    ),
    (
        "out-of-order",
        [item("a"), item("b")],
        jsonl([{"identifier": "b", "k": 1}, {"identifier": "a", "k": 2}]),
        ["demo.attributes.jsonl:2", "item 'a'", "match no item", "in the part's order"],
    ),
    (
        "not-json",
        [item("a")],
        '{"identifier": "a", "k": 1}\n{oops\n',
        ["demo.attributes.jsonl:2", "not valid JSON"],
    ),
    (
        "no-identifier",
        [item("a")],
        jsonl([{"k": 1}]),
        ["demo.attributes.jsonl:1", "field 'identifier'", "no identifier"],
    ),
    (
        "spec-attribute-here",
        [item("a")],
        jsonl([{"identifier": "a", "Prompt": "other"}]),
        ["demo.attributes.jsonl:1", "item 'a'", "field 'Prompt'", "belong in the part"],
    ),
    (
        "given-twice",
        [item("a", topic="in the part")],
        jsonl([{"identifier": "a", "topic": "here"}]),
        ["demo.jsonl:1", "item 'a'", "field 'topic'", "both in the part and in its attributes"],
    ),
]


@pytest.mark.parametrize(
    ("items", "attributes", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_attributes_files_are_named(tmp_path, items, attributes, expected):
    directory = dataset(str(tmp_path / "ds"), items, attributes)
    with pytest.raises(DatasetError) as info:
        list(read_dataset(directory).iter_items())
    text = str(info.value)
    for fragment in expected:
        assert fragment in text, f"{fragment!r} not in {text!r}"


@pytest.mark.parametrize(
    ("listed", "expected"),
    [
        ({"demo.jsonl": "absent.attributes.jsonl"}, "itemAttributes lists 'absent.attributes"),
        ({"other.jsonl": "demo.attributes.jsonl"}, "names 'other.jsonl', which is not a part"),
        (["demo.attributes.jsonl"], "expected a mapping of part file -> attributes file"),
    ],
)
def test_bad_item_attributes_listing(tmp_path, listed, expected):
    directory = dataset(str(tmp_path / "ds"), [item("a")], "", itemAttributes=listed)
    with pytest.raises(DatasetError) as info:
        read_dataset(directory)
    assert "demo.yaml" in str(info.value) and "field 'itemAttributes'" in str(info.value)
    assert expected in str(info.value)
