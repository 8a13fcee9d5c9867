"""Anthropic Messages (`POST {base_url}/v1/messages`).

Parameter mapping:

| SamplingParams     | body field                                                            |
| ------------------ | --------------------------------------------------------------------- |
| system messages    | top-level `system` (joined with blank lines)                          |
| user, assistant    | `messages` in order (few-shot turns); consecutive turns of one role   |
|                    | are joined with blank lines, so user and assistant alternate          |
| temperature, top_p | `temperature`, `top_p` (newer models reject both at once; set one)    |
| max_tokens         | `max_tokens` (required by the API: 4096 when not set)                 |
| seed               | not sent: the Messages API has no seed                                |
| stop               | `stop_sequences`                                                      |
| thinking_budget    | `thinking: {type: enabled, budget_tokens}`; `max_tokens` is raised    |
|                    | to budget + max_tokens when it would not leave room for the answer    |
| reasoning_effort   | without a thinking_budget: minimal = no thinking, low = 1024,         |
|                    | medium = 4096, high = 16384 thinking tokens                           |
| reply_schema       | one tool (`name`, `input_schema`) and `tool_choice` forcing it; the   |
|                    | result's text is the tool call's `input` as JSON (Anthropic refuses   |
|                    | a forced tool with thinking: judges that think answer in text)        |

Prompt caching: the stable prefix (everything before the final message: the system prompt, any
earlier turns) carries `cache_control: {"type": "ephemeral"}` on its last block when it is long
enough and repeats; `cache_breakpoints.py` says which requests mark it and why.

Parsed: the text blocks of `content` (thinking blocks are skipped), or, for a request with a
reply schema, the `input` of its tool's `tool_use` block as canonical JSON, `stop_reason` normalised
(`end_turn`/`stop_sequence` -> `stop`, `max_tokens` -> `length`, `refusal` -> `content_filter`, a
failure), usage where input = `input_tokens` + `cache_creation_input_tokens` +
`cache_read_input_tokens`, cached input = `cache_read_input_tokens` and cache writes =
`cache_creation_input_tokens` (Anthropic does not report thinking tokens separately:
`reasoning_tokens` stays 0, they are inside `output_tokens`), the `request-id` header (else the
body's `id`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from itemeval.ids import canonical_json
from itemeval.providers._cache_breakpoints import (
    Breakpoint,
    CacheBreakpoints,
    marked_blocks,
    stable_prefix_length,
)
from itemeval.providers._failures import answer, failure
from itemeval.providers._transport import HttpProvider, MalformedBody
from itemeval.providers.types import ErrorCode, ModelRequest, ModelResult, SamplingParams, Usage

DEFAULT_MAX_TOKENS = 4096
#: Thinking budgets used for `reasoning_effort` when no `thinking_budget` is given (also Gemini).
EFFORT_BUDGETS = {"minimal": 0, "low": 1024, "medium": 4096, "high": 16384}

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def thinking_budget(params: SamplingParams) -> int | None:
    """The thinking budget sent (`thinking_budget`, else the one `reasoning_effort` maps to)."""
    if params.thinking_budget is not None:
        return params.thinking_budget
    if params.reasoning_effort is not None:
        return EFFORT_BUDGETS.get(params.reasoning_effort)
    return None


def wire_max_tokens(params: SamplingParams) -> int:
    """The `max_tokens` sent: the params' (4096 when unset), raised by the thinking budget when
    it would leave no room for the answer. Thinking counts inside it, so it bounds the output."""
    max_tokens = params.max_tokens or DEFAULT_MAX_TOKENS
    budget = thinking_budget(params)
    if budget and max_tokens <= budget:
        max_tokens += budget
    return max_tokens


def alternating(messages: Iterable[Mapping[str, str]]) -> list[tuple[str, str]]:
    """The conversation without system messages, consecutive turns of one role joined with
    blank lines: user and assistant alternate, as Anthropic's and Gemini's APIs want."""
    turns: list[tuple[str, str]] = []
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role == "system":
            continue
        if turns and turns[-1][0] == role:
            turns[-1] = (role, turns[-1][1] + "\n\n" + content)
        else:
            turns.append((role, content))
    return turns


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


#: The breakpoint of the request being encoded (set around `complete`; task-local).
_BREAKPOINT: ContextVar[Breakpoint | None] = ContextVar("anthropic_breakpoint", default=None)


class AnthropicMessagesProvider(HttpProvider):
    wire_name = "Anthropic messages"
    request_id_header = "request-id"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key}

    def url_for(self, request: ModelRequest) -> str:
        return f"{self.base_url}/v1/messages"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._headers.setdefault("anthropic-version", self.settings.anthropic_version)
        self.breakpoints = CacheBreakpoints()

    async def complete(self, request: ModelRequest) -> ModelResult:
        mark = await self.breakpoints.choose(request.model, request.messages)
        token = _BREAKPOINT.set(mark)
        result: ModelResult | None = None
        try:
            result = await super().complete(request)
        finally:
            _BREAKPOINT.reset(token)
            if mark is not None:  # also when cancelled: a write's waiters must not wait on
                self.breakpoints.settle(mark, result or ModelResult(ok=False))
        return result

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        params = request.params
        system = [m.get("content") or "" for m in request.messages if m["role"] == "system"]
        messages: list[dict[str, Any]] = [
            {"role": role, "content": content} for role, content in alternating(request.messages)
        ]
        body: dict[str, Any] = {"model": request.model, "messages": messages}
        if system:
            body["system"] = "\n\n".join(system)
        if _BREAKPOINT.get() is not None:
            _mark_prefix(body, request.messages)
        budget = thinking_budget(params)
        if budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body["max_tokens"] = wire_max_tokens(params)
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.top_p is not None:
            body["top_p"] = params.top_p
        if params.stop:
            body["stop_sequences"] = list(params.stop)
        if request.reply_schema is not None:
            schema = request.reply_schema
            body["tools"] = [
                {
                    "name": schema.name,
                    "description": schema.description,
                    "input_schema": schema.schema,
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": schema.name}
        return body

    def parse_success(self, body: Any, request_id: str | None) -> ModelResult:
        if not isinstance(body, dict) or not isinstance(body.get("content"), list):
            raise MalformedBody("no `content` list")
        request_id = request_id or body.get("id")
        usage = parse_usage(body.get("usage"))
        parts: list[str] = []
        tool_input: str | None = None
        for block in body["content"]:
            if not isinstance(block, dict):
                raise MalformedBody("a `content` block is not an object")
            if block.get("type") == "tool_use" and tool_input is None:
                # Structured output: the forced tool's input is the reply, not the text beside.
                tool_input = canonical_json(block.get("input"))
            elif block.get("type") == "text":
                text = block.get("text")
                if not isinstance(text, str):
                    raise MalformedBody("a text block has no `text` string")
                parts.append(text)
        text = "".join(parts) if tool_input is None else tool_input
        raw_reason = body.get("stop_reason")
        finish = _STOP_REASONS.get(raw_reason, raw_reason) if raw_reason else None
        if finish == "content_filter":
            return failure(
                ErrorCode.CONTENT_FILTER,
                "the model refused (stop_reason 'refusal')",
                request_id=request_id,
                text=text,
                finish_reason=finish,
                http_status=200,
                usage=usage,
            )
        return answer(
            text,
            finish_reason=finish,
            usage=usage,
            request_id=request_id,
            reason_field="stop_reason",
            raw_reason=raw_reason,
        )

    def parse_error(self, body: Any) -> tuple[str, str, str]:
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            return str(error.get("type") or ""), "", str(error.get("message") or "")
        return "", "", str(body.get("message") or "")


def _mark_prefix(body: dict[str, Any], messages: tuple[dict[str, str], ...]) -> None:
    """Put the breakpoint on the last block of the stable prefix (all but the final message):
    the last earlier turn, else the system prompt."""
    prefix = messages[: stable_prefix_length(messages)]
    turns = len(alternating(prefix))
    if turns == len(body["messages"]):  # the final message was joined to the prefix's last turn
        turns -= 1
    if turns:
        target = body["messages"][turns - 1]
        target["content"] = marked_blocks(target["content"])
    elif "system" in body:
        body["system"] = marked_blocks(body["system"])


def parse_usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    cache_read = _int(usage.get("cache_read_input_tokens"))
    cache_write = _int(usage.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=_int(usage.get("input_tokens")) + cache_read + cache_write,
        output_tokens=_int(usage.get("output_tokens")),
        cached_input_tokens=cache_read,
        reasoning_tokens=0,
        cache_write_input_tokens=cache_write,
    )
