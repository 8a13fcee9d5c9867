"""Bad dataset directories: every rejection names the file, the line or item, the attribute and
what was expected, and `itemeval validate` lists all problems at once."""

from __future__ import annotations

import json

import pytest
from spec_files import item, jsonl

from itemeval.datasets.format import read_dataset
from itemeval.errors import DatasetError


def read_all(directory: str) -> None:
    for _ in read_dataset(directory).iter_batches(100):
        pass


# (case id, parts, meta overrides, expected substrings in the error text)
CASES = [
    (
        "duplicate-ids-differing-in-case",
        {"demo.jsonl": jsonl([item("Q1"), item("q2"), item("q1")])},
        {},
        [
            "demo.jsonl:3",
            "item 'q1'",
            "field 'identifier'",
            "duplicate identifier 'q1'",
            "demo.jsonl:1",
            "case-insensitively",
        ],
    ),
    (
        "duplicate-ids-in-a-json-list-part",
        {"demo.json": json.dumps([item("J1"), item("j1")])},
        {},
        ["demo.json", "item 'j1'", "field 'identifier'", "duplicate identifier 'j1'"],
    ),
    (
        "missing-haspart-file",
        {},
        {"hasPart": ["demo.jsonl"]},
        ["demo.yaml", "field 'hasPart'", "'demo.jsonl'", "no such file"],
    ),
    (
        "wrong-part-name-single",
        {"items.jsonl": jsonl([item("a")])},
        {},
        ["demo.yaml", "field 'hasPart'", "'items.jsonl'", "expects 'demo.jsonl'"],
    ),
    (
        "wrong-part-name-several",
        {"demo_000.jsonl": jsonl([item("a")]), "demo_2.jsonl": jsonl([item("b")])},
        {},
        [
            "demo.yaml",
            "field 'hasPart'",
            "part 2 of 2",
            "'demo_2.jsonl'",
            "expects 'demo_001.jsonl'",
        ],
    ),
    (
        "letter-outside-choiceof3",
        {"demo.jsonl": jsonl([item("mc1", modality="choiceof3", response="D")])},
        {},
        ["demo.jsonl:1", "item 'mc1'", "field 'response'", "outside choiceof3", '"A", "B", "C"'],
    ),
    (
        "difficulty-1.5",
        {"demo.jsonl": jsonl([item("a"), item("hard", difficulty=1.5)])},
        {},
        ["demo.jsonl:2", "item 'hard'", "field 'difficulty'", "between 0 and 1", "1.5"],
    ),
    (
        "null-in-required-attribute",
        {"demo.jsonl": jsonl([item("np", prompt=None)])},
        {},
        ["demo.jsonl:1", "item 'np'", "field 'prompt'", "required attribute is null"],
    ),
    (
        "missing-required-item-attribute",
        {"demo.jsonl": jsonl([{"identifier": "nr", "modality": "boolean", "prompt": "p"}])},
        {},
        ["demo.jsonl:1", "item 'nr'", "field 'response'", "required attribute is missing"],
    ),
    (
        "identifier-not-web-safe",
        {"demo.jsonl": jsonl([item("what is/this?")])},
        {},
        ["demo.jsonl:1", "field 'identifier'", "'what is/this?'", "letters, digits and - _ . ~"],
    ),
    (
        "unknown-modality",
        {"demo.jsonl": jsonl([item("um", modality="multiple-choice")])},
        {},
        [
            "demo.jsonl:1",
            "item 'um'",
            "field 'modality'",
            "unknown modality 'multiple-choice'",
            "choiceof2 .. choiceof26",
        ],
    ),
    (
        "choiceof1",
        {"demo.jsonl": jsonl([item("one", modality="choiceof1", response="A")])},
        {},
        ["demo.jsonl:1", "item 'one'", "field 'modality'", "'choiceof1'", "from 2 to 26"],
    ),
    (
        "choiceof27",
        {"demo.jsonl": jsonl([item("many", modality="choiceof27", response="A")])},
        {},
        ["demo.jsonl:1", "item 'many'", "field 'modality'", "'choiceof27'", "A to Z"],
    ),
    (
        "letter-outside-choiceof10",
        {"demo.jsonl": jsonl([item("mc10", modality="choiceof10", response="K")])},
        {},
        [
            "demo.jsonl:1",
            "item 'mc10'",
            "field 'response'",
            "'K' is outside choiceof10",
            '"A" to "J"',
        ],
    ),
    (
        "cloze-without-blank",
        {"demo.jsonl": jsonl([item("cz", modality="cloze", prompt="no blank here", response="x")])},
        {},
        ["demo.jsonl:1", "item 'cz'", "field 'prompt'", '"___"'],
    ),
    (
        "jsonl-line-not-json",
        {"demo.jsonl": jsonl([item("a")]) + '{"identifier": "b", oops}\n'},
        {},
        ["demo.jsonl:2", "not valid JSON", "column"],
    ),
    (
        "jsonl-line-not-an-object",
        {"demo.jsonl": jsonl([item("a"), ["identifier", "b"]])},
        {},
        ["demo.jsonl:2", "expected an item (a JSON object), found a list"],
    ),
    (
        "not-utf8-part",
        {"demo.jsonl": jsonl([item("a")]).encode() + b'{"identifier": "caf\xe9"}\n'},
        {},
        ["demo.jsonl:2", "not valid UTF-8", "0xe9", "save the file as UTF-8"],
    ),
    (
        "boolean-response-not-true-false",
        {"demo.jsonl": jsonl([item("yn", response="yes")])},
        {},
        ["demo.jsonl:1", "item 'yn'", "field 'response'", '"True", "False"', "'yes'"],
    ),
    (
        "missing-identifier",
        {"demo.jsonl": jsonl([item("a")])},
        {"identifier": None, "meta_name": "demo.yaml"},
        ["demo.yaml", "field 'identifier'", "required attribute is missing"],
    ),
    (
        "bad-created-date",
        {"demo.jsonl": jsonl([item("a")])},
        {"created": "May 2025"},
        ["demo.yaml", "field 'created'", "YYYY-MM-DD", "'May 2025'"],
    ),
    (
        "attribute-twice-in-different-case",
        {"demo.jsonl": jsonl([{**item("tw"), "Response": "False"}])},
        {},
        ["demo.jsonl:1", "item 'tw'", "field 'response'", "'response' and 'Response'"],
    ),
]


@pytest.mark.parametrize(
    ("parts", "meta", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_rejected_with_a_precise_message(tmp_path, write_raw, parts, meta, expected):
    directory = write_raw(str(tmp_path / "ds"), parts, **meta)
    with pytest.raises(DatasetError) as info:
        read_all(directory)
    text = str(info.value)
    for fragment in expected:
        assert fragment in text, f"{fragment!r} not in {text!r}"
    assert info.value.exit_code == 2


def test_invalid_yaml_names_the_line(tmp_path):
    (tmp_path / "demo.yaml").write_text("identifier: demo\ncreator: [unclosed\nlicense: x\n")
    with pytest.raises(DatasetError) as info:
        read_dataset(str(tmp_path))
    text = str(info.value)
    assert "demo.yaml:3" in text and "not valid YAML" in text


def test_yaml_that_is_not_a_mapping(tmp_path):
    (tmp_path / "demo.yaml").write_text("- just\n- a list\n")
    with pytest.raises(DatasetError, match="expected a YAML mapping of dataset attributes"):
        read_dataset(str(tmp_path))


def test_non_utf8_yaml(tmp_path):
    (tmp_path / "demo.yaml").write_bytes(b"identifier: demo\ncreator: Jos\xe9\n")
    with pytest.raises(DatasetError, match=r"demo.yaml:2.*not valid UTF-8"):
        read_dataset(str(tmp_path))


def test_yaml_name_must_match_identifier(tmp_path, write_raw):
    write_raw(str(tmp_path), {"demo.jsonl": jsonl([item("a")])}, meta_name="other.yaml")
    with pytest.raises(DatasetError) as info:
        read_dataset(str(tmp_path / "other.yaml"))
    assert "field 'identifier'" in str(info.value) and "demo.yaml" in str(info.value)


def test_no_dataset_here(tmp_path):
    with pytest.raises(DatasetError, match=r"no <id>\.yaml"):
        read_dataset(str(tmp_path))
    with pytest.raises(DatasetError, match="no such dataset directory"):
        read_dataset(str(tmp_path / "absent"))


def test_validate_lists_every_problem_and_warning(tmp_path, write_raw):
    records = [
        item("a", response=True),
        item("b", modality="choiceof2", response="c"),
        item("c", difficulty=-1),
        item("d", response="true"),
        item("A"),
    ]
    directory = write_raw(str(tmp_path), {"demo.jsonl": jsonl(records)}, taskPrompt="")
    report = read_dataset(directory).validate()
    assert not report.ok and report.items == 2  # a and d: every good item counts
    assert [(p.line, p.field) for p in report.log.errors] == [
        (2, "response"),
        (3, "difficulty"),
        (5, "identifier"),
    ]
    assert report.log.warning_count == 2  # "true", the empty taskPrompt (JSON true is fine)
    assert any("taskPrompt" in line for line in report.log.warning_lines())


def test_errors_are_capped(tmp_path, write_raw):
    records = [item(f"x{i}", response="maybe") for i in range(500)]
    directory = write_raw(str(tmp_path), {"demo.jsonl": jsonl(records)})
    with pytest.raises(DatasetError) as info:
        read_all(directory)
    assert len(info.value.problems) == 51  # 50 errors and the note that reading stopped
    assert "stopped reading after 50 errors" in str(info.value.problems[-1])
