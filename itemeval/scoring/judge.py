"""The judge-output contract: a strict parser with exact failure codes.

Judges are told to end with a fenced JSON block `{"score": <number>, "reasoning": "..."}`. The
parser looks at fenced code blocks from last to first, then at raw JSON objects in the text from
last to first, and takes the first candidate that is a JSON object with a `score` key. Failures are
results, not errors: the grade row keeps `parse_ok = false` and the code, and is final.

Three guards close what the seed leaves open (`../shared/design.md`, "Judge output"):
* a candidate that appears in the text being judged is never taken (compared without whitespace,
  and as a JSON object): the model under test cannot plant its own grade for a judge to quote;
* the score must lie in the rubric's range;
* a reply that stopped on its token limit without a valid block of its own is `truncated` (it
  may have been cut off before its verdict, after quoting something else).

Codes (a contract, stored in `parse_code`):
* `no_json_object`: no fenced block or brace-delimited span parses as a JSON object (of the
  judge's own);
* `no_score_in_json`: JSON objects were found but none has a `score` key;
* `score_not_numeric`: the chosen object's `score` is not a JSON number (strings, booleans, null);
* `score_not_finite`: the score is NaN or infinite;
* `score_out_of_range`: the score lies outside the rubric's `[min_score, max_score]`;
* `truncated`: the reply stopped on its token limit without a valid block of its own.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ParseCode(StrEnum):
    NO_JSON_OBJECT = "no_json_object"
    NO_SCORE_IN_JSON = "no_score_in_json"
    SCORE_NOT_NUMERIC = "score_not_numeric"
    SCORE_NOT_FINITE = "score_not_finite"
    SCORE_OUT_OF_RANGE = "score_out_of_range"
    TRUNCATED = "truncated"


#: Finish reasons that mean "stopped on the token limit" (normalised, and as the wires say it).
TOKEN_LIMIT_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS"})


@dataclass(frozen=True, slots=True)
class JudgeVerdict:
    ok: bool
    score: float | None = None
    reasoning: str | None = None
    code: ParseCode | None = None


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.DOTALL)
_WHITESPACE = re.compile(r"\s+")


def _fenced_blocks(text: str) -> list[str]:
    return [match.group(2) for match in _FENCE.finditer(text)]


def _raw_objects(text: str) -> list[str]:
    """Balanced `{...}` spans outside of strings, outermost only, in order of appearance."""
    spans: list[str] = []
    depth = 0
    start = -1
    in_string = False
    escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"' and depth > 0:
            in_string = True
        elif char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : index + 1])
    return spans


def _load_object(candidate: str) -> dict[str, Any] | None:
    try:
        value = json.loads(candidate.strip())
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _squeeze(text: str) -> str:
    return _WHITESPACE.sub("", text)


class _Planted:
    """What the judged text contains: its whitespace-free form and its JSON objects."""

    def __init__(self, judged: str):
        self.squeezed = _squeeze(judged)
        self.objects: list[dict[str, Any]] = []
        if judged:
            for span in [*_fenced_blocks(judged), *_raw_objects(judged)]:
                obj = _load_object(span)
                if obj is not None:
                    self.objects.append(obj)

    def contains(self, candidate: str, obj: dict[str, Any]) -> bool:
        squeezed = _squeeze(candidate)
        return bool(squeezed and squeezed in self.squeezed) or obj in self.objects


def parse_judge_output(
    text: str,
    *,
    judged: str = "",
    min_score: float | None = None,
    max_score: float | None = None,
    finish_reason: str | None = None,
) -> JudgeVerdict:
    """Parse a judge's reply under the strict contract (see the module docstring).

    `judged`: the text being judged (the candidate's answer); `min_score`/`max_score`: the
    rubric's range; `finish_reason`: why the judge's reply stopped."""
    verdict = _parse(text, _Planted(judged), min_score, max_score)
    if not verdict.ok and finish_reason in TOKEN_LIMIT_REASONS:
        return JudgeVerdict(ok=False, reasoning=verdict.reasoning, code=ParseCode.TRUNCATED)
    return verdict


def _parse(
    text: str, planted: _Planted, min_score: float | None, max_score: float | None
) -> JudgeVerdict:
    objects: list[dict[str, Any]] = []
    # Fenced blocks last to first, then raw objects (also when fenced blocks hold no score).
    for candidate in [*reversed(_fenced_blocks(text)), *reversed(_raw_objects(text))]:
        obj = _load_object(candidate)
        if obj is not None and not planted.contains(candidate, obj):
            objects.append(obj)
    if not objects:
        return JudgeVerdict(ok=False, code=ParseCode.NO_JSON_OBJECT)
    chosen = next((obj for obj in objects if "score" in obj), None)
    if chosen is None:
        return JudgeVerdict(ok=False, code=ParseCode.NO_SCORE_IN_JSON)
    score = chosen["score"]
    reasoning = chosen.get("reasoning")
    reasoning_text = reasoning if isinstance(reasoning, str) else None
    if isinstance(score, bool) or not isinstance(score, int | float):
        return JudgeVerdict(ok=False, reasoning=reasoning_text, code=ParseCode.SCORE_NOT_NUMERIC)
    if not math.isfinite(score):
        return JudgeVerdict(ok=False, reasoning=reasoning_text, code=ParseCode.SCORE_NOT_FINITE)
    if (min_score is not None and score < min_score) or (
        max_score is not None and score > max_score
    ):
        return JudgeVerdict(ok=False, reasoning=reasoning_text, code=ParseCode.SCORE_OUT_OF_RANGE)
    return JudgeVerdict(ok=True, score=float(score), reasoning=reasoning_text)
