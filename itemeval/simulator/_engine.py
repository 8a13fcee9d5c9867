"""`Simulator`: one simulated call, from (model, messages, hints) to a `SimReply`.

Shared by the in-process provider and `itemeval sim-server`. The answer itself is deterministic
(seed, model, item, epoch; see `model.py`); latency and injected faults are drawn per attempt from
one seeded generator, so a retried attempt can succeed where the first failed, and a run with the
same seed and the same order of calls sees the same faults. `faults.never_answer` is the one
fault drawn by content instead: those requests hang on every attempt.

Hints (`ModelRequest.sim_hints`, or the `itemeval_sim` body field over HTTP):
`item_id`, `epoch`, `target`, `modality`, `difficulty`; for judge calls `role: "judge"`,
`solution` (the text being judged), `target`, optionally `score_range: [low, high]`; for
pairwise judge calls `role: "pairwise"`, `first` and `second` (the answers in the order shown),
`target` (the verdict: `{"reasoning": ..., "winner": "first" | "second" | "tie"}`).
A judge asked for structured output (`structured=True`: a request's reply schema, or its wire
form on the server) answers with the verdict object alone; its malformed replies are then the
object without a valid score, or a sentence where the object should be.
Without hints the item id is a hash of the prompt and the answer is plausible but not calibrated.

Hidden reasoning: a model with `reasoning_tokens > 0` (the catalog's `sim/reasoner`) reasons on
every call, about that many tokens at effort medium; any model reasons when asked
(`reasoning_effort`, or a thinking budget). A thinking budget caps reasoning; 0 turns it off, a
negative one (Gemini's -1, dynamic) turns it on without a cap. Reasoning plus text never exceed
`max_tokens` (reasoning first, then as much text as is left), as a provider never bills beyond
it; without `max_tokens`, a simulated model's own output limit is `MAX_OUTPUT_TOKENS` (what the
price table's `max_output` says for `sim/*`, so the budget cap can bound a call).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from itemeval.ids import sha256_hex
from itemeval.simulator import _answers as answers
from itemeval.simulator._model import (
    catalog,
    item_difficulty,
    model_name,
    p_correct,
    stable_unit,
)
from itemeval.simulator._settings import SimModelSpec, SimSettings

#: A simulated model's output limit when a request sets no max_tokens (as real models have one).
MAX_OUTPUT_TOKENS = 8192

#: Reply kinds besides "ok": the injected faults, and a model that is not in the catalog.
FAULT_KINDS = ("rate_limit", "server_error", "timeout", "malformed", "empty")

_REASONING_TOKENS = {"minimal": 0, "low": 256, "medium": 1024, "high": 4096}
#: A reasoning model's mean per effort, as a multiple of its `reasoning_tokens` (= medium).
_EFFORT_SCALE = {"minimal": 0.0, "low": 0.25, "medium": 1.0, "high": 4.0}


@dataclass(frozen=True, slots=True)
class ReplyTokens:
    """A reply's tokens as the simulator bills them (`reasoning_tokens` is part of
    `output_tokens`); the prompt cache's share is the server's (`CacheUsage`)."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(slots=True)
class SimReply:
    kind: str  # "ok", one of FAULT_KINDS, or "unknown_model"
    text: str = ""
    finish_reason: str = "stop"
    usage: ReplyTokens = field(default_factory=ReplyTokens)
    delay_s: float = 0.0
    retry_after_s: float = 0.0
    message: str = ""
    reasoning_summary: str = ""  # what a provider that shows thinking (Anthropic) would show


def count_tokens(text: str) -> int:
    """~4 characters a token (what the simulator bills and the rate limits count)."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def input_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(count_tokens(_content(m)) + 4 for m in messages)


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks (Anthropic, OpenAI parts)
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return ""


class Simulator:
    """Answers calls for the models of a catalog; see the module docstring."""

    def __init__(self, settings: SimSettings | None = None):
        self.settings = settings or SimSettings()
        self.models: dict[str, SimModelSpec] = catalog(self.settings.models)
        self._rng = random.Random(self.settings.seed)
        faults = self.settings.faults
        rates = (
            faults.rate_limit,
            faults.server_error,
            faults.timeout,
            faults.malformed,
            faults.empty,
        )
        self._fault_edges: list[tuple[float, str]] = []
        edge = 0.0
        for kind, rate in zip(FAULT_KINDS, rates, strict=True):
            if rate > 0:
                edge += rate
                self._fault_edges.append((edge, kind))

    def model_ids(self) -> list[str]:
        return [f"sim/{name}" for name in self.models]

    def reply(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        hints: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        thinking_budget: int | None = None,
        structured: bool = False,
    ) -> SimReply:
        """One attempt: the answer, its latency, or an injected fault (drawn per attempt)."""
        if model_name(model) not in self.models:
            return self._unknown(model)
        delay = self._latency()
        fault = self._fault()
        if self._never_answered(model, messages, hints or {}):
            fault = "timeout"
        if fault is not None:
            return SimReply(
                fault,
                delay_s=delay,
                retry_after_s=self.settings.faults.retry_after_s,
                message=f"injected fault: {fault}",
            )
        reply = self.answer(
            model,
            messages,
            hints=hints,
            max_tokens=max_tokens,
            reasoning_effort=reasoning_effort,
            thinking_budget=thinking_budget,
            structured=structured,
        )
        reply.delay_s += delay
        return reply

    def answer(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        hints: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        thinking_budget: int | None = None,
        structured: bool = False,
    ) -> SimReply:
        """The answer alone, without latency or fault draws: deterministic, and what batches use
        (so a batch answers exactly as live calls do, and does not shift the live fault
        sequence)."""
        name = model_name(model)
        spec = self.models.get(name)
        if spec is None:
            return self._unknown(model)
        prompt = "\n\n".join(_content(m) for m in messages)
        hints = hints or {}
        if hints.get("role") == "pairwise":
            text = self._pairwise(name, spec, prompt, hints, structured=structured)
        elif hints.get("role") == "judge" or (not hints and answers.is_judge_prompt(prompt)):
            text = self._judge(name, spec, prompt, hints, structured=structured)
        else:
            text = self._solve(name, spec, prompt, hints)
        reasoning = 0
        summary = ""
        mean = _reasoning_mean(spec, reasoning_effort, thinking_budget)
        if mean > 0:  # (the key hashes the prompt: only when there is something to draw)
            key = self._item_key(name, prompt, hints)
            reasoning = int(mean * (0.5 + stable_unit("reasoning", *key)))
            if thinking_budget is not None and thinking_budget > 0:
                reasoning = min(reasoning, thinking_budget)
            summary = answers.filler((*key, "thinking"), min(6, 1 + reasoning // 512))
        output = count_tokens(text)
        finish = "stop"
        if max_tokens is None:
            max_tokens = MAX_OUTPUT_TOKENS
        if output + reasoning > max_tokens:
            # Out of budget: reasoning first, then as much text as is left.
            reasoning = min(reasoning, max(0, max_tokens))
            keep = max(0, max_tokens - reasoning)
            text = text[: keep * 4]
            output = count_tokens(text)
            finish = "length"
        usage = ReplyTokens(
            input_tokens=input_tokens(messages),
            output_tokens=output + reasoning,
            reasoning_tokens=reasoning,
        )
        return SimReply(
            "ok",
            text=text,
            finish_reason=finish,
            usage=usage,
            delay_s=output * self.settings.latency.per_output_token_ms / 1000.0,
            reasoning_summary=summary,
        )

    def _unknown(self, model: str) -> SimReply:
        known = ", ".join(self.model_ids())
        return SimReply("unknown_model", message=f"model {model!r} is not simulated ({known})")

    # ---------------------------------------------------------------- per attempt draws

    def _latency(self) -> float:
        latency = self.settings.latency
        median = latency.median_ms / 1000.0
        if median <= 0:
            return 0.0
        if latency.distribution == "uniform" and latency.spread > 0:
            return max(0.0, median * (1 + self._rng.uniform(-latency.spread, latency.spread)))
        if latency.distribution == "lognormal" and latency.spread > 0:
            return median * math.exp(self._rng.gauss(0.0, latency.spread))
        return median

    def _never_answered(
        self, model: str, messages: Sequence[Mapping[str, Any]], hints: Mapping[str, Any]
    ) -> bool:
        """A request the server never answers, on any attempt (`faults.never_answer`): chosen
        by its content, item and epoch, so every attempt and every copy of one hangs alike."""
        share = self.settings.faults.never_answer
        if share <= 0:
            return False
        prompt = "\n\n".join(_content(m) for m in messages)
        key = self._item_key(model_name(model), prompt, hints)
        return stable_unit(*key, "never answered", prompt) < share

    def _fault(self) -> str | None:
        if not self._fault_edges:
            return None
        u = self._rng.random()
        for edge, kind in self._fault_edges:
            if u < edge:
                return kind
        return None

    # ---------------------------------------------------------------- answers

    def _item_key(self, name: str, prompt: str, hints: Mapping[str, Any]) -> tuple[object, ...]:
        item_id = str(hints.get("item_id") or "prompt:" + sha256_hex(prompt)[:16])
        return (self.settings.seed, name, item_id.lower(), int(hints.get("epoch") or 0))

    def _solve(self, name: str, spec: SimModelSpec, prompt: str, hints: Mapping[str, Any]) -> str:
        key = self._item_key(name, prompt, hints)
        target = hints.get("target")
        target = None if target is None else str(target)
        form = answers.detect_form(prompt, hints.get("modality"), target)
        if not target:
            guess = answers.random_answer(form, prompt, key)
            return answers.render_answer(form, guess, key, spec.verbosity)
        item_id = str(key[2])
        difficulty = item_difficulty(item_id, _float_or_none(hints.get("difficulty")))
        # A prompt asking for reasoning and a final line draws its own outcome (same chance):
        # like real models, answers differ between prompt variants, not only between items.
        draw = stable_unit("correct", *key, "final-line" if form.final_line else "direct")
        correct = draw < p_correct(spec.ability, difficulty)
        if correct:
            answer = answers.right_answer(form, target)
        else:
            answer = answers.wrong_answer(form, target, prompt, key)
        return answers.render_answer(form, answer, key, spec.verbosity)

    def _judge(
        self,
        name: str,
        spec: SimModelSpec,
        prompt: str,
        hints: Mapping[str, Any],
        *,
        structured: bool = False,
    ) -> str:
        solution = str(hints.get("solution") or prompt)
        key = (*self._item_key(name, prompt, hints), sha256_hex(solution)[:16])
        target = hints.get("target")
        if target:
            truth = answers.solution_matches(solution, str(target))
        else:
            truth = stable_unit("judge-truth", *key) < 0.5
        false_pass, false_fail = judge_error_rates(spec, solution)
        error = false_fail if truth else false_pass
        draw = stable_unit("judge-right", *key)
        if spec.judge_shared_errors and stable_unit("judge-shared", *key) < (
            spec.judge_shared_errors
        ):
            # A draw without the judge's name: every judge drawing it errs on the same answers.
            draw = stable_unit("judge-right-shared", key[0], *key[2:])
        right = draw < 1.0 - error
        verdict = truth if right else not truth
        low, high = _score_range(hints.get("score_range"))
        reasoning = (
            "The response reaches the reference answer with sound reasoning."
            if verdict
            else "The response does not reach the reference answer."
        )
        if stable_unit("judge-malformed", *key) < self.settings.judge_malformed_rate:
            which = answers.JUDGE_FAILURES[int(stable_unit("judge-which", *key) * 4)]
            return answers.malformed_judge_output(which, reasoning, structured=structured)
        return answers.judge_output(high if verdict else low, reasoning, structured=structured)

    def _pairwise(
        self,
        name: str,
        spec: SimModelSpec,
        prompt: str,
        hints: Mapping[str, Any],
        *,
        structured: bool = False,
    ) -> str:
        """A pairwise verdict on hints `first` and `second` (see `pairwise_verdict`)."""
        first, second = str(hints.get("first") or ""), str(hints.get("second") or "")
        key = (
            *self._item_key(name, prompt, hints),
            sha256_hex(first)[:16],
            sha256_hex(second)[:16],
        )
        target = hints.get("target")
        winner = pairwise_verdict(
            spec,
            first,
            second,
            None if target is None else str(target),
            stable_unit("pairwise-prefer", *key),
            stable_unit("pairwise-position", *key),
        )
        reasoning = {
            "first": "The first response is better.",
            "second": "The second response is better.",
            "tie": "The responses are equally good.",
        }[winner]
        body = json.dumps({"reasoning": reasoning, "winner": winner})
        return body if structured else f"{reasoning}\n\n```json\n{body}\n```"


def pairwise_preference(
    spec: SimModelSpec, first: str, second: str, target: str | None, *, length: bool = True
) -> float:
    """The chance a simulated pairwise judge prefers the first answer before its position bias:
    `sigmoid(logit(judge_accuracy) * (right_first - right_second) + 4 * judge_length_bias *
    clip((len(first) - len(second)) / 1000, -1, 1))` (`length=False`: without the length term)."""
    if target is not None:
        d = float(answers.solution_matches(first, target)) - float(
            answers.solution_matches(second, target)
        )
    else:
        d = 0.0
    accuracy = min(max(spec.judge_accuracy, 1e-6), 1 - 1e-6)
    logit = math.log(accuracy / (1 - accuracy)) * d
    if length and spec.judge_length_bias:
        logit += 4 * spec.judge_length_bias * max(-1.0, min(1.0, (len(first) - len(second)) / 1e3))
    return 1.0 / (1.0 + math.exp(-logit))


def pairwise_verdict(
    spec: SimModelSpec,
    first: str,
    second: str,
    target: str | None,
    prefer_draw: float,
    position_draw: float,
) -> str:
    """`tie` for identical answers; else the first with `pairwise_preference`, and a verdict
    for the second turned to the first with probability `2 * judge_position_bias` (so that over
    both orders a share `0.5 + judge_position_bias` of the decisive verdicts go first)."""
    if first == second:
        return "tie"
    if prefer_draw < pairwise_preference(spec, first, second, target):
        return "first"
    return "first" if position_draw < 2 * spec.judge_position_bias else "second"


def judge_error_rates(spec: SimModelSpec, solution: str) -> tuple[float, float]:
    """(false pass, false fail) of a simulated judge on this answer: its declared rates (or
    `1 - judge_accuracy`), moved by its length bias."""
    false_pass = spec.judge_false_pass
    false_fail = spec.judge_false_fail
    if false_pass is None:
        false_pass = 1.0 - spec.judge_accuracy
    if false_fail is None:
        false_fail = 1.0 - spec.judge_accuracy
    if spec.judge_length_bias:
        shift = spec.judge_length_bias * min(1.0, len(solution) / 1000.0)
        false_pass = min(1.0, max(0.0, false_pass + shift))
        false_fail = min(1.0, max(0.0, false_fail - shift))
    return false_pass, false_fail


def _reasoning_mean(spec: SimModelSpec, effort: str | None, budget: int | None) -> float:
    """Mean hidden reasoning tokens of one answer (each answer draws 0.5x to 1.5x of it)."""
    if budget == 0:  # thinking turned off (Gemini's thinkingBudget 0)
        return 0.0
    if spec.reasoning_tokens > 0:
        # A reasoning model reasons unasked; a budget only caps it.
        return spec.reasoning_tokens * _EFFORT_SCALE.get(effort or "medium", 1.0)
    base = _REASONING_TOKENS.get(effort or "", 0) if effort else 0
    if budget is not None and budget < 0:  # Gemini's -1: thinking on, the model decides
        base = max(base, _REASONING_TOKENS["medium"])
    elif budget:
        base = max(base, budget // 2)
    return float(base)


def _float_or_none(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _score_range(value: Any) -> tuple[float | int, float | int]:
    if isinstance(value, list | tuple) and len(value) == 2:
        low, high = value
        if isinstance(low, int | float) and isinstance(high, int | float):
            return low, high
    return 0, 1
