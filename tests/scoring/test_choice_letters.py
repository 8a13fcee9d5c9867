"""Choice letters up to Z: `multiple_choice` (and `auto`) read the letter of `choiceofN` for N up
to 26 in the usual answer forms, read "I think ..." as the pronoun once "I" is a choice, and
grade every answer of `choiceof2` .. `choiceof8` (and of a non-choice item) exactly as before, so
`SCORER_VERSION` and the grade condition ids stay."""

from __future__ import annotations

import re
import string

import pytest

from itemeval.scoring import extract_answer, score
from itemeval.scoring._extract import extract_choice

LETTERS = string.ascii_uppercase


@pytest.mark.parametrize(
    ("text", "target", "modality"),
    [
        ("J", "J", "choiceof10"),
        ("j", "J", "choiceof10"),
        ("(J)", "J", "choiceof10"),
        ("J) Paris", "J", "choiceof10"),
        ("J. Paris", "J", "choiceof10"),
        ("The answer is (j).", "J", "choiceof10"),
        ("Option H", "H", "choiceof10"),
        ("Answer: G", "G", "choiceof10"),
        ("Let me think.\nThe last option fits.\n\nANSWER: J", "J", "choiceof10"),
        ("It is a hard one, but F.", "F", "choiceof10"),
        ("Z", "Z", "choiceof26"),
        ("The answer is (Z).", "Z", "choiceof26"),
        ("Reasoning first.\nANSWER: Q", "Q", "choiceof26"),
        ("K) the eleventh option", "K", "choiceof11"),
        ("Y", "Y", "choiceof25"),
    ],
)
def test_letters_beyond_e_in_the_usual_answer_forms(text, target, modality):
    for scorer in ("multiple_choice", "auto"):
        result = score(scorer, text, target, modality)
        assert result.correct and result.extracted == target, (scorer, result)


@pytest.mark.parametrize(
    ("text", "modality"),
    [("K", "choiceof10"), ("ANSWER: K", "choiceof10"), ("The answer is (F)", "choiceof5")],
)
def test_a_letter_beyond_the_items_choices_is_no_answer(text, modality):
    result = score("multiple_choice", text, "A", modality)
    assert not result.correct and result.extracted is None


@pytest.mark.parametrize(
    ("text", "extracted"),
    [
        ("I think the answer is C.", "C"),
        ("I'd go with (G).", "G"),
        ("I’m fairly sure: B", "B"),
        ("i believe it is D", "D"),
        ("I would say J", "J"),
        ("I", "I"),
        ("I.", "I"),
        ("I) the ninth option", "I"),
        ("(I)", "I"),
        ("The answer is I.", "I"),
        ("Option I", "I"),
        ("Reasoning.\nANSWER: I", "I"),
        ("I think none fits.", None),
    ],
)
def test_the_pronoun_i_is_not_choice_i(text, extracted):
    assert extract_answer(text, "choiceof10", "C") == extracted


def _extract_choice_as_in_scorer_version_1(span: str, count: int) -> str | None:
    """`extract_choice` before choices beyond five, verbatim (letters A-J): the oracle."""
    letters = "ABCDEFGHIJ"[:count]
    trim = " \t\r\n\"'`*_.。,;:!()[]{}"
    stripped = span.strip().strip(trim)
    if len(stripped) == 1 and stripped.upper() in letters:
        return stripped.upper()
    for pattern in (
        rf"^\(?([{letters}])\)?[.):]?(?:\s|$)",
        rf"\b(?:answer|option|choice)\s*(?:is)?\s*:?\s*\(?([{letters}])\)?(?:\W|$)",
        rf"\(([{letters}])\)",
    ):
        match = re.search(pattern, stripped, flags=re.IGNORECASE)
        if match:
            return match.group(1).upper()
    match = re.search(rf"\b([{letters}])\b(?![''])", stripped)
    return match.group(1) if match else None


ANSWERS = [
    "B",
    "b",
    "A good answer is C",
    "I think the answer is C.",
    "I'd say D",
    "i believe (e)",
    "The answer is (c).",
    "Option D",
    "A) Paris",
    "(B)",
    "It is a hard one, but B.",
    "None of them.",
    "I",
    "I.",
    "H or maybe G",
    "The choice: F",
    "My answer is J, I think",
    "",
    "a cat sat on B",
    "answer is",
]


@pytest.mark.parametrize("count", range(2, 11))
def test_grades_of_choices_without_i_and_of_other_items_are_unchanged(count):
    for text in ANSWERS:
        span = text.strip()
        old = _extract_choice_as_in_scorer_version_1(span, count)
        if count <= 8:  # choiceof2 .. choiceof8: the letters hold no "I"
            assert extract_choice(span, count) == old, text
        # a non-choice item with a letter target is read with A-J, as before
        assert extract_choice(span, count, pronoun_i=False) == old, text
    for text in ANSWERS:
        ours = score("multiple_choice", text, "C", "short-prose")
        assert ours.extracted == _extract_choice_as_in_scorer_version_1(text.strip(), 10), text


def test_extraction_covers_every_count_from_2_to_26():
    for count in range(2, 27):
        modality = f"choiceof{count}"
        last = LETTERS[count - 1]
        assert extract_answer(f"ANSWER: {last}", modality, last) == last
        assert extract_answer(f"The answer is ({last})", modality, last) == last
        if count < 26:
            beyond = LETTERS[count]
            assert extract_answer(f"({beyond})", modality, "A") is None
