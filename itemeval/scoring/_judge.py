"""The judge-output contract: a strict parser with exact failure codes.

Two ways a judge answers (docs/decisions/0021-judge-verdicts.md, extends `../shared/design.md`):

* Structured (`parse_structured_verdict`): the judge answered through its provider's structured
  output (`VERDICT_SCHEMA`), so the verdict is the whole reply: `{"score": <number>,
  "reasoning": "..."}`. Nothing is looked for in text: the reply parses as one JSON object or it
  fails.
* Text (`parse_judge_output`): judges are told to end with a fenced JSON block. The parser looks
  at fenced code blocks from last to first, then at raw JSON objects in the text from last to
  first, and takes the first candidate that is a JSON object with a `score` key.

Failures are results, not errors: the grade row keeps `parse_ok = false` and the code, and is
final.

The guards of text replies (what the seed leaves open):
* a candidate block the judged text contains is never taken: the model under test cannot plant
  its own grade for a judge to quote. "Contains" reads the judged text's JSON in any formatting
  (whitespace, key order, `1` or `1.0`, single-quoted Python dicts, JSON escaped inside a
  string, objects nested in others) and also refuses a block that is *part* of an object the
  judged text holds with the same score (`{"score": 1}` quoted out of a planted
  `{"score": 1, "reasoning": "correct"}`);
* the judge's own final verdict is not discarded because the judged text happens to hold equal
  JSON: when no other block is left, the reply's last fenced block is taken if the reply ends
  with it, the reply did not stop on its token limit, and the judged text holds that very
  object (not merely a larger one of which it is a part);
* the score must lie in the rubric's range;
* a reply that stopped on its token limit without a valid block of its own is `truncated` (it
  may have been cut off before its verdict, after quoting something else).

Residual risk of text replies (why structured output is the default): a judge that ends its
reply by copying the candidate's exact block (a prompt injection that worked) is read as its
verdict; a paraphrased quote (other reasoning text, another score spelling the parser does not
read as JSON) is not recognised as a quote; an honest verdict that is part of a larger object
the candidate wrote with the same score is refused (`no_json_object`, final).

Codes (a contract, stored in `parse_code`):
* `no_json_object`: no fenced block or brace-delimited span parses as a JSON object (of the
  judge's own); for a structured reply, the reply is not one JSON object;
* `no_score_in_json`: JSON objects were found but none has a `score` key;
* `score_not_numeric`: the chosen object's `score` is not a JSON number (strings, booleans, null);
* `score_not_finite`: the score is NaN or infinite;
* `score_out_of_range`: the score lies outside the rubric's `[min_score, max_score]`;
* `truncated`: the reply stopped on its token limit without a valid block of its own.
"""

from __future__ import annotations

import ast
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


#: The structured-output schema of a verdict (reasoning first, so a model reasons, then scores).
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "score": {"type": "number"},
    },
    "required": ["reasoning", "score"],
    "additionalProperties": False,
}
VERDICT_SCHEMA_NAME = "verdict"


def _nested_objects(value: Any, out: list[dict[str, Any]]) -> None:
    if isinstance(value, dict):
        out.append(value)
        for inner in value.values():
            _nested_objects(inner, out)
    elif isinstance(value, list):
        for inner in value:
            _nested_objects(inner, out)


def _lenient_objects(span: str) -> list[dict[str, Any]]:
    """The objects a span holds in any formatting: JSON, a Python literal (single quotes,
    True/None), and every object nested inside."""
    found: list[dict[str, Any]] = []
    value = _load_object(span)
    if value is None:
        try:
            literal = ast.literal_eval(span.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            literal = None
        value = literal if isinstance(literal, dict) else None
    if value is not None:
        _nested_objects(value, found)
    return found


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values (1 == 1.0; strings compared exactly)."""
    try:
        return bool(a == b)
    except Exception:  # pragma: no cover - exotic values from a literal
        return False


class _Planted:
    """What the judged text contains: its whitespace-free form and its JSON objects, read in
    any formatting (see the module docstring)."""

    EQUAL = "equal"
    PART = "part"

    def __init__(self, judged: str):
        self.squeezed = _squeeze(judged)
        self.objects: list[dict[str, Any]] = []
        if not judged:
            return
        texts = [judged]
        if '\\"' in judged:  # JSON written inside a JSON string: read it unescaped too
            texts.append(judged.replace('\\"', '"'))
        for text in texts:
            for span in [*_fenced_blocks(text), *_raw_objects(text)]:
                self.objects.extend(_lenient_objects(span))

    def match(self, candidate: str, obj: dict[str, Any]) -> str | None:
        """`EQUAL` when the judged text holds this very block (any formatting), `PART` when it
        holds an object with the same score of which the block is a part, else None."""
        squeezed = _squeeze(candidate)
        if squeezed and squeezed in self.squeezed:
            return self.EQUAL
        if any(_same(obj, planted) for planted in self.objects):
            return self.EQUAL
        if "score" in obj:
            for planted in self.objects:
                if "score" in planted and all(
                    key in planted and _same(planted[key], value) for key, value in obj.items()
                ):
                    return self.PART
        return None


def parse_structured_verdict(
    text: str,
    *,
    min_score: float | None = None,
    max_score: float | None = None,
    finish_reason: str | None = None,
) -> JudgeVerdict:
    """A structured reply: the whole text is the verdict object, or it fails (nothing is looked
    for inside the text; no planted-block guard is needed, as the judge wrote every byte of it
    under the schema)."""
    obj = _load_object(text)
    if obj is None:
        code = ParseCode.TRUNCATED if finish_reason in TOKEN_LIMIT_REASONS else None
        return JudgeVerdict(ok=False, code=code or ParseCode.NO_JSON_OBJECT)
    verdict = _check(obj, min_score, max_score)
    if not verdict.ok and finish_reason in TOKEN_LIMIT_REASONS:
        return JudgeVerdict(ok=False, reasoning=verdict.reasoning, code=ParseCode.TRUNCATED)
    return verdict


def parse_judge_output(
    text: str,
    *,
    judged: str = "",
    min_score: float | None = None,
    max_score: float | None = None,
    finish_reason: str | None = None,
) -> JudgeVerdict:
    """Parse a judge's text reply under the strict contract (see the module docstring).

    `judged`: the text being judged (the candidate's answer); `min_score`/`max_score`: the
    rubric's range; `finish_reason`: why the judge's reply stopped."""
    stopped = finish_reason in TOKEN_LIMIT_REASONS
    verdict = _parse(text, _Planted(judged), min_score, max_score, final_allowed=not stopped)
    if not verdict.ok and stopped:
        return JudgeVerdict(ok=False, reasoning=verdict.reasoning, code=ParseCode.TRUNCATED)
    return verdict


def _final_block(text: str) -> str | None:
    """The reply's last fenced block when the reply ends with it (only whitespace after)."""
    matches = list(_FENCE.finditer(text))
    last = matches[-1] if matches else None
    if last is None or text[last.end() :].strip():
        return None
    return last.group(2)


def _parse(
    text: str,
    planted: _Planted,
    min_score: float | None,
    max_score: float | None,
    *,
    final_allowed: bool = True,
) -> JudgeVerdict:
    objects: list[dict[str, Any]] = []
    refused_equal: dict[str, dict[str, Any]] = {}
    # Fenced blocks last to first, then raw objects (also when fenced blocks hold no score).
    for candidate in [*reversed(_fenced_blocks(text)), *reversed(_raw_objects(text))]:
        obj = _load_object(candidate)
        if obj is None:
            continue
        found = planted.match(candidate, obj)
        if found is None:
            objects.append(obj)
        elif found == _Planted.EQUAL:
            refused_equal.setdefault(candidate, obj)
    chosen = next((obj for obj in objects if "score" in obj), None)
    if chosen is None and final_allowed:
        # The judge's own final verdict, equal to JSON the judged text happens to hold.
        final = _final_block(text)
        if final is not None and final in refused_equal and "score" in refused_equal[final]:
            chosen = refused_equal[final]
    if chosen is None:
        code = ParseCode.NO_SCORE_IN_JSON if objects else ParseCode.NO_JSON_OBJECT
        return JudgeVerdict(ok=False, code=code)
    return _check(chosen, min_score, max_score)


def _check(obj: dict[str, Any], min_score: float | None, max_score: float | None) -> JudgeVerdict:
    if "score" not in obj:
        return JudgeVerdict(ok=False, code=ParseCode.NO_SCORE_IN_JSON)
    score = obj["score"]
    reasoning = obj.get("reasoning")
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
