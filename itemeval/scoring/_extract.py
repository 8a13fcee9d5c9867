"""Answer extraction: the part of a model's text that a verifiable scorer compares.

First the answer span: the text after the last `ANSWER:` line when there is one (chain-of-thought
prompts ask for it), otherwise the whole text. Then a modality-specific reading of that span: a
choice letter, True/False (also yes/no), I don't know, the last number, or the span itself.
"""

from __future__ import annotations

import re

from itemeval.templates import LETTERS, answer_kind

_ANSWER_LINE = re.compile(r"(?im)^[ \t*_#>-]*(?:final\s+)?answer\s*[:：]\s*(.+?)\s*$")
_NUMBER = re.compile(r"[-+]?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_TRIM = " \t\r\n\"'`*_.。,;:!()[]{}"
_UNKNOWN = re.compile(r"\b(?:i\s+don'?t\s+know|i\s+do\s+not\s+know|unknown|not\s+sure|unsure)\b")
_BOOL = re.compile(r"\b(true|false|yes|no)\b")
# after the pronoun "I": a word on the same line, or an apostrophe ("I'm", "I’d")
_PRONOUN_AFTER = re.compile(r"[ \t]+[A-Za-z]|['\u2019]")


def answer_span(text: str) -> str:
    """The text after the last `ANSWER:` line, or the whole text, trimmed."""
    matches = _ANSWER_LINE.findall(text or "")
    span = matches[-1] if matches else (text or "")
    return span.strip().strip(_TRIM).strip()


def extract_choice(span: str, count: int, *, pronoun_i: bool = True) -> str | None:
    """The letter among the first `count` that `span` answers, or None. With nine choices or
    more the letters include "I": `pronoun_i` reads "I think ..." as the pronoun, never as the
    choice (off only where `multiple_choice` reads a non-choice item, whose grades predate it)."""
    letters = LETTERS[:count]
    stripped = span.strip().strip(_TRIM)
    if len(stripped) == 1 and stripped.upper() in letters:
        return stripped.upper()
    skip_i = pronoun_i and "I" in letters
    # "B) Paris", "The answer is (C)", "Option D": case-insensitive, anchored on a cue
    for pattern in (
        rf"^\(?([{letters}])\)?[.):]?(?:\s|$)",
        rf"\b(?:answer|option|choice)\s*(?:is)?\s*:?\s*\(?([{letters}])\)?(?:\W|$)",
        rf"\(([{letters}])\)",
    ):
        for match in re.finditer(pattern, stripped, flags=re.IGNORECASE):
            if not (skip_i and _is_pronoun(stripped, match)):
                return match.group(1).upper()
    # A lone capital letter, never the article "a" (lower case) in prose
    for match in re.finditer(rf"\b([{letters}])\b(?![''])", stripped):
        if not (skip_i and _is_pronoun(stripped, match)):
            return match.group(1)
    return None


def choice_count(modality: str | None) -> int:
    """N of `choiceofN` (the answer kind is "choice")."""
    return int((modality or "").removeprefix("choiceof"))


def _is_pronoun(text: str, match: re.Match[str]) -> bool:
    """Is the letter matched the word "I" ("I think", "I'd say"), not a choice ("I.", "(I)")?"""
    start, end = match.span(1)
    if text[start].upper() != "I" or (start and text[start - 1] == "("):
        return False
    return _PRONOUN_AFTER.match(text, end) is not None


def extract_boolean(span: str, *, ternary: bool = False) -> str | None:
    lowered = span.lower()
    if ternary and _UNKNOWN.search(lowered):
        return "I don't know"
    match = _BOOL.search(lowered)
    if not match:
        return None
    return "True" if match.group(1) in ("true", "yes") else "False"


def extract_number(span: str) -> str | None:
    numbers = _NUMBER.findall(span)
    if not numbers:
        return None
    return normalise_number(numbers[-1])


def normalise_number(text: str) -> str | None:
    """`1,450,000` -> `1450000`, `$18.00` -> `18`, `-3.50` -> `-3.5`; None if not a number."""
    cleaned = text.strip().replace(",", "").replace("$", "").rstrip("%").strip()
    try:
        value = float(cleaned)
    except ValueError:
        return None
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def extract_answer(text: str, modality: str | None, target: str | None) -> str | None:
    """The answer a verifiable scorer compares, or None when the text holds none."""
    span = answer_span(text)
    kind = answer_kind(modality, target)
    if kind == "choice":
        return extract_choice(span, choice_count(modality))
    if kind in ("boolean", "ternary"):
        return extract_boolean(span, ternary=kind == "ternary")
    if kind == "number":
        return extract_number(span)
    return span or None
