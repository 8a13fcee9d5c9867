"""From an HTTP status and a provider's error body to a stable `ErrorCode` (one table for all).

Each wire format extracts `(error type, error code, message)` from its own error body; this module
decides the code. The rules, in order:

1. words in the provider's error that mean the prompt is too long -> `context_length`;
   words that mean the content was refused -> `content_filter`;
2. the HTTP status: 401/403 -> `auth`, 408 -> `timeout`, 413 -> `context_length`,
   429 -> `rate_limited`, 5xx (and Anthropic's 529) -> `server_error`,
   other 4xx (400, 404, 409, 422, ...) -> `bad_request`.

`rate_limited`, `server_error` and `timeout` are retried by the client (`TRANSIENT_CODES`).
"""

from __future__ import annotations

from itemeval.errors import TransientFailure
from itemeval.providers.types import ErrorCode, ModelResult, Usage
from itemeval.secrets import redact

_CONTEXT_WORDS = (
    "context_length_exceeded",
    "context length",
    "context_length",
    "prompt is too long",
    "maximum context",
    "too many tokens",
    "exceeds the maximum number of tokens",
    "input token count",
    "string_above_max_length",
    "request_too_large",
)
_FILTER_WORDS = (
    "content_filter",
    "content_policy_violation",
    "content management policy",
    "responsibleaipolicyviolation",
)
_AUTH_WORDS = ("api key not valid", "api_key_invalid", "invalid api key", "invalid x-api-key")

MAX_MESSAGE_CHARS = 500


def code_for_error(
    status: int, error_type: str = "", error_code: str = "", message: str = ""
) -> ErrorCode:
    """The stable code of an HTTP error response."""
    words = f"{error_type} {error_code} {message}".lower()
    if 400 <= status < 500 and status not in (401, 403, 408, 429):
        if any(w in words for w in _CONTEXT_WORDS):
            return ErrorCode.CONTEXT_LENGTH
        if any(w in words for w in _FILTER_WORDS):
            return ErrorCode.CONTENT_FILTER
        if any(w in words for w in _AUTH_WORDS):
            return ErrorCode.AUTH
    if status in (401, 403):
        return ErrorCode.AUTH
    if status == 408:
        return ErrorCode.TIMEOUT
    if status == 413:
        return ErrorCode.CONTEXT_LENGTH
    if status == 429:
        return ErrorCode.RATE_LIMITED
    if status >= 500 or status == 409:
        # 409 is a provider-side lock conflict that a retry resolves (OpenAI documents it).
        return ErrorCode.SERVER_ERROR
    return ErrorCode.BAD_REQUEST


def describe(status: int | None, where: str, error_type: str, message: str) -> str:
    """A short, secret-free error message."""
    head = f"HTTP {status}" if status is not None else "error"
    kind = f" {error_type}" if error_type else ""
    text = " ".join(message.split())
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + "..."
    return redact(f"{head}{kind} from {where}: {text}" if text else f"{head}{kind} from {where}")


def failure(
    code: ErrorCode,
    message: str,
    *,
    http_status: int | None = None,
    request_id: str | None = None,
    text: str = "",
    finish_reason: str | None = None,
    usage: Usage | None = None,
) -> ModelResult:
    """A final (non-retried) failure result (with the usage the provider billed, if any)."""
    return ModelResult(
        ok=False,
        text=text,
        finish_reason=finish_reason,
        usage=usage if usage is not None else Usage(),
        error_code=code,
        error_message=redact(message),
        http_status=http_status,
        request_id=request_id,
    )


def answer(
    text: str,
    *,
    finish_reason: str | None,
    usage: Usage,
    request_id: str | None,
    reason_field: str,
    raw_reason: object,
) -> ModelResult:
    """A 200 answer: ok with its text, or `empty_output` when there is no text (the message
    names the provider's own reason field, e.g. `finish_reason`, `stop_reason`)."""
    if not text.strip():
        return failure(
            ErrorCode.EMPTY_OUTPUT,
            f"the model returned no text ({reason_field} {raw_reason!r})",
            request_id=request_id,
            finish_reason=finish_reason,
            http_status=200,
            usage=usage,
        )
    return ModelResult(
        ok=True,
        text=text,
        finish_reason=finish_reason,
        usage=usage,
        request_id=request_id,
        http_status=200,
    )


def failure_result(failure: TransientFailure) -> ModelResult:
    """The result of an attempt that ended in `failure` (its message redacted)."""
    return ModelResult(
        ok=False,
        error_code=failure.code,
        error_message=redact(failure.message),
        http_status=failure.http_status,
        request_id=failure.request_id,
    )
