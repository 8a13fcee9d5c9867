"""The closed set of modality identifiers (item spec v3.3, appendix) and their allowed responses.

A modality says what kind of answer an item expects. Closed-set modalities (`boolean`,
`choiceof2`..`choiceof26`, `ternary`) allow only a few exact responses (`labels`); open-set ones
(`cloze`, `single-value`, `short-prose`, `long-prose`) allow any text.

The spec (and its reference reader, commoneval 0.2.1) stops at `choiceof5`; `choiceof6` ..
`choiceof26` (one letter A-Z per choice) are itemeval's extension of the format, for benchmarks
such as MMLU-Pro (10 options). `Modality.is_extension` tells them apart.
"""

from __future__ import annotations

import re
import string
from enum import StrEnum

#: The letters of choiceofN's responses: the first N.
CHOICE_LETTERS = LETTERS = string.ascii_uppercase
MIN_CHOICES = 2
MAX_CHOICES = len(LETTERS)
#: The spec's (and commoneval 0.2.1's) last choiceofN; beyond it is itemeval's extension.
SPEC_MAX_CHOICES = 5
BOOLEAN_LABELS = ("True", "False")
DONT_KNOW = "I don't know"
TERNARY_LABELS = ("True", "False", DONT_KNOW)

# Spellings seen in real files that mean one modality unambiguously (keys are casefolded).
_ALIASES = {
    "singlevalue": "single-value",
    "shortprose": "short-prose",
    "longprose": "long-prose",
}
# The reference reader's (commoneval 0.2.1) spellings, where they differ from the spec's.
READER_SPELLINGS = {
    "singlevalue": "single-value",
    "shortprose": "short-prose",
    "longprose": "long-prose",
}


class Modality(StrEnum):
    """A modality identifier; the values are the spec's spellings (what itemeval writes)."""

    BOOLEAN = "boolean"
    CHOICEOF2 = "choiceof2"
    CHOICEOF3 = "choiceof3"
    CHOICEOF4 = "choiceof4"
    CHOICEOF5 = "choiceof5"
    # itemeval's extension of the spec: up to one choice per letter A-Z
    CHOICEOF6 = "choiceof6"
    CHOICEOF7 = "choiceof7"
    CHOICEOF8 = "choiceof8"
    CHOICEOF9 = "choiceof9"
    CHOICEOF10 = "choiceof10"
    CHOICEOF11 = "choiceof11"
    CHOICEOF12 = "choiceof12"
    CHOICEOF13 = "choiceof13"
    CHOICEOF14 = "choiceof14"
    CHOICEOF15 = "choiceof15"
    CHOICEOF16 = "choiceof16"
    CHOICEOF17 = "choiceof17"
    CHOICEOF18 = "choiceof18"
    CHOICEOF19 = "choiceof19"
    CHOICEOF20 = "choiceof20"
    CHOICEOF21 = "choiceof21"
    CHOICEOF22 = "choiceof22"
    CHOICEOF23 = "choiceof23"
    CHOICEOF24 = "choiceof24"
    CHOICEOF25 = "choiceof25"
    CHOICEOF26 = "choiceof26"
    TERNARY = "ternary"
    CLOZE = "cloze"
    SINGLE_VALUE = "single-value"
    SHORT_PROSE = "short-prose"
    LONG_PROSE = "long-prose"

    @classmethod
    def parse(cls, text: str) -> Modality:
        """The modality `text` names: the spec spellings (any case) and `singlevalue`,
        `shortprose`, `longprose`. Raises `ValueError` listing the valid values otherwise."""
        if not isinstance(text, str):
            raise ValueError(f"expected a modality name, got {type(text).__name__}")
        key = text.strip().casefold()
        found = BY_VALUE.get(_ALIASES.get(key, key))
        if found is None:
            counted = _CHOICEOF.match(key)
            if counted:
                n = int(counted.group(1))
                if MIN_CHOICES <= n <= MAX_CHOICES:
                    raise ValueError(f"unknown modality {text!r}; did you mean 'choiceof{n}'?")
                raise ValueError(f"modality {text!r}: {CHOICE_RANGE}")
            hint = f" (for multiple choice use {CHOICE_SPAN})" if "choice" in key else ""
            raise ValueError(f"unknown modality {text!r}; expected one of {_LISTED}" + hint)
        return found

    @classmethod
    def for_choices(cls, n_choices: int) -> Modality:
        """`choiceofN` for 2 <= N <= 26."""
        if not MIN_CHOICES <= n_choices <= MAX_CHOICES:
            raise ValueError(f"{n_choices} choices; {CHOICE_RANGE}")
        return cls(f"choiceof{n_choices}")

    @property
    def n_choices(self) -> int | None:
        """N for `choiceofN`, else None."""
        if self.value.startswith("choiceof"):
            return int(self.value[len("choiceof") :])
        return None

    @property
    def is_extension(self) -> bool:
        """`choiceof6` .. `choiceof26`: itemeval's, not in the spec v3.3 nor commoneval 0.2.1."""
        return (self.n_choices or 0) > SPEC_MAX_CHOICES

    @property
    def labels(self) -> tuple[str, ...] | None:
        """The exact responses a closed-set modality allows; None for open-set modalities."""
        n = self.n_choices
        if n is not None:
            return tuple(LETTERS[:n])
        if self is Modality.BOOLEAN:
            return BOOLEAN_LABELS
        if self is Modality.TERNARY:
            return TERNARY_LABELS
        return None

    @property
    def is_closed(self) -> bool:
        return self.labels is not None

    @property
    def is_prose(self) -> bool:
        """Prose answers are usually graded by an LLM judge."""
        return self in (Modality.SHORT_PROSE, Modality.LONG_PROSE)


CHOICE_SPAN = f"choiceof{MIN_CHOICES} .. choiceof{MAX_CHOICES}"
CHOICE_RANGE = (
    f"choiceofN takes N from {MIN_CHOICES} to {MAX_CHOICES} (one letter per choice, A to "
    f"{LETTERS[MAX_CHOICES - 1]}); choiceof{SPEC_MAX_CHOICES + 1} and above are itemeval's "
    f"extension of the item spec"
)
# "choiceof27", "choiceof1", "choiceof 0": counted choices outside the range
_CHOICEOF = re.compile(r"^choice\s*of\s*(\d+)$")
# the valid values, the choice ones as one span (25 of them would drown the others)
_LISTED = ", ".join(
    m.value if m.n_choices is None else CHOICE_SPAN
    for m in Modality
    if m.n_choices in (None, MIN_CHOICES)
)

# Dict lookups for what runs once per item read: a modality by its spec spelling (`parse`, and
# `spec.item.canonical_item`), and each modality's labels (the property builds them per read).
BY_VALUE = {m.value: m for m in Modality}
LABELS = {m: m.labels for m in Modality}
