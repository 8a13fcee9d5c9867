"""The long table: one row per grading event, column by column.

A row is one grade of one solution: (grade condition, generate condition, item, epoch), with the
item's fields, the readable facets of both conditions, the solution and the grade. Columns are
grouped by where they come from (facets, item, solution, grade); solution and grade columns
that exist on both sides carry a `solution_` or `grade_` prefix. `docs/results.md` shows the
same list (generated from `LONG_COLUMNS`).

Every column is nullable except the keys and facets that always exist: with
`--include-ungraded`, rows of solutions without a grade leave the grade columns null.
"""

from __future__ import annotations

import pyarrow as pa

from itemeval.store import TIMESTAMP, Column


def _c(name: str, type_: pa.DataType, doc: str, *, null: bool = True) -> Column:
    return Column(name, type_, null, doc)


_S, _I32, _I64, _F64, _B = pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.bool_()

FACET_COLUMNS: tuple[Column, ...] = (
    _c("grade_condition_id", _S, "the grade condition (`<slug>--<hash12>`)", null=False),
    _c("grader_kind", _S, "`scorer` (verifiable, free) or `judge` (an LLM)", null=False),
    _c("grader", _S, "the scorer's name, or the judge's key under `graders:`", null=False),
    _c("grader_model", _S, "judges: the judge model id"),
    _c("rubric", _S, "judges: the rubric template name"),
    _c("gen_condition_id", _S, "the generate condition (`<slug>--<hash12>`)", null=False),
    _c("model", _S, "the solver model id", null=False),
    _c("model_name", _S, "the model's readable name (`models[].name`, else its id)", null=False),
    _c("prompt", _S, "the prompt template name", null=False),
    _c("model_config", _S, "the model config name", null=False),
    _c("params", _S, "resolved sampling parameters as canonical JSON", null=False),
)

ITEM_COLUMNS: tuple[Column, ...] = (
    _c("item_id", _S, "the item's id (unique across the study's datasets)", null=False),
    _c("dataset", _S, "the dataset the item belongs to", null=False),
    _c("epoch", _I32, "replication number, 0 .. replications-1", null=False),
    _c("input", _S, "the item's prompt text"),
    _c("target", _S, "the reference answer (may be empty for judge-only items)"),
    _c("modality", _S, "the item's modality (`single-value`, `choiceof4`, `boolean`, ...)"),
    _c("difficulty", _F64, "the item's stated difficulty (0..1), when it has one"),
    _c("task_prompt", _S, "the effective task prompt (the system message)"),
    _c("grading_scheme", _S, "the item's grading scheme text, when it has one"),
    _c("metadata", _S, "the item's other fields as a JSON object"),
)

SOLUTION_COLUMNS: tuple[Column, ...] = (
    _c("solution_status", _S, "`ok` or `error` (no answer: the cell is retried on resume)"),
    _c("solution_error_code", _S, "stable error code of a failed generation"),
    _c("solution_error_message", _S, "what went wrong, secrets redacted"),
    _c("solution_text", _S, "the model's answer"),
    _c("finish_reason", _S, "the provider's finish reason (`stop`, `length`, ...)"),
    _c("solution_input_tokens", _I64, "prompt tokens of the generation"),
    _c("solution_output_tokens", _I64, "completion tokens (reasoning included)"),
    _c("solution_reasoning_tokens", _I64, "part of the output tokens spent on reasoning"),
    _c("solution_cached_input_tokens", _I64, "prompt tokens served by the provider's cache"),
    _c("solution_usd", _F64, "what the generation cost (0 for a response-cache hit)"),
    _c("solution_latency_ms", _F64, "wall time of the generation call, retries included"),
    _c("solution_cached", _B, "true if the answer came from itemeval's response cache"),
    _c("solution_tier", _S, "`live` (one call) or `batch` (a provider's batch API, batch price)"),
    _c("solution_run_id", _S, "the run that wrote the solution (`manifests/<run_id>.json`)"),
    _c("generated_at", TIMESTAMP, "when the solution was written (UTC)"),
)

GRADE_COLUMNS: tuple[Column, ...] = (
    _c("graded", _B, "false only for `--include-ungraded` rows (no grade row yet)", null=False),
    _c("grade_status", _S, "`ok` (a grade; judge parse failures too) or `error`"),
    _c("grade_error_code", _S, "stable error code of a failed judge call"),
    _c("grade_error_message", _S, "what went wrong, secrets redacted"),
    _c("extracted", _S, "scorers: the answer extracted from the solution"),
    _c("score", _F64, "the score: scorer result, or the judge's score"),
    _c("correct", _B, "scorers: matched; judges: score >= the rubric's pass score"),
    _c("parse_ok", _B, "false when the judge's output broke the score contract (final)"),
    _c("parse_code", _S, "judge parse failure code (`no_json_object`, ...)"),
    _c("judge_reasoning", _S, "the reasoning from the judge's JSON block"),
    _c("judge_text", _S, "the judge's raw output"),
    _c("grade_stale", _B, "true if the grade was given to an earlier text of the solution"),
    _c("grade_input_tokens", _I64, "judge prompt tokens (0 for scorers)"),
    _c("grade_output_tokens", _I64, "judge completion tokens (0 for scorers)"),
    _c("grade_usd", _F64, "what the grade cost (0 for scorers and cache hits)"),
    _c("grade_latency_ms", _F64, "wall time of the judge call"),
    _c("grade_cached", _B, "true if the judge's answer came from the response cache"),
    _c("grade_tier", _S, "`live` or `batch` (the judge's call); `live` for scorers"),
    _c("grade_run_id", _S, "the run that wrote the grade"),
    _c("graded_at", TIMESTAMP, "when the grade was written (UTC)"),
)

LONG_COLUMNS: tuple[Column, ...] = (
    *FACET_COLUMNS,
    *ITEM_COLUMNS,
    *SOLUTION_COLUMNS,
    *GRADE_COLUMNS,
)
LONG_TABLE_SCHEMA: pa.Schema = pa.schema(
    [c.field for c in LONG_COLUMNS], metadata={"itemeval.schema": "long_table/1"}
)

#: Store column -> long-table column, per stage (columns not listed keep their name).
SOLUTION_RENAMES: dict[str, str] = {
    "status": "solution_status",
    "error_code": "solution_error_code",
    "error_message": "solution_error_message",
    "text": "solution_text",
    "finish_reason": "finish_reason",
    "input_tokens": "solution_input_tokens",
    "output_tokens": "solution_output_tokens",
    "reasoning_tokens": "solution_reasoning_tokens",
    "cached_input_tokens": "solution_cached_input_tokens",
    "usd": "solution_usd",
    "latency_ms": "solution_latency_ms",
    "cached": "solution_cached",
    "tier": "solution_tier",
    "run_id": "solution_run_id",
    "written_at": "generated_at",
}
GRADE_RENAMES: dict[str, str] = {
    "status": "grade_status",
    "error_code": "grade_error_code",
    "error_message": "grade_error_message",
    "extracted": "extracted",
    "score": "score",
    "correct": "correct",
    "parse_ok": "parse_ok",
    "parse_code": "parse_code",
    "reasoning": "judge_reasoning",
    "judge_text": "judge_text",
    "input_tokens": "grade_input_tokens",
    "output_tokens": "grade_output_tokens",
    "usd": "grade_usd",
    "latency_ms": "grade_latency_ms",
    "cached": "grade_cached",
    "tier": "grade_tier",
    "run_id": "grade_run_id",
    "written_at": "graded_at",
}
ITEM_FIELDS: tuple[str, ...] = (
    "input",
    "target",
    "modality",
    "difficulty",
    "task_prompt",
    "grading_scheme",
    "metadata",
)


def markdown_table() -> str:
    """The column list as a Markdown table (what `docs/results.md` shows)."""
    lines = ["| column | type | meaning |", "| --- | --- | --- |"]
    for column in LONG_COLUMNS:
        lines.append(f"| `{column.name}` | {column.type} | {column.doc} |")
    return "\n".join(lines)
