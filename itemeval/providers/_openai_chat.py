"""OpenAI-compatible chat completions (`POST {base_url}/chat/completions`).

Covers OpenAI and every host that speaks its wire format (vLLM, Ollama, OpenRouter, Together,
Groq, ...). Parameter mapping:

| SamplingParams     | body field                                                        |
| ------------------ | ----------------------------------------------------------------- |
| messages           | `messages` as given: system messages (several are kept as they    |
|                    | are), then the user and assistant turns (few-shot examples)       |
| temperature, top_p | `temperature`, `top_p`                                            |
| max_tokens         | `max_completion_tokens` on api.openai.com, `max_tokens` elsewhere |
|                    | (endpoint setting `max_tokens_param` overrides)                   |
| seed               | `seed`                                                            |
| stop               | `stop` (a list)                                                   |
| reasoning_effort   | `reasoning_effort`                                                |
| thinking_budget    | not sent: chat completions has no token budget for reasoning;     |
|                    | use `reasoning_effort`                                            |
| reply_schema       | `response_format: {type: json_schema, json_schema: {name, strict: |
|                    | true, schema}}` (structured output; the content is the JSON)      |

Parsed: `choices[0].message.content` (a `refusal` with no content is `content_filter`),
`finish_reason` (`content_filter` is a failure), usage with
`prompt_tokens_details.cached_tokens` and `completion_tokens_details.reasoning_tokens`, the
`x-request-id` header (else the body's `id`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from itemeval.providers._failures import answer, failure
from itemeval.providers._transport import HttpProvider, MalformedBody
from itemeval.providers.types import ErrorCode, ModelRequest, ModelResult, Usage


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


class OpenAIChatProvider(HttpProvider):
    wire_name = "OpenAI chat completions"
    request_id_header = "x-request-id"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def url_for(self, request: ModelRequest) -> str:
        return f"{self.base_url}/chat/completions"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        field = self.settings.max_tokens_param
        if field is None:
            host = urlsplit(self.base_url).hostname or ""
            # OpenAI deprecated max_tokens (reasoning models reject it); compatible hosts such as
            # vLLM and Ollama know max_tokens best.
            field = "max_completion_tokens" if host == "api.openai.com" else "max_tokens"
        self.max_tokens_field = field

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        params = request.params
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [
                {"role": m["role"], "content": m.get("content") or ""} for m in request.messages
            ],
        }
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.top_p is not None:
            body["top_p"] = params.top_p
        if params.max_tokens is not None:
            body[self.max_tokens_field] = params.max_tokens
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if params.reasoning_effort is not None:
            body["reasoning_effort"] = params.reasoning_effort
        if request.reply_schema is not None:
            schema = request.reply_schema
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": schema.name,
                    "description": schema.description,
                    "strict": True,
                    "schema": schema.schema,
                },
            }
        return body

    def parse_success(self, body: Any, request_id: str | None) -> ModelResult:
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
            raise MalformedBody("no `choices` list")
        request_id = request_id or body.get("id")
        usage = parse_usage(body.get("usage"))
        if not body["choices"]:
            raise MalformedBody("`choices` is empty")
        choice = body["choices"][0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise MalformedBody("`choices[0].message` is missing")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise MalformedBody("`message.content` is not a string")
        text = content or ""
        finish = choice.get("finish_reason")
        if finish == "content_filter" or (not text and message.get("refusal")):
            reason = message.get("refusal") or "the provider filtered the output"
            return failure(
                ErrorCode.CONTENT_FILTER,
                f"content filter: {reason}",
                request_id=request_id,
                text=text,
                finish_reason="content_filter",
                http_status=200,
                usage=usage,
            )
        return answer(
            text,
            finish_reason=finish,
            usage=usage,
            request_id=request_id,
            reason_field="finish_reason",
            raw_reason=finish,
        )

    def parse_error(self, body: Any) -> tuple[str, str, str]:
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            return (
                str(error.get("type") or ""),
                str(error.get("code") or ""),
                str(error.get("message") or ""),
            )
        if isinstance(error, str):  # some compatible hosts (e.g. older Ollama)
            return "", "", error
        return "", "", str(body.get("message") or body.get("detail") or "")


def parse_usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=_int(usage.get("prompt_tokens")),
        output_tokens=_int(usage.get("completion_tokens")),
        cached_input_tokens=_int(prompt_details.get("cached_tokens")),
        reasoning_tokens=_int(completion_details.get("reasoning_tokens")),
    )
