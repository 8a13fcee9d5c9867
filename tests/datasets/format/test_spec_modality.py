import pytest

from itemeval.datasets.format import Modality


def test_values_are_the_spec_spellings():
    assert [m.value for m in Modality] == [
        "boolean",
        "choiceof2",
        "choiceof3",
        "choiceof4",
        "choiceof5",
        "ternary",
        "cloze",
        "single-value",
        "short-prose",
        "long-prose",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("boolean", Modality.BOOLEAN),
        ("Boolean", Modality.BOOLEAN),
        ("CHOICEOF3", Modality.CHOICEOF3),
        ("short-prose", Modality.SHORT_PROSE),
        ("shortprose", Modality.SHORT_PROSE),
        ("ShortProse", Modality.SHORT_PROSE),
        ("singlevalue", Modality.SINGLE_VALUE),
        ("longprose", Modality.LONG_PROSE),
        (" cloze ", Modality.CLOZE),
    ],
)
def test_parse_accepts_spec_spellings_and_aliases(text, expected):
    assert Modality.parse(text) is expected


def test_parse_rejects_unknown_with_the_valid_list():
    with pytest.raises(ValueError) as info:
        Modality.parse("multiple-choice")
    message = str(info.value)
    assert "'multiple-choice'" in message
    assert "boolean" in message and "long-prose" in message
    assert "choiceof2 .. choiceof5" in message


def test_properties():
    assert Modality.CHOICEOF3.n_choices == 3
    assert Modality.CHOICEOF3.labels == ("A", "B", "C")
    assert Modality.CHOICEOF5.labels == ("A", "B", "C", "D", "E")
    assert Modality.BOOLEAN.labels == ("True", "False")
    assert Modality.TERNARY.labels == ("True", "False", "I don't know")
    assert Modality.BOOLEAN.n_choices is None
    assert Modality.CLOZE.labels is None
    assert Modality.TERNARY.is_closed and not Modality.SINGLE_VALUE.is_closed
    assert Modality.SHORT_PROSE.is_prose and Modality.LONG_PROSE.is_prose
    assert not Modality.CLOZE.is_prose


def test_for_choices():
    assert Modality.for_choices(2) is Modality.CHOICEOF2
    with pytest.raises(ValueError, match="2 to 5"):
        Modality.for_choices(6)
