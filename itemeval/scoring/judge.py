"""The judge-output contract: a strict parser with exact failure codes.

Judges are told to end with a fenced JSON block `{"score": <number>, "reasoning": "..."}`. The
parser looks at fenced code blocks from last to first, then at raw JSON objects in the text from
last to first, and takes the first candidate that is a JSON object with a `score` key. Failures are
results, not errors: the grade row keeps `parse_ok = false` and the code, and is final.

Codes (a contract, stored in `parse_code`):
* `no_json_object`: no fenced block or brace-delimited span parses as a JSON object;
* `no_score_in_json`: JSON objects were found but none has a `score` key;
* `score_not_numeric`: the chosen object's `score` is not a JSON number (strings, booleans, null);
* `score_not_finite`: the score is NaN or infinite.
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


@dataclass(frozen=True, slots=True)
class JudgeVerdict:
    ok: bool
    score: float | None = None
    reasoning: str | None = None
    code: ParseCode | None = None


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.DOTALL)


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


def parse_judge_output(text: str) -> JudgeVerdict:
    """Parse a judge's reply under the strict contract (see the module docstring)."""
    objects: list[dict[str, Any]] = []
    for block in reversed(_fenced_blocks(text)):
        obj = _load_object(block)
        if obj is not None:
            objects.append(obj)
    # Raw objects come after every fenced block, also when fenced blocks exist but hold no score.
    for span in reversed(_raw_objects(text)):
        obj = _load_object(span)
        if obj is not None:
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
    return JudgeVerdict(ok=True, score=float(score), reasoning=reasoning_text)
