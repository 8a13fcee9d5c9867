"""From call results to store rows: one place that fills the solutions, grades and cache schemas.

Fresh calls and response-cache hits go through the same functions (a hit is a `Call` with
`cached=True`), so the two can never disagree on what a row holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from itemeval.judging._pairwise import OUTCOME, parse_pairwise_verdict
from itemeval.planning import GradeCondition
from itemeval.providers.types import ModelResult
from itemeval.scoring import Score, parse_judge_output, parse_structured_verdict
from itemeval.secrets import redact
from itemeval.store import STATUS_ERROR, STATUS_OK
from itemeval.templates import Template


@dataclass(frozen=True, slots=True)
class Call:
    """One cell's call: the result, the request's hash and cache key, whether the answer
    came from the response cache (then nothing was paid), and the price tier of the path that
    answered it (`live`, or `batch`: the provider's batch API)."""

    item_id: str
    epoch: int
    result: ModelResult
    request_hash: str
    cache_key: str
    cached: bool = False
    tier: str = "live"


def _usage(call: Call) -> dict[str, Any]:
    result = call.result
    return {
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "cached_input_tokens": result.usage.cached_input_tokens,
        "reasoning_tokens": result.usage.reasoning_tokens,
        "usd": 0.0 if call.cached else result.usd,
        "latency_ms": result.latency_ms,
        "request_id": result.request_id,
        "attempts": 0 if call.cached else result.attempts,
        "cached": call.cached,
        "tier": call.tier,
    }


def _error(result: ModelResult) -> dict[str, Any]:
    return {
        "error_code": str(result.error_code) if result.error_code else "internal",
        "error_message": redact(result.error_message or "")[:2000] or None,
    }


def solution_row(call: Call, *, model: str, run_id: str) -> dict[str, Any]:
    result = call.result
    row: dict[str, Any] = {
        "item_id": call.item_id,
        "epoch": call.epoch,
        "status": STATUS_OK if result.ok else STATUS_ERROR,
        "text": result.text if result.ok else "",
        "finish_reason": result.finish_reason,
        "request_hash": call.request_hash,
        "model": model,
        "run_id": run_id,
        **_usage(call),
    }
    if not result.ok:
        row.update(_error(result))
    return row


def judge_row(
    call: Call,
    *,
    gen_condition_id: str,
    solution_hash: str,
    solution: str,
    grader: str,
    rubric: Template,
    run_id: str,
    structured: bool = False,
) -> dict[str, Any]:
    """A judge's grade. Provider failures are `error` rows (retried later); an answer that
    breaks the score contract is an `ok` row with `parse_ok = false` (final). `solution` is the
    text that was judged: a score block copied from it is never taken as the judge's.
    `structured`: the judge answered through structured output, so the reply is the verdict."""
    result = call.result
    row: dict[str, Any] = {
        "gen_condition_id": gen_condition_id,
        "item_id": call.item_id,
        "epoch": call.epoch,
        "solution_hash": solution_hash,
        "request_hash": call.request_hash,
        "grader": grader,
        "run_id": run_id,
        **_usage(call),
    }
    if not result.ok:
        return row | {"status": STATUS_ERROR, "parse_ok": False, **_error(result)}
    if structured:
        verdict = parse_structured_verdict(
            result.text,
            min_score=rubric.min_score,
            max_score=rubric.max_score,
            finish_reason=result.finish_reason,
        )
    else:
        verdict = parse_judge_output(
            result.text,
            judged=solution,
            min_score=rubric.min_score,
            max_score=rubric.max_score,
            finish_reason=result.finish_reason,
        )
    return row | {
        "status": STATUS_OK,
        "judge_text": result.text,
        "parse_ok": verdict.ok,
        "parse_code": str(verdict.code) if verdict.code else None,
        "score": verdict.score,
        "correct": None if verdict.score is None else verdict.score >= rubric.pass_score,
        "reasoning": verdict.reasoning,
    }


def pairwise_row(
    call: Call,
    *,
    gen_condition_id: str,
    solution_hash: str,
    grader: str,
    condition_first: bool,
    run_id: str,
    structured: bool = False,
) -> dict[str, Any]:
    """A pairwise judge's grade of the condition's answer against the baseline's: `score` is
    the condition's outcome (1 a win, 0.5 a tie, 0 a loss), `correct` is left empty (a
    comparison, not a pass). No verdict: an `ok` row with `parse_ok = false`, code
    `no_verdict` (final). Provider failures are `error` rows (retried later)."""
    result = call.result
    row: dict[str, Any] = {
        "gen_condition_id": gen_condition_id,
        "item_id": call.item_id,
        "epoch": call.epoch,
        "solution_hash": solution_hash,
        "request_hash": call.request_hash,
        "grader": grader,
        "run_id": run_id,
        **_usage(call),
    }
    if not result.ok:
        return row | {"status": STATUS_ERROR, "parse_ok": False, **_error(result)}
    winner = parse_pairwise_verdict(result.text, structured=structured)
    score = None if winner is None else OUTCOME[winner]
    if score is not None and not condition_first:
        score = 1.0 - score
    return row | {
        "status": STATUS_OK,
        "judge_text": result.text,
        "parse_ok": winner is not None,
        "parse_code": None if winner is not None else "no_verdict",
        "score": score,
        "correct": None,
        "reasoning": winner,
    }


def grade_row(
    call: Call,
    condition: GradeCondition,
    *,
    gen_condition_id: str,
    solution_hash: str,
    solution: str,
    run_id: str,
) -> dict[str, Any]:
    """A judge's grade row: `pairwise_row` for a pairwise judge, else `judge_row`."""
    assert condition.rubric is not None
    if condition.pairwise is not None:
        return pairwise_row(
            call,
            gen_condition_id=gen_condition_id,
            solution_hash=solution_hash,
            grader=condition.model_id or "",
            condition_first=condition.pairwise.condition_first,
            run_id=run_id,
            structured=condition.structured,
        )
    return judge_row(
        call,
        gen_condition_id=gen_condition_id,
        solution_hash=solution_hash,
        solution=solution,
        grader=condition.model_id or "",
        rubric=condition.rubric,
        run_id=run_id,
        structured=condition.structured,
    )


def scorer_row(
    item_id: str,
    epoch: int,
    score: Score,
    *,
    gen_condition_id: str,
    solution_hash: str,
    scorer: str,
    run_id: str,
) -> dict[str, Any]:
    return {
        "gen_condition_id": gen_condition_id,
        "item_id": item_id,
        "epoch": epoch,
        "status": STATUS_OK,
        "score": score.score,
        "correct": score.correct,
        "extracted": score.extracted,
        "parse_ok": True,
        "solution_hash": solution_hash,
        "grader": scorer,
        "run_id": run_id,
    }


def response_row(call: Call, *, model: str) -> dict[str, Any]:
    """What the response cache keeps of a fresh, successful call."""
    result = call.result
    return {
        "key": call.cache_key,
        "item_id": call.item_id,
        "epoch": call.epoch,
        "request_hash": call.request_hash,
        "model": model,
        "text": result.text,
        "finish_reason": result.finish_reason,
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "cached_input_tokens": result.usage.cached_input_tokens,
        "reasoning_tokens": result.usage.reasoning_tokens,
        "usd": result.usd,
        "latency_ms": result.latency_ms,
        "request_id": result.request_id,
    }
