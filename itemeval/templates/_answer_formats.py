"""What an answer should look like, by modality: the default instructions prompts append.

`answer_instructions` is the sentence a direct prompt ends with ("Answer with the letter ...");
`answer_format` is the noun phrase a chain-of-thought prompt uses after "ANSWER: <answer>, where
<answer> is ...". Both follow the item's modality, and numeric targets ask for a number.

The texts are part of every prompt condition's content hash (`ANSWER_TEXTS_HASH`): changing a
sentence here changes the ids of the conditions that use it, as editing a prompt file does.
"""

from __future__ import annotations

import functools
import re

from itemeval.datasets.format import CHOICE_LETTERS
from itemeval.ids import content_hash

_NUMBER = re.compile(r"^[-+]?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?$")

#: The letters of `choiceofN` answers (the first N of A-Z).
LETTERS = CHOICE_LETTERS


def is_numeric_target(target: str | None) -> bool:
    """True for targets such as `18`, `-3`, `1,450,000`, `2.5`, `$4`, `12%`."""
    return bool(target and _NUMBER.match(target.strip()))


def choice_letters(modality: str | None) -> str:
    """`A, B, C` for `choiceof3` (every letter, up to `A, B, ..., Z` for `choiceof26`); empty
    for other modalities."""
    if modality and modality.startswith("choiceof"):
        count = int(modality.removeprefix("choiceof"))
        return ", ".join(LETTERS[:count])
    return ""


def answer_kind(modality: str | None, target: str | None) -> str:
    """The answer shape: `choice`, `boolean`, `ternary`, `number`, `cloze`, `word`,
    `short`, `long` or `free`."""
    kind = _kind_by_modality(modality)
    if kind is not None:
        return kind
    if is_numeric_target(target) and modality in (None, "single-value", "short-prose"):
        return "number"
    return {"single-value": "word", "short-prose": "short", "long-prose": "long"}.get(
        modality or "", "free"
    )


def _kind_by_modality(modality: str | None) -> str | None:
    """The answer shape when the modality alone decides it (the target is not read)."""
    if modality and modality.startswith("choiceof"):
        return "choice"
    if modality in ("boolean", "ternary", "cloze"):
        return modality
    return None


_INSTRUCTIONS = {
    "choice": "Answer with the letter of the correct choice only (one of {letters}).",
    "boolean": "Answer with True or False only.",
    "ternary": "Answer with True, False, or I don't know only.",
    "number": "Answer with the final number only.",
    "cloze": "Answer with only the words that fill the blank (___).",
    "word": "Answer with a single word or value only.",
    "short": "Answer in a few words.",
    "long": "Answer in full sentences.",
    "free": "",
}

_FORMATS = {
    "choice": "the letter of the correct choice (one of {letters})",
    "boolean": "True or False",
    "ternary": "True, False, or I don't know",
    "number": "the final number only",
    "cloze": "the words that fill the blank",
    "word": "a single word or value",
    "short": "a short phrase",
    "long": "your answer in one or two sentences",
    "free": "your answer",
}

ANSWER_TEXTS_HASH = content_hash({"instructions": _INSTRUCTIONS, "formats": _FORMATS})


def answer_texts(modality: str | None, target: str | None) -> tuple[str, str, str]:
    """`(answer_instructions, answer_format, choice_letters)` of an item: what a prompt renders
    per item, found once per modality (and whether the target is a number)."""
    numeric = _kind_by_modality(modality) is None and is_numeric_target(target)
    return _answer_texts(modality, numeric)


@functools.lru_cache(maxsize=64)
def _answer_texts(modality: str | None, numeric: bool) -> tuple[str, str, str]:
    kind = answer_kind(modality, "1" if numeric else None)
    letters = choice_letters(modality)
    instructions = _INSTRUCTIONS[kind].format(letters=letters)
    return instructions, _FORMATS[kind].format(letters=letters), letters
