"""Verifiable scorers: pure functions of (model text, item) with no model call and no cost.

* `exact_match`: the normalised answer span equals the normalised target.
* `multiple_choice`: the extracted label (a letter, True/False, I don't know) equals the target.
* `numeric`: the last number in the answer span equals the numeric target (1e-6 relative).
* `token_f1`: SQuAD-style token F1 between answer span and target; the score is the F1 and the
  answer counts as correct when F1 >= 0.5.
* `auto`: by modality: closed sets use `multiple_choice`, numeric targets `numeric`,
  `single-value` and `cloze` `exact_match`, prose `token_f1`.

Normalisation (SQuAD's): lower case, drop punctuation and the articles a/an/the, collapse spaces.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from itemeval.scoring._extract import (
    answer_span,
    choice_count,
    extract_answer,
    extract_boolean,
    extract_choice,
    extract_number,
    normalise_number,
)
from itemeval.templates import answer_kind

#: Bump when a scorer's behaviour changes: it is part of the verifiable condition ids.
SCORER_VERSION = 1

_PUNCT = str.maketrans("", "", string.punctuation + "‘’“”")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


@dataclass(frozen=True, slots=True)
class Score:
    score: float
    correct: bool
    extracted: str | None


def normalise_text(text: str) -> str:
    text = (text or "").lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(text: str, target: str, modality: str | None = None) -> Score:
    extracted = answer_span(text)
    ok = bool(target) and normalise_text(extracted) == normalise_text(target)
    return Score(float(ok), ok, extracted or None)


def multiple_choice(text: str, target: str, modality: str | None = None) -> Score:
    span = answer_span(text)
    kind = answer_kind(modality, target)
    if kind in ("boolean", "ternary"):
        extracted = extract_boolean(span, ternary=kind == "ternary")
        wanted = extract_boolean(target, ternary=kind == "ternary") or target
    elif kind == "choice":
        extracted = extract_choice(span, choice_count(modality))
        wanted = target.strip().upper()
    else:  # an item of another modality with a letter for a target: A to J, as always
        extracted = extract_choice(span, 10, pronoun_i=False)
        wanted = target.strip().upper()
    ok = extracted is not None and extracted == wanted
    return Score(float(ok), ok, extracted)


def numeric(text: str, target: str, modality: str | None = None) -> Score:
    extracted = extract_number(answer_span(text))
    wanted = normalise_number(target)
    if extracted is None or wanted is None:
        return Score(0.0, False, extracted)
    a, b = float(extracted), float(wanted)
    ok = math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return Score(float(ok), ok, extracted)


def token_f1(text: str, target: str, modality: str | None = None) -> Score:
    extracted = answer_span(text)
    predicted = normalise_text(extracted).split()
    reference = normalise_text(target).split()
    if not predicted or not reference:
        ok = predicted == reference and bool(reference)
        return Score(float(ok), ok, extracted or None)
    common = sum((Counter(predicted) & Counter(reference)).values())
    if common == 0:
        return Score(0.0, False, extracted)
    precision, recall = common / len(predicted), common / len(reference)
    f1 = 2 * precision * recall / (precision + recall)
    return Score(f1, f1 >= 0.5, extracted)


def auto(text: str, target: str, modality: str | None = None) -> Score:
    return SCORERS[auto_scorer_for(modality, target)](text, target, modality)


def auto_scorer_for(modality: str | None, target: str | None) -> str:
    """The scorer `auto` uses for an item of this modality and target."""
    kind = answer_kind(modality, target)
    if kind in ("choice", "boolean", "ternary"):
        return "multiple_choice"
    if kind == "number":
        return "numeric"
    if kind in ("short", "long"):
        return "token_f1"
    return "exact_match"


Scorer = Callable[[str, str, "str | None"], Score]

SCORERS: dict[str, Scorer] = {
    "exact_match": exact_match,
    "multiple_choice": multiple_choice,
    "numeric": numeric,
    "token_f1": token_f1,
    "auto": auto,
}


__all__ = ["SCORERS", "SCORER_VERSION", "Score", "auto_scorer_for", "extract_answer"]
