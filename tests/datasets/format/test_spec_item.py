import pytest
from pydantic import ValidationError

from itemeval.datasets.format import Item, Modality, Where, parse_item

WHERE = Where(file="data.jsonl", line=7)


def parse(raw):
    item, problems = parse_item(raw, WHERE)
    errors = [p for p in problems if p.severity == "error"]
    warnings = [p for p in problems if p.severity == "warning"]
    return item, errors, warnings


def test_a_clean_item_parses_without_findings():
    raw = {
        "identifier": "geo.1",
        "modality": "short-prose",
        "prompt": "Capital of Peru?",
        "response": "Lima",
        "difficulty": 0.2,
        "support": ["atlas p. 3"],
        "taskPrompt": "Answer briefly.",
    }
    item, errors, warnings = parse(raw)
    assert not errors and not warnings
    assert item.identifier == "geo.1" and item.modality is Modality.SHORT_PROSE
    assert item.difficulty == 0.2 and item.support == ["atlas p. 3"]
    assert item.task_prompt == "Answer briefly."
    assert item.to_dict() == raw
    assert item == Item(**{**raw, "taskPrompt": "Answer briefly."})


def test_attribute_names_are_case_insensitive_and_spellings_survive():
    raw = {
        "Identifier": "q1",
        "MODALITY": "boolean",
        "Prompt": "Sky blue?",
        "response": "True",
        "TaskPrompt": "Say True or False.",
        "Extra Note": {"k": [1, "ü"]},
    }
    item, errors, warnings = parse(raw)
    assert not errors and not warnings
    assert item.prompt == "Sky blue?" and item.task_prompt == "Say True or False."
    assert item.extras == {"Extra Note": {"k": [1, "ü"]}}
    assert item.to_dict() == raw
    assert list(item.to_dict()) == list(raw)


@pytest.mark.parametrize(
    ("modality", "response", "expected", "warned"),
    [
        # JSON booleans are how booleans are written (itemeval, the reference reader, the
        # published data): accepted without a warning
        ("boolean", True, "True", False),
        ("boolean", False, "False", False),
        ("boolean", "true", "True", True),
        ("boolean", " FALSE ", "False", True),
        ("boolean", "True", "True", False),
        ("choiceof4", "a", "A", True),
        ("choiceof4", "D", "D", False),
        ("ternary", "i don't know", "I don't know", True),
        ("ternary", "I don\u2019t know", "I don't know", True),
        ("ternary", True, "True", False),
        ("ternary", False, "False", False),
        ("ternary", "Unknown", "I don't know", True),  # the reference reader's spelling
        ("short-prose", True, "True", True),  # a boolean where text is expected
        ("single-value", 42, "42", True),
        ("single-value", 2.5, "2.5", True),
        ("long-prose", "A long answer.", "A long answer.", False),
    ],
)
def test_unambiguous_responses_are_accepted(modality, response, expected, warned):
    item, errors, warnings = parse(
        {"identifier": "x", "modality": modality, "prompt": "p ___", "response": response}
    )
    assert not errors
    assert item.response == expected
    assert bool(warnings) == warned
    if warned:
        assert warnings[0].field == "response" and warnings[0].line == 7


def test_modality_aliases_are_written_in_the_spec_spelling():
    item, errors, warnings = parse(
        {"identifier": "x", "modality": "shortprose", "prompt": "p", "response": "r"}
    )
    assert not errors and item.modality is Modality.SHORT_PROSE
    assert warnings[0].field == "modality" and "reference reader" in warnings[0].message
    assert item.to_dict()["modality"] == "short-prose"


def test_the_reference_readers_otherargs_are_ad_hoc_attributes():
    item, errors, warnings = parse(
        {
            "identifier": "mc",
            "modality": "choiceof2",
            "prompt": "Pick\nA. x\nB. y",
            "response": "B",
            "otherargs": {"choices": ["x", "y"], "topic": "t"},
            "note": 1,
        }
    )
    assert not errors and not warnings
    assert item.extras == {"note": 1, "choices": ["x", "y"], "topic": "t"}


def test_otherargs_that_repeat_an_attribute_are_rejected():
    _, errors, _ = parse(
        {
            "identifier": "x",
            "modality": "boolean",
            "prompt": "p",
            "response": True,
            "note": 1,
            "otherargs": {"note": 2, "Prompt": "q"},
        }
    )
    assert [e.field for e in errors] == ["otherargs"]
    assert "'note', 'Prompt'" in errors[0].message and errors[0].item == "x"


def test_empty_task_prompt_is_absent_with_a_warning():
    item, errors, warnings = parse(
        {
            "identifier": "x",
            "modality": "boolean",
            "prompt": "p",
            "response": "True",
            "taskPrompt": "  ",
        }
    )
    assert not errors and item.task_prompt is None
    assert [w.field for w in warnings] == ["taskPrompt"]
    assert "taskPrompt" not in item.to_dict()


def test_number_identifier_and_prompt_are_read_as_text():
    item, errors, warnings = parse(
        {"identifier": 17, "modality": "single-value", "prompt": 3, "response": "3"}
    )
    assert not errors
    assert item.identifier == "17" and item.prompt == "3"
    assert {w.field for w in warnings} == {"identifier", "prompt"}


def test_a_huge_or_unbounded_difficulty_is_an_error_not_a_crash():
    for value in (10**400, -(10**400), float("inf"), float("nan"), 2):
        raw = {"identifier": "x", "modality": "boolean", "prompt": "p", "response": "True"}
        item, errors, _ = parse({**raw, "difficulty": value})
        assert item is None and [e.field for e in errors] == ["difficulty"], value


def test_an_identifier_with_a_line_break_at_its_end_is_rejected():
    # `$` matches before a final newline: the identifier pattern must end at the string's end
    raw = {"modality": "boolean", "prompt": "p", "response": "True"}
    for identifier in ("x.1\n", "x.1\r\n", "x.1\nmore"):
        item, errors, _ = parse({**raw, "identifier": identifier})
        assert item is None and [e.field for e in errors] == ["identifier"], identifier
    with pytest.raises(ValidationError):
        Item(identifier="x.1\n", modality="boolean", prompt="p", response="True")


def test_difficulty_as_numeric_text_is_read_with_a_warning():
    item, errors, warnings = parse(
        {
            "identifier": "x",
            "modality": "boolean",
            "prompt": "p",
            "response": "True",
            "difficulty": "0.25",
        }
    )
    assert not errors and item.difficulty == 0.25 and warnings[0].field == "difficulty"


def test_empty_prose_response_is_a_warning_but_empty_single_value_is_an_error():
    _, errors, warnings = parse(
        {"identifier": "x", "modality": "short-prose", "prompt": "p", "response": ""}
    )
    assert not errors and warnings[0].field == "response"
    _, errors, _ = parse(
        {"identifier": "x", "modality": "single-value", "prompt": "p", "response": ""}
    )
    assert errors[0].field == "response"


def test_every_error_is_reported_at_once_and_names_the_item():
    item, errors, _ = parse(
        {
            "identifier": "bad.1",
            "modality": "choiceof3",
            "prompt": None,
            "response": "D",
            "difficulty": 1.5,
        }
    )
    assert item is None
    assert {e.field for e in errors} == {"prompt", "response", "difficulty"}
    assert all(e.item == "bad.1" and e.file == "data.jsonl" and e.line == 7 for e in errors)


def test_names_differing_only_in_case_are_ambiguous():
    item, errors, _ = parse(
        {"identifier": "x", "prompt": "a", "Prompt": "b", "modality": "boolean", "response": "True"}
    )
    assert item is None
    assert errors[0].field == "prompt" and "'prompt' and 'Prompt'" in errors[0].message


def test_strict_construction_in_code():
    Item(identifier="ok-1_.~", modality=Modality.CHOICEOF2, prompt="p", response="B")
    with pytest.raises(ValidationError, match="outside choiceof2"):
        Item(identifier="x", modality="choiceof2", prompt="p", response="C")
    with pytest.raises(ValidationError, match="letters, digits"):
        Item(identifier="a/b", modality="boolean", prompt="p", response="True")
    with pytest.raises(ValidationError, match="___"):
        Item(identifier="x", modality="cloze", prompt="no blank", response="y")
    with pytest.raises(ValidationError):
        Item(identifier="x", modality="boolean", prompt="p", response="True", difficulty=1.01)
    with pytest.raises(ValidationError):
        Item(identifier="x", modality="boolean", prompt="p", response="true")


def test_parsed_items_equal_validated_ones():
    """The fast path of `parse_item` builds the same object pydantic validation builds."""
    raw = {
        "identifier": "x",
        "modality": "cloze",
        "prompt": "2 + ___ = 4",
        "response": "2",
        "difficulty": 0.5,
        "support": "arithmetic",
        "Note": 1,
    }
    parsed, _, _ = parse(raw)
    built = Item(
        identifier="x",
        modality="cloze",
        prompt="2 + ___ = 4",
        response="2",
        difficulty=0.5,
        support="arithmetic",
        extras={"Note": 1},
    )
    assert parsed == built
    assert parsed.model_dump() == built.model_dump()
    assert parsed.model_fields_set == built.model_fields_set
    assert parsed.model_copy(update={"prompt": "1 + ___ = 2"}).to_dict()["prompt"] == "1 + ___ = 2"
    assert parsed.key == "x"


def _variants():
    """Items as real files hold them: a canonical one per modality, then each attribute changed
    to something the lenient reader warns about, rejects, or takes as it is."""
    base = {
        "boolean": "True",
        "choiceof2": "B",
        "choiceof5": "E",
        "choiceof10": "J",
        "choiceof26": "Z",
        "ternary": "I don't know",
        "cloze": "4",
        "single-value": "42",
        "short-prose": "Lima",
        "long-prose": "An essay.",
    }
    changes = [
        {},
        {"identifier": "a b"},
        {"identifier": 7},
        {"identifier": ""},
        {"modality": "Boolean"},
        {"modality": "shortprose"},
        {"modality": ["boolean"]},
        {"modality": {"a": 1}},
        {"prompt": "   "},
        {"prompt": 3},
        {"prompt": "no blank here"},
        {"response": "b"},
        {"response": "j"},
        {"response": "K"},
        {"modality": "choiceof27"},
        {"modality": "choiceof1"},
        {"response": " True"},
        {"response": True},
        {"response": "unknown"},
        {"response": ""},
        {"response": 4},
        {"difficulty": 1},
        {"difficulty": 0},
        {"difficulty": True},
        {"difficulty": 1.5},
        {"difficulty": float("nan")},
        {"difficulty": "0.5"},
        {"difficulty": None},
        {"support": {"page": 3}},
        {"taskPrompt": "Answer briefly."},
        {"taskPrompt": " "},
        {"taskPrompt": 5},
        {"taskPrompt": None},
        {"Note": [1, 2]},
        {"IDENTIFIER": "twice"},
        {"otherargs": {"Note": 1}},
        {"otherargs": 3},
        {7: "a YAML key that is a number"},
        {None: "a YAML key that is null"},
    ]
    for modality, response in base.items():
        prompt = "2 + ___ = 4" if modality == "cloze" else "A question?"
        raw = {"identifier": "x.1", "modality": modality, "prompt": prompt, "response": response}
        for change in changes:
            yield {**raw, **change}
        renamed = {("Prompt" if k == "prompt" else k): v for k, v in raw.items()}
        yield renamed
        yield {k: v for k, v in raw.items() if k != "response"}


def test_the_canonical_path_reads_what_the_lenient_reader_reads():
    """`parse_item` takes a short path for items written as the spec writes them; for every
    other item it reads leniently. The short path must find what the lenient reader finds."""
    from itemeval.datasets.format._item import _parse_lenient, canonical_item

    taken = 0
    for raw in _variants():
        lenient, problems = _parse_lenient(raw, WHERE)
        fast = canonical_item(raw)
        if fast is not None:
            taken += 1
            assert not problems, raw
            assert lenient is not None
            assert fast == lenient and fast.to_dict() == lenient.to_dict(), raw
            assert type(fast.difficulty) is type(lenient.difficulty), raw
            assert fast.model_fields_set == lenient.model_fields_set, raw
            assert fast.__pydantic_private__ == lenient.__pydantic_private__, raw
        item, found = parse_item(raw, WHERE)
        assert found == problems, raw
        assert (item is None) == (lenient is None), raw
        if item is not None:
            assert item.to_dict() == lenient.to_dict(), raw
    # every canonical variant takes the short path: per modality, itself and seven changes it
    # stays canonical under (80); a prompt without a blank outside cloze (9); "b", "j", "K",
    # " True" and "unknown" as the response of the four open-set modalities (20); and "K" as
    # the response of choiceof26 (1)
    assert taken == 80 + 9 + 20 + 1
