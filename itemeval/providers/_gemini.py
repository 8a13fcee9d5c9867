"""Google Gemini `generateContent` (`POST {base_url}/models/{model}:generateContent`).

The key travels in the `x-goog-api-key` header (never in the URL, which appears in messages).
Parameter mapping:

| SamplingParams     | body field                                                            |
| ------------------ | --------------------------------------------------------------------- |
| system messages    | `systemInstruction` (joined); `assistant` turns become role `model`   |
| user, assistant    | `contents` in order (few-shot turns); consecutive turns of one role   |
|                    | are joined with blank lines, so user and model alternate              |
| temperature, top_p | `generationConfig.temperature`, `generationConfig.topP`               |
| max_tokens         | `generationConfig.maxOutputTokens`                                    |
| seed               | `generationConfig.seed`                                               |
| stop               | `generationConfig.stopSequences`                                      |
| thinking_budget    | `generationConfig.thinkingConfig.thinkingBudget`                      |
| reasoning_effort   | without a thinking_budget: thinkingBudget minimal = 0, low = 1024,    |
|                    | medium = 4096, high = 16384                                           |
| reply_schema       | `generationConfig.responseMimeType: application/json` and             |
|                    | `responseSchema` (the schema in Gemini's OpenAPI subset)              |

Parsed: the text parts of `candidates[0].content` (parts marked `thought` are skipped),
`finishReason` normalised (`STOP` -> `stop`, `MAX_TOKENS` -> `length`, `SAFETY`, `RECITATION`,
`BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII` -> `content_filter`, a failure), a prompt blocked by
`promptFeedback.blockReason` (content_filter), `usageMetadata` where output =
`candidatesTokenCount` + `thoughtsTokenCount` (thoughts are billed as output), cached input =
`cachedContentTokenCount`, reasoning = `thoughtsTokenCount`, and `responseId`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from itemeval.providers._anthropic_messages import alternating, thinking_budget
from itemeval.providers._failures import answer, failure
from itemeval.providers._transport import HttpProvider, MalformedBody
from itemeval.providers.types import ErrorCode, ModelRequest, ModelResult, Usage

_FILTERED = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
)
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


class GeminiProvider(HttpProvider):
    wire_name = "Gemini generateContent"
    request_id_header = "x-goog-request-id"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-goog-api-key": key}

    def url_for(self, request: ModelRequest) -> str:
        model = request.model.removeprefix("models/")
        return f"{self.base_url}/models/{quote(model, safe='/')}:generateContent"

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        params = request.params
        system = [m.get("content") or "" for m in request.messages if m["role"] == "system"]
        contents = [
            {"role": "model" if role == "assistant" else "user", "parts": [{"text": content}]}
            for role, content in alternating(request.messages)
        ]
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
        config: dict[str, Any] = {}
        if params.temperature is not None:
            config["temperature"] = params.temperature
        if params.top_p is not None:
            config["topP"] = params.top_p
        if params.max_tokens is not None:
            config["maxOutputTokens"] = params.max_tokens
        if params.seed is not None:
            config["seed"] = params.seed
        if params.stop:
            config["stopSequences"] = list(params.stop)
        budget = thinking_budget(params)
        if budget is not None:
            config["thinkingConfig"] = {"thinkingBudget": budget}
        if request.reply_schema is not None:
            config["responseMimeType"] = "application/json"
            config["responseSchema"] = response_schema(request.reply_schema.schema)
        if config:
            body["generationConfig"] = config
        return body

    def parse_success(self, body: Any, request_id: str | None) -> ModelResult:
        if not isinstance(body, dict):
            raise MalformedBody("the body is not an object")
        request_id = body.get("responseId") or request_id
        usage = parse_usage(body.get("usageMetadata"))
        candidates = body.get("candidates")
        feedback = body.get("promptFeedback") or {}
        if not candidates:
            if feedback.get("blockReason"):
                return failure(
                    ErrorCode.CONTENT_FILTER,
                    f"prompt blocked ({feedback['blockReason']})",
                    request_id=request_id,
                    finish_reason="content_filter",
                    http_status=200,
                    usage=usage,
                )
            raise MalformedBody("no `candidates`")
        candidate = candidates[0]
        if not isinstance(candidate, dict):
            raise MalformedBody("`candidates[0]` is not an object")
        raw_reason = candidate.get("finishReason")
        parts = (candidate.get("content") or {}).get("parts") or []
        texts: list[str] = []
        for part in parts:
            if not isinstance(part, dict):
                raise MalformedBody("a content part is not an object")
            if part.get("thought"):
                continue
            text = part.get("text")
            if isinstance(text, str):
                texts.append(text)
        text = "".join(texts)
        if raw_reason in _FILTERED:
            return failure(
                ErrorCode.CONTENT_FILTER,
                f"the output was filtered (finishReason {raw_reason})",
                request_id=request_id,
                text=text,
                finish_reason="content_filter",
                http_status=200,
                usage=usage,
            )
        finish = _FINISH.get(raw_reason, raw_reason.lower()) if raw_reason else None
        return answer(
            text,
            finish_reason=finish,
            usage=usage,
            request_id=request_id,
            reason_field="finishReason",
            raw_reason=raw_reason,
        )

    def parse_error(self, body: Any) -> tuple[str, str, str]:
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            return "", "", ""
        reasons = [
            str(d.get("reason"))
            for d in error.get("details") or []
            if isinstance(d, dict) and d.get("reason")
        ]
        return str(error.get("status") or ""), " ".join(reasons), str(error.get("message") or "")


def parse_usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    thoughts = _int(usage.get("thoughtsTokenCount"))
    return Usage(
        input_tokens=_int(usage.get("promptTokenCount")),
        output_tokens=_int(usage.get("candidatesTokenCount")) + thoughts,
        cached_input_tokens=_int(usage.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
    )


def response_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema as Gemini's `responseSchema` (its OpenAPI subset): without
    `additionalProperties`, properties kept in their order (`propertyOrdering`)."""
    out: dict[str, Any] = {
        key: value for key, value in schema.items() if key not in ("additionalProperties",)
    }
    properties = schema.get("properties")
    if isinstance(properties, dict):
        out["properties"] = {name: response_schema(value) for name, value in properties.items()}
        out["propertyOrdering"] = list(properties)
    return out
