"""The three wire formats of the sim-server: request bodies in, answers and errors out.

`OPENAI` (chat completions), `ANTHROPIC` (messages) and `GEMINI` (generateContent) each parse a
request body into a `Call`, and write a `SimReply` the way that provider does: a structured
reply (`structured.py`) as its tool call when the request forced one, and prompt caching and
hidden reasoning as it reports them:

* OpenAI: cached prompt tokens in `usage.prompt_tokens_details.cached_tokens` (part of
  `prompt_tokens`); reasoning in `completion_tokens_details.reasoning_tokens` (part of
  `completion_tokens`).
* Anthropic: `cache_read_input_tokens` and `cache_creation_input_tokens` (with
  `cache_creation` split by TTL) beside `input_tokens`, which counts only what follows the last
  breakpoint; reasoning as a `thinking` content block before the text, its tokens in
  `output_tokens` (and `output_tokens_details.thinking_tokens`).
* Gemini: `usageMetadata.cachedContentTokenCount` (part of `promptTokenCount`); reasoning in
  `thoughtsTokenCount` (beside `candidatesTokenCount`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from aiohttp import web

from itemeval.simulator._engine import SimReply
from itemeval.simulator._limits import Limiter
from itemeval.simulator._model import model_name
from itemeval.simulator._prompt_cache import (
    NO_CACHE,
    CacheUsage,
    PromptCache,
    anthropic_breakpoints,
)
from itemeval.simulator._stats import ROUTE_ANTHROPIC, ROUTE_GEMINI, ROUTE_OPENAI
from itemeval.simulator._structured import (
    Output,
    anthropic_output,
    gemini_field,
    gemini_output,
    openai_output,
    tool_arguments,
)

JSON_TYPE = "application/json"
#: Anthropic's smallest thinking budget.
MIN_THINKING_BUDGET = 1024


@dataclass(slots=True)
class Call:
    """One parsed request: what the simulator needs, whatever the wire format."""

    model: str
    messages: list[dict[str, Any]]
    hints: Any = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    breakpoints: int = 0  # Anthropic cache_control markers (the top-level one included)
    cache_control: Any = None  # Anthropic's top-level (automatic) cache_control
    #: the structured output asked for (`structured.py`), else None
    output: Output | None = None
    show_thinking: bool = False  # Gemini's includeThoughts: thought parts in the reply


class Wire:
    """How one wire format reads requests and writes successes, errors and limit headers."""

    name = ""
    route = ""
    request_id_header = "x-request-id"
    malformed = b'{"id": "x", "choices": [{"index": 0, "mess'

    def parse(self, body: Any, model: str | None = None) -> Call:
        raise NotImplementedError

    def success(
        self,
        model: str,
        reply: SimReply,
        serial: int,
        cache: CacheUsage,
        *,
        batch: bool = False,
        call: Call | None = None,
    ) -> dict[str, Any]:
        """The body of an answer; `call` says how it was asked (a tool call, shown thinking)."""
        raise NotImplementedError

    def error_body(self, status: int, kind: str, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def prompt_cache(
        self, cache: PromptCache, call: Call, prompt_tokens: int, min_tokens: int
    ) -> CacheUsage:
        """Automatic prefix caching (OpenAI, Gemini); Anthropic overrides it."""
        if prompt_tokens < min_tokens:  # the common case, decided before any work
            return NO_CACHE
        scope = f"{self.name}\x00{model_name(call.model)}"
        read = cache.automatic(scope, call.messages, prompt_tokens, min_tokens)
        return CacheUsage(read) if read else NO_CACHE

    def limit_headers(self, limiter: Limiter) -> dict[str, str]:
        return limiter.openai_headers()

    def error(
        self, status: int, kind: str, message: str, headers: Mapping[str, str]
    ) -> web.Response:
        return web.Response(
            status=status,
            body=json.dumps(self.error_body(status, kind, message)).encode(),
            content_type=JSON_TYPE,
            headers=dict(headers),
        )

    def rate_limited(self, wait_s: float, headers: dict[str, str]) -> web.Response:
        headers["retry-after"] = str(max(1, math.ceil(wait_s)))
        headers["retry-after-ms"] = str(max(1, math.ceil(wait_s * 1000)))
        return self.error(429, "rate_limit", "rate limit exceeded, please retry later", headers)


# --------------------------------------------------------------------------- OpenAI


class OpenAIWire(Wire):
    name = "openai"
    route = ROUTE_OPENAI
    _ERROR_TYPES: ClassVar[dict[str, Any]] = {
        "invalid_request": ("invalid_request_error", None),
        "not_found": ("invalid_request_error", "model_not_found"),
        "rate_limit": ("requests", "rate_limit_exceeded"),
        "server_error": ("server_error", None),
    }

    def parse(self, body: Any, model: str | None = None) -> Call:
        if body.get("stream"):
            raise ValueError("streaming is not supported by the simulator")
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            raise ValueError("`messages` must be a non-empty list")
        return Call(
            str(body["model"]),
            messages,
            hints=body.get("itemeval_sim"),
            max_tokens=body.get("max_completion_tokens") or body.get("max_tokens"),
            reasoning_effort=body.get("reasoning_effort"),
            output=openai_output(body),
        )

    def success(
        self,
        model: str,
        reply: SimReply,
        serial: int,
        cache: CacheUsage,
        *,
        batch: bool = False,
        call: Call | None = None,
    ) -> dict[str, Any]:
        usage = reply.usage
        message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
        finish = reply.finish_reason
        output = call.output if call else None
        if output and output.form == "tool" and tool_arguments(reply.text) is not None:
            function = {"name": output.name, "arguments": reply.text}
            message["content"] = None
            message["tool_calls"] = [
                {"id": f"call_sim{serial}", "type": "function", "function": function}
            ]
            if finish == "stop" and not output.named:
                finish = "tool_calls"
        return {
            "id": f"chatcmpl-sim{serial}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": usage.input_tokens,
                "completion_tokens": usage.output_tokens,
                "total_tokens": usage.input_tokens + usage.output_tokens,
                "prompt_tokens_details": {"cached_tokens": cache.read},
                "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            },
            "service_tier": "default",
            "system_fingerprint": "itemeval-sim",
        }

    def error_body(self, status: int, kind: str, message: str) -> dict[str, Any]:
        error_type, code = self._ERROR_TYPES.get(kind, (kind, None))
        return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


# --------------------------------------------------------------------------- Anthropic


class AnthropicWire(Wire):
    name = "anthropic"
    route = ROUTE_ANTHROPIC
    request_id_header = "request-id"
    malformed = b'{"id": "msg_x", "type": "message", "content": [{"type": "te'
    _ERROR_TYPES: ClassVar[dict[str, Any]] = {
        "invalid_request": "invalid_request_error",
        "not_found": "not_found_error",
        "rate_limit": "rate_limit_error",
        "server_error": "api_error",
    }
    _STOP: ClassVar[dict[str, Any]] = {"stop": "end_turn", "length": "max_tokens"}

    def parse(self, body: Any, model: str | None = None) -> Call:
        if body.get("stream"):
            raise ValueError("streaming is not supported by the simulator")
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            raise ValueError("max_tokens: field required")
        messages = list(body["messages"])
        system = body.get("system")
        if system:
            messages.insert(0, {"role": "system", "content": system})
        thinking = body.get("thinking") or {}
        budget = None
        if thinking.get("type") == "adaptive":
            budget = -1  # on, the model decides how much (as Gemini's dynamic budget)
        elif thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
                raise ValueError(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal "
                    f"to {MIN_THINKING_BUDGET}"
                )
            if max_tokens <= budget:
                raise ValueError("`max_tokens` must be greater than `thinking.budget_tokens`")
        top_level = body.get("cache_control")
        return Call(
            str(body["model"]),
            messages,
            hints=body.get("itemeval_sim"),
            max_tokens=max_tokens,
            thinking_budget=budget,
            breakpoints=anthropic_breakpoints(messages, top_level),
            cache_control=top_level,
            output=anthropic_output(body, thinking=budget is not None),
        )

    def prompt_cache(
        self, cache: PromptCache, call: Call, prompt_tokens: int, min_tokens: int
    ) -> CacheUsage:
        if not call.breakpoints:
            return NO_CACHE
        scope = f"{self.name}\x00{model_name(call.model)}"
        return cache.explicit(scope, call.messages, call.cache_control, min_tokens)

    def success(
        self,
        model: str,
        reply: SimReply,
        serial: int,
        cache: CacheUsage,
        *,
        batch: bool = False,
        call: Call | None = None,
    ) -> dict[str, Any]:
        usage = reply.usage
        content: list[dict[str, Any]] = []
        if usage.reasoning_tokens:
            content.append(
                {
                    "type": "thinking",
                    "thinking": reply.reasoning_summary,
                    "signature": _signature(reply.reasoning_summary),
                }
            )
        output = call.output if call else None
        tool_input = tool_arguments(reply.text) if output and output.form == "tool" else None
        stop = self._STOP.get(reply.finish_reason, reply.finish_reason)
        if output and tool_input is not None:
            tool = {"type": "tool_use", "id": f"toolu_sim{serial}", "name": output.name}
            content.append(tool | {"input": tool_input})
            stop = "tool_use" if stop == "end_turn" else stop
        else:
            content.append({"type": "text", "text": reply.text})
        return {
            "id": f"msg_sim{serial}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage.input_tokens - cache.read - cache.written,
                "cache_creation_input_tokens": cache.written,
                "cache_read_input_tokens": cache.read,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": cache.write_5m,
                    "ephemeral_1h_input_tokens": cache.write_1h,
                },
                "output_tokens": usage.output_tokens,
                "output_tokens_details": {"thinking_tokens": usage.reasoning_tokens},
                "service_tier": "batch" if batch else "standard",
            },
        }

    def error_body(self, status: int, kind: str, message: str) -> dict[str, Any]:
        error_type = self._ERROR_TYPES.get(kind, kind)
        return {"type": "error", "error": {"type": error_type, "message": message}}

    def limit_headers(self, limiter: Limiter) -> dict[str, str]:
        return limiter.anthropic_headers()


def _signature(text: str) -> str:
    """An opaque, stable stand-in for the signature Anthropic puts on thinking blocks."""
    return base64.b64encode(hashlib.blake2b(text.encode(), digest_size=48).digest()).decode()


# --------------------------------------------------------------------------- Gemini


class GeminiWire(Wire):
    name = "gemini"
    route = ROUTE_GEMINI
    request_id_header = "x-goog-request-id"
    malformed = b'{"candidates": [{"content": {"parts": [{"te'
    _STATUS: ClassVar[dict[str, Any]] = {
        "invalid_request": "INVALID_ARGUMENT",
        "not_found": "NOT_FOUND",
        "rate_limit": "RESOURCE_EXHAUSTED",
        "server_error": "INTERNAL",
    }
    _FINISH: ClassVar[dict[str, Any]] = {"stop": "STOP", "length": "MAX_TOKENS"}

    def parse(self, body: Any, model: str | None = None) -> Call:
        # Fields in either spelling (camelCase or snake_case), as Gemini's JSON reader takes both.
        messages: list[dict[str, Any]] = []
        system = gemini_field(body, "systemInstruction")
        if system:
            messages.append({"role": "system", "content": system.get("parts", [])})
        for content in body["contents"]:
            messages.append({"role": content.get("role", "user"), "content": content["parts"]})
        config = gemini_field(body, "generationConfig") or {}
        thinking = gemini_field(config, "thinkingConfig") or {}
        level = gemini_field(thinking, "thinkingLevel")
        return Call(
            (model or "").removeprefix("models/"),
            messages,
            hints=body.get("itemeval_sim"),
            max_tokens=_integer(gemini_field(config, "maxOutputTokens")),
            reasoning_effort=str(level).lower() if level else None,
            thinking_budget=_integer(gemini_field(thinking, "thinkingBudget")),
            output=gemini_output(body, config),
            show_thinking=bool(gemini_field(thinking, "includeThoughts")),
        )

    def success(
        self,
        model: str,
        reply: SimReply,
        serial: int,
        cache: CacheUsage,
        *,
        batch: bool = False,
        call: Call | None = None,
    ) -> dict[str, Any]:
        usage = reply.usage
        metadata = {
            "promptTokenCount": usage.input_tokens,
            "candidatesTokenCount": usage.output_tokens - usage.reasoning_tokens,
            "thoughtsTokenCount": usage.reasoning_tokens,
            "totalTokenCount": usage.input_tokens + usage.output_tokens,
        }
        if cache.read:  # Gemini sends the field only when something was cached
            metadata["cachedContentTokenCount"] = cache.read
        parts: list[dict[str, Any]] = []
        if call and call.show_thinking and usage.reasoning_tokens:
            parts.append({"text": reply.reasoning_summary, "thought": True})
        output = call.output if call else None
        arguments = tool_arguments(reply.text) if output and output.form == "tool" else None
        if output and arguments is not None:
            parts.append({"functionCall": {"name": output.name, "args": arguments}})
        else:
            parts.append({"text": reply.text})
        return {
            "candidates": [
                {
                    "content": {"parts": parts, "role": "model"},
                    "finishReason": self._FINISH.get(reply.finish_reason, "OTHER"),
                    "index": 0,
                }
            ],
            "usageMetadata": metadata,
            "modelVersion": model,
            "responseId": f"sim{serial}",
        }

    def error_body(self, status: int, kind: str, message: str) -> dict[str, Any]:
        return {
            "error": {"code": status, "message": message, "status": self._STATUS.get(kind, kind)}
        }


def _integer(value: Any) -> int | None:
    """An integer field (Gemini's JSON may carry int64 as a string)."""
    return None if value is None else int(value)


OPENAI = OpenAIWire()
ANTHROPIC = AnthropicWire()
GEMINI = GeminiWire()
