import datetime as dt

import pytest
from pydantic import ValidationError

from itemeval.datasets.format import DatasetMeta, Item, Where, parse_dataset_meta, part_names

WHERE = Where(file="demo.yaml")
BASE = {
    "identifier": "demo",
    "created": "2025-05-19",
    "creator": "A. Author",
    "description": "d",
    "hasPart": ["demo.jsonl"],
    "language": "eng",
    "license": "CC0-1.0",
    "publisher": "P",
    "source": "S",
    "subject": ["x", "y"],
}


def parse(raw):
    meta, problems = parse_dataset_meta(raw, WHERE)
    return (
        meta,
        [p for p in problems if p.severity == "error"],
        [p for p in problems if p.severity == "warning"],
    )


def test_all_standard_attributes_and_extras_round_trip():
    raw = {
        **BASE,
        "contributor": ["B", "C"],
        "datePublished": "2025-06-01",
        "licenseNotes": "n",
        "metadataVersion": "3.3",
        "sourceProcess": "by hand",
        "taskPrompt": "Be brief.",
        "title": "Demo",
        "version": "1.0.0",
        "x-internal": {"owner": "team"},
    }
    meta, errors, warnings = parse(raw)
    assert not errors and not warnings
    assert meta.contributor == ["B", "C"] and meta.date_published == "2025-06-01"
    assert meta.extras == {"x-internal": {"owner": "team"}}
    assert meta.to_dict() == raw


def test_names_are_case_insensitive_and_yaml_dates_are_read():
    raw = {k.upper(): v for k, v in BASE.items()}
    raw["CREATED"] = dt.date(2025, 5, 19)
    meta, errors, _ = parse(raw)
    assert not errors
    assert meta.created == "2025-05-19" and meta.has_part == ["demo.jsonl"]
    assert "HASPART" in meta.to_dict() and "IDENTIFIER" in meta.to_dict()


def test_lenient_values_warn():
    meta, errors, warnings = parse(
        {**BASE, "version": 1.5, "hasPart": "demo.jsonl", "taskPrompt": ""}
    )
    assert not errors
    assert meta.version == "1.5" and meta.has_part == ["demo.jsonl"] and meta.task_prompt is None
    assert {w.field for w in warnings} == {"version", "hasPart", "taskPrompt"}


@pytest.mark.parametrize("missing", ["identifier", "hasPart"])
def test_identifier_and_parts_are_needed(missing):
    raw = {k: v for k, v in BASE.items() if k != missing}
    meta, errors, _ = parse(raw)
    assert meta is None
    assert [e.field for e in errors] == [missing]
    assert "missing" in errors[0].message and errors[0].file == "demo.yaml"


DESCRIPTIVE = ["created", "creator", "description", "language", "license", "publisher"]
DESCRIPTIVE += ["source", "subject"]


@pytest.mark.parametrize("name", DESCRIPTIVE)
@pytest.mark.parametrize(("value", "what"), [(None, "null"), ("", "empty"), ("  ", "empty")])
def test_a_descriptive_required_attribute_not_given_is_a_named_warning(name, value, what):
    """Published data has `publisher: null`: read, with a warning naming the attribute."""
    meta, errors, warnings = parse({**BASE, name: value})
    assert not errors
    assert [(w.field, w.message) for w in warnings] == [
        (name, f"required attribute is {what}; read as not given")
    ]
    assert "--strict" in warnings[0].hint
    assert meta.not_given() == [name]
    assert name not in meta.to_dict()


def test_missing_descriptive_attributes_are_warnings_too():
    raw = {"identifier": "demo", "hasPart": ["demo.jsonl"]}
    meta, errors, warnings = parse(raw)
    assert not errors
    assert sorted(w.field for w in warnings) == sorted(DESCRIPTIVE)
    assert all("missing" in w.message for w in warnings)
    assert sorted(meta.not_given()) == sorted(DESCRIPTIVE)


def test_empty_optional_attributes_are_absent():
    meta, errors, warnings = parse({**BASE, "title": "", "contributor": None, "version": "1.0"})
    assert not errors and meta.title is None and meta.contributor is None
    assert [(w.field, w.message) for w in warnings] == [("title", "empty; read as not given")]


def test_bad_values():
    _, errors, _ = parse(
        {**BASE, "created": "19/05/2025", "identifier": "has space", "license": 5.0, "subject": [3]}
    )
    fields = {e.field: e.message for e in errors}
    assert "YYYY-MM-DD" in fields["created"]
    assert "web-friendly" in fields["identifier"]
    assert set(fields) == {"created", "identifier"}  # numbers read as text, with warnings


def test_wrong_types_are_errors():
    _, errors, _ = parse({**BASE, "license": {"spdx": "x"}, "subject": [["nested"]]})
    assert {e.field for e in errors} == {"license", "subject[0]"}


def test_task_prompt_precedence():
    meta, _, _ = parse({**BASE, "taskPrompt": "Dataset level."})
    own = Item(identifier="a", modality="boolean", prompt="p", response="True", taskPrompt="Own.")
    none = Item(identifier="b", modality="boolean", prompt="p", response="True")
    assert meta.task_prompt_for(own) == "Own."
    assert meta.task_prompt_for(none) == "Dataset level."


def test_inline_items_and_no_parts():
    meta, errors, _ = parse(
        {
            **BASE,
            "hasPart": None,
            "items": [{"identifier": "i1", "modality": "boolean", "prompt": "p", "response": True}],
        }
    )
    assert not errors
    assert meta.has_part == [] and meta.items[0].response == "True"


def test_strict_construction_and_part_names():
    DatasetMeta(**BASE)
    with pytest.raises(ValidationError, match="YYYY-MM-DD"):
        DatasetMeta(**{**BASE, "created": "2025-13-01"})
    assert part_names("demo", 1) == ["demo.jsonl"]
    assert part_names("demo", 3) == ["demo_000.jsonl", "demo_001.jsonl", "demo_002.jsonl"]
