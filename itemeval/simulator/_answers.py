"""What a simulated model writes: an answer in the form the prompt asks for, right or wrong.

The form comes from the item's modality when the caller passed it in the sim hints, otherwise from
the prompt text (a list of lettered options, "True or False", a question asking for a number, ...).
Right answers are the target; wrong answers are plausible: another letter, the other boolean, a
nearby number, another word from the prompt. When the prompt asks for a final `ANSWER: ...` line
the answer comes after a few lines of reasoning; `long-prose` answers are a paragraph.

Judge mode writes the score contract (a fenced JSON block `{"score": ..., "reasoning": ...}`), or,
at the configured rate, one of the four malformed outputs that the judge parser must reject with
`no_json_object`, `no_score_in_json`, `score_not_numeric` or `score_not_finite`.
"""

from __future__ import annotations

import json
import math
import re
import string
from dataclasses import dataclass

from itemeval.simulator._model import stable_unit

#: Option letters: `choiceofN` answers with one of the first N (N up to 26).
LETTERS = string.ascii_uppercase
_OPTION_LINE = re.compile(r"(?m)^\s*\(?([A-Z])[).:]\s+\S")
_TRUE_FALSE = re.compile(r"\b(true\s*(?:or|/)\s*false|false\s*(?:or|/)\s*true)\b", re.I)
_ANSWER_LINE = re.compile(r"ANSWER\s*:", re.I)
_NUMBER_WORDS = re.compile(r"\b(how many|how much|number|calculate|compute|sum|total)\b", re.I)
_NUMBER = re.compile(r"^\s*[-+]?\d[\d,]*(\.\d+)?\s*$")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
_JUDGE_PROMPT = re.compile(r'"score"', re.I)

#: Sentences a simulated model strings together as its "reasoning" (neutral on purpose).
_FILLER = (
    "Let me work through this step by step.",
    "First, I restate what the question asks.",
    "The key facts in the prompt constrain the answer.",
    "I compare the options against those facts.",
    "Some choices can be ruled out immediately.",
    "Checking the remaining possibility carefully.",
    "This is consistent with the information given.",
    "Putting these observations together gives the result.",
    "A quick sanity check confirms the reasoning.",
    "There is no contradiction with the question.",
)
_DISTRACTORS = ("none of these", "unknown", "it depends", "neither")

JUDGE_FAILURES = ("no_json_object", "no_score_in_json", "score_not_numeric", "score_not_finite")


@dataclass(frozen=True, slots=True)
class AnswerForm:
    """How an answer must look: `kind` is letter | boolean | ternary | number | phrase | prose."""

    kind: str
    letters: int = 0  # for kind == "letter": how many options (A.. )
    final_line: bool = False  # end with "ANSWER: ..."


def detect_form(prompt: str, modality: str | None, target: str | None) -> AnswerForm:
    """The answer form from the modality hint, else from the prompt and target."""
    final_line = bool(_ANSWER_LINE.search(prompt))
    modality = (modality or "").lower().replace("_", "-")
    if modality.startswith("choiceof") and modality[8:].isdigit():
        return AnswerForm("letter", int(modality[8:]), final_line)
    if modality in ("multiple-choice", "multiplechoice"):
        return AnswerForm("letter", max(2, _count_options(prompt)), final_line)
    if modality == "boolean":
        return AnswerForm("boolean", final_line=final_line)
    if modality == "ternary":
        return AnswerForm("ternary", final_line=final_line)
    if modality in ("long-prose", "longprose"):
        return AnswerForm("prose", final_line=final_line)
    if modality in ("single-value", "singlevalue", "cloze", "short-prose", "shortprose"):
        kind = "number" if target and _NUMBER.match(target) else "phrase"
        return AnswerForm(kind, final_line=final_line)
    # No modality: read the prompt.
    options = _count_options(prompt)
    if options >= 2:
        return AnswerForm("letter", options, final_line)
    if _TRUE_FALSE.search(prompt):
        return AnswerForm("boolean", final_line=final_line)
    if (target and _NUMBER.match(target)) or (not target and _NUMBER_WORDS.search(prompt)):
        return AnswerForm("number", final_line=final_line)
    if target is not None and target != "":
        return AnswerForm("phrase", final_line=final_line)
    return AnswerForm("phrase" if final_line else "prose", final_line=final_line)


def _count_options(prompt: str) -> int:
    found = {m.group(1) for m in _OPTION_LINE.finditer(prompt)}
    count = 0
    for letter in LETTERS:
        if letter not in found:
            break
        count += 1
    return count


def is_judge_prompt(prompt: str) -> bool:
    """Without hints: does the prompt ask for the judge score contract?"""
    return bool(_JUDGE_PROMPT.search(prompt))


# --------------------------------------------------------------------------- solver answers


def right_answer(form: AnswerForm, target: str) -> str:
    if form.kind == "boolean":
        return "True" if target.strip().lower() in ("true", "t", "yes", "1") else "False"
    if form.kind == "letter":
        return target.strip().strip("().").upper()[:1] or "A"
    return target.strip()


def wrong_answer(form: AnswerForm, target: str, prompt: str, key: tuple[object, ...]) -> str:
    """A plausible wrong answer, chosen deterministically by `key`."""
    u = stable_unit("wrong", *key)
    if form.kind == "boolean":
        return "False" if right_answer(form, target) == "True" else "True"
    if form.kind == "ternary":
        options = [o for o in ("True", "False", "I don't know") if o.lower() != target.lower()]
        return options[int(u * len(options))]
    if form.kind == "letter":
        count = max(2, form.letters)
        right = right_answer(form, target)
        others = [c for c in LETTERS[:count] if c != right]
        return others[int(u * len(others))]
    if form.kind == "number":
        return _nearby_number(target, u)
    words = [w for w in dict.fromkeys(_WORD.findall(prompt)) if w.lower() not in target.lower()]
    if words:
        return words[int(u * len(words))]
    return _DISTRACTORS[int(u * len(_DISTRACTORS))]


def _nearby_number(target: str, u: float) -> str:
    text = target.strip().replace(",", "")
    try:
        value = float(text)
    except ValueError:
        return str(int(u * 100))
    if value.is_integer() and "." not in text:
        step = max(1, int(abs(value) * 0.1 * u) or 1)
        return str(int(value) + (step if u < 0.5 else -step))
    delta = max(abs(value) * 0.1, 0.1) * (0.5 + u)
    return f"{value + (delta if u < 0.5 else -delta):.{_decimals(text)}f}"


def _decimals(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def random_answer(form: AnswerForm, prompt: str, key: tuple[object, ...]) -> str:
    """An answer in the right form when the target is unknown (no hints)."""
    u = stable_unit("unhinted", *key)
    if form.kind == "boolean":
        return "True" if u < 0.5 else "False"
    if form.kind == "ternary":
        return ("True", "False", "I don't know")[int(u * 3)]
    if form.kind == "letter":
        return LETTERS[int(u * max(2, form.letters))]
    if form.kind == "number":
        return str(int(u * 100))
    words = list(dict.fromkeys(_WORD.findall(prompt)))
    return words[int(u * len(words))] if words else "unknown"


def filler(key: tuple[object, ...], sentences: int) -> str:
    """`sentences` neutral reasoning sentences, chosen deterministically by `key` (distinct up
    to the size of the pool, then repeating)."""
    start = int(stable_unit("filler", *key) * len(_FILLER))
    return " ".join(_FILLER[(start + i) % len(_FILLER)] for i in range(sentences))


def render_answer(
    form: AnswerForm, answer: str, key: tuple[object, ...], verbosity: float = 1.0
) -> str:
    """The full text of a solver's answer; `verbosity` scales the reasoning and prose around
    it (never a bare answer, whose form the prompt fixes)."""
    if form.kind == "prose":
        head, tail = max(1, round(3 * verbosity)), max(1, round(2 * verbosity))
        return f"{filler(key, head)} {answer}. {filler((*key, 'tail'), tail)}".strip()
    if form.final_line:
        sentences = max(1, round((2 + int(stable_unit("length", *key) * 5)) * verbosity))
        return f"{filler(key, sentences)}\n\nANSWER: {answer}"
    return answer


# --------------------------------------------------------------------------- judge answers


def judge_output(score: float, reasoning: str, *, structured: bool = False) -> str:
    """A judge's verdict: reasoning then a fenced block, or (structured) the object alone."""
    if structured:
        return json.dumps({"reasoning": reasoning, "score": score})
    body = json.dumps({"score": score, "reasoning": reasoning})
    return f"{reasoning}\n\n```json\n{body}\n```"


def malformed_judge_output(failure_code: str, reasoning: str, *, structured: bool = False) -> str:
    """A judge answer that the strict parser must reject with exactly `failure_code` (the
    structured parser, when `structured`)."""
    if failure_code == "no_json_object":
        return f"{reasoning} I would rate it as correct overall, score one out of one."
    if failure_code == "no_score_in_json":
        body = json.dumps({"verdict": "correct", "reasoning": reasoning})
    elif failure_code == "score_not_numeric":
        body = json.dumps({"score": "high", "reasoning": reasoning})
    elif failure_code == "score_not_finite":
        # Valid JSON whose number overflows to infinity when parsed.
        body = '{"score": 1e999, "reasoning": ' + json.dumps(reasoning) + "}"
    else:
        raise ValueError(f"unknown judge failure code {failure_code!r}")
    if structured:
        return body
    return f"{reasoning}\n\n```json\n{body}\n```"


def solution_matches(solution: str, target: str) -> bool:
    """Does a solution's final answer equal the target (what a correct judge decides)?"""
    lines = [line.strip() for line in solution.strip().splitlines() if line.strip()]
    final = solution.strip()
    for line in reversed(lines):
        match = re.match(r"ANSWER\s*:\s*(.*)$", line, re.I)
        if match:
            final = match.group(1)
            break
    got, want = _normal(final), _normal(target)
    if not want:
        return False
    if got == want:
        return True
    try:
        return math.isclose(float(got.replace(",", "")), float(want.replace(",", "")))
    except ValueError:
        pass
    # Prose: the target phrase appears as whole words.
    return len(want) >= 3 and re.search(rf"\b{re.escape(want)}\b", got) is not None


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w.,'+-]+", " ", text.lower()).split()).strip(".")
