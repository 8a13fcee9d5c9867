"""The closed set of modality identifiers (item spec v3.3, appendix) and their allowed responses.

A modality says what kind of answer an item expects. Closed-set modalities (`boolean`,
`choiceof2`..`choiceof5`, `ternary`) allow only a few exact responses (`labels`); open-set ones
(`cloze`, `single-value`, `short-prose`, `long-prose`) allow any text.
"""

from __future__ import annotations

from enum import StrEnum

LETTERS = "ABCDE"
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
            hint = " (for multiple choice use choiceof2 .. choiceof5)" if "choice" in key else ""
            raise ValueError(
                f"unknown modality {text!r}; expected one of {', '.join(m.value for m in cls)}"
                + hint
            )
        return found

    @classmethod
    def for_choices(cls, n_choices: int) -> Modality:
        """`choiceofN` for 2 <= N <= 5."""
        if not 2 <= n_choices <= len(LETTERS):
            raise ValueError(
                f"{n_choices} choices; the spec's choiceofN modalities allow 2 to {len(LETTERS)}"
            )
        return cls(f"choiceof{n_choices}")

    @property
    def n_choices(self) -> int | None:
        """N for `choiceofN`, else None."""
        if self.value.startswith("choiceof"):
            return int(self.value[len("choiceof") :])
        return None

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


# Dict lookups for what runs once per item read: a modality by its spec spelling (`parse`, and
# `spec.item.canonical_item`), and each modality's labels (the property builds them per read).
BY_VALUE = {m.value: m for m in Modality}
LABELS = {m: m.labels for m in Modality}
