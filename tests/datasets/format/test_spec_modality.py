import pytest

from itemeval.datasets.format import Modality


def test_values_are_the_spec_spellings_and_our_choices_up_to_26():
    assert [m.value for m in Modality] == [
        "boolean",
        *(f"choiceof{n}" for n in range(2, 27)),
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
    assert "choiceof2 .. choiceof26" in message


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
    assert Modality.for_choices(10) is Modality.CHOICEOF10
    assert Modality.for_choices(26) is Modality.CHOICEOF26
    for n in (0, 1, 27):
        with pytest.raises(ValueError, match=f"{n} choices; choiceofN takes N from 2 to 26"):
            Modality.for_choices(n)


def test_choices_beyond_five_are_our_extension():
    assert [m.value for m in Modality if m.is_extension] == [f"choiceof{n}" for n in range(6, 27)]
    assert Modality.CHOICEOF10.labels == tuple("ABCDEFGHIJ")
    assert Modality.CHOICEOF26.labels == tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    assert Modality.parse("ChoiceOf10") is Modality.CHOICEOF10


@pytest.mark.parametrize("text", ["choiceof1", "choiceof27", "choiceof0", "CHOICEOF100"])
def test_parse_refuses_choice_counts_outside_2_to_26(text):
    with pytest.raises(ValueError) as info:
        Modality.parse(text)
    message = str(info.value)
    assert repr(text) in message and "choiceofN takes N from 2 to 26" in message
    assert "A to Z" in message


def test_parse_suggests_the_spelling_of_a_padded_count():
    with pytest.raises(ValueError, match="did you mean 'choiceof4'"):
        Modality.parse("choiceof04")
