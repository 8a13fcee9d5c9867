"""The provider interface: one request type, one result type, stable error codes.

This module stays public (the package's other modules are private): it is the light contract
that the call path, the batch clients, the store's rows and provider plugins import, and it
imports nothing of itemeval's, so `import itemeval.providers.types` never loads aiohttp,
tenacity or the simulator.

A provider call never raises through a batch: every failure becomes a `ModelResult` with
`ok=False` and an `ErrorCode`. Transient codes are retried inside the client (with backoff); what
comes out of `Provider.complete` is final for this attempt of the cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable


class ErrorCode(StrEnum):
    """Stable error codes stored in `error_code` columns (a contract for users' analyses)."""

    RATE_LIMITED = "rate_limited"  # 429 after every retry
    SERVER_ERROR = "server_error"  # 5xx after every retry
    TIMEOUT = "timeout"  # per-attempt timeout after every retry
    DEADLINE = "deadline"  # the endpoint's deadline_s cut every attempt short
    CONNECTION_ERROR = "connection_error"  # refused, reset, DNS, after every retry
    BAD_REQUEST = "bad_request"  # 400/404/422 that is not one of the specific codes below
    AUTH = "auth"  # 401/403, or the key variable is not set
    CONTEXT_LENGTH = "context_length"  # the prompt does not fit the model's context
    CONTENT_FILTER = "content_filter"  # the provider refused or filtered the output
    MALFORMED_RESPONSE = "malformed_response"  # 2xx whose body is not the documented shape
    EMPTY_OUTPUT = "empty_output"  # a well-formed answer with no text
    CANCELLED = "cancelled"  # the run was interrupted while this call was in flight
    INTERNAL = "internal"  # a bug in itemeval; the message says where


#: Codes that a later run retries (a provider failure is not a result).
TRANSIENT_CODES = frozenset(
    {
        ErrorCode.RATE_LIMITED,
        ErrorCode.SERVER_ERROR,
        ErrorCode.TIMEOUT,
        ErrorCode.DEADLINE,
        ErrorCode.CONNECTION_ERROR,
        ErrorCode.CANCELLED,
    }
)


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Provider-neutral sampling parameters; each client maps them to its wire format.

    `None` means "not set": the provider's default applies and nothing is sent.
    `reasoning_effort` ("minimal" | "low" | "medium" | "high") maps to OpenAI's
    `reasoning_effort`; `thinking_budget` (tokens) maps to Anthropic's and Gemini's thinking
    budgets. Each client documents what it does with a parameter it has no equivalent for.
    """

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    reasoning_effort: str | None = None
    thinking_budget: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The set parameters only (what enters condition ids and manifests)."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True, slots=True)
class ReplySchema:
    """Structured output: the reply must be one JSON object valid against `schema` (a JSON
    Schema of an object). Each client maps it to its wire format (OpenAI `response_format`
    `json_schema`, Anthropic a forced tool named `name`, Gemini `responseSchema`); the result's
    `text` is then that JSON object and nothing else."""

    name: str
    schema: dict[str, Any]
    description: str = ""

    def as_dict(self) -> dict[str, Any]:
        """What enters the request's content (its hash and cache key)."""
        return {"name": self.name, "schema": self.schema}


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call: chat messages (`{"role": "system"|"user"|"assistant", "content": str}`),
    the model id as the endpoint knows it, and sampling parameters.

    `sim_hints` is read only by the simulated provider (the item's target, difficulty, modality,
    id and the epoch, so that a simulated model can be right with a known probability); real
    clients never send it. `reply_schema`, when set, asks for structured output (see
    `ReplySchema`); it is request content.
    """

    model: str
    messages: tuple[dict[str, str], ...]
    params: SamplingParams = field(default_factory=SamplingParams)
    sim_hints: dict[str, Any] | None = None
    reply_schema: ReplySchema | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one call as the provider reported them. `input_tokens` is the whole prompt;
    `cached_input_tokens` and `cache_write_input_tokens` are parts of it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0  # part of input_tokens read from the provider's prompt cache
    reasoning_tokens: int = 0  # part of output_tokens spent on hidden reasoning
    # Part of input_tokens written to the provider's prompt cache (Anthropic bills it at a
    # premium; not stored in rows: the row's `usd` includes what it cost).
    cache_write_input_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ModelResult:
    """The outcome of one call, success or failure (never an exception)."""

    ok: bool
    text: str = ""
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency_ms: float = 0.0  # wall time of the whole call, retries included
    request_id: str | None = None  # the provider's id for the (last) request
    error_code: ErrorCode | None = None
    error_message: str | None = None  # never contains a secret
    http_status: int | None = None
    attempts: int = 1
    usd: float = 0.0  # filled by the caller from the pricing table

    @property
    def transient(self) -> bool:
        return self.error_code in TRANSIENT_CODES

    def priced(self, usd: float, attempts: int | None = None) -> ModelResult:
        """This result with its cost (and attempts) set: `dataclasses.replace`, written out
        because it runs once per call and `replace` costs ten times as much."""
        return ModelResult(
            ok=self.ok,
            text=self.text,
            finish_reason=self.finish_reason,
            usage=self.usage,
            latency_ms=self.latency_ms,
            request_id=self.request_id,
            error_code=self.error_code,
            error_message=self.error_message,
            http_status=self.http_status,
            attempts=self.attempts if attempts is None else attempts,
            usd=usd,
        )


@runtime_checkable
class Provider(Protocol):
    """What every client (OpenAI-compatible, Anthropic, Gemini, simulated) implements."""

    async def complete(self, request: ModelRequest) -> ModelResult: ...

    async def aclose(self) -> None: ...
