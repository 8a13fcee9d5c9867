"""The three clients against response bodies written from the providers' public API references.

A small local aiohttp server (`provider_wire_server.py`) returns the canned bodies; each client must
turn them into the right `ModelResult`: text, finish reason, usage with cached and reasoning
tokens, request id, and on failure the stable error code, with no secret in any message.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from provider_wire_server import Canned, WireServer

from itemeval.providers import (
    EndpointSettings,
    ErrorCode,
    ModelRequest,
    ModelResult,
    SamplingParams,
    Usage,
    make_bucket,
    make_provider,
)
from itemeval.providers.limits import LocalPermitSource

KEY = "sk-canary-0123456789abcdef"
RETRY_FAST = {"retry-after-ms": "10"}

# --------------------------------------------------------------------------- OpenAI bodies

OPENAI_OK = {
    "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
    "object": "chat.completion",
    "created": 1741570283,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "The answer is B.",
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 1117,
        "completion_tokens": 46,
        "total_tokens": 1163,
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 32,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    },
    "service_tier": "default",
    "system_fingerprint": "fp_fc9f1d7035",
}


def openai_choice(content: Any, finish: str, refusal: str | None = None) -> dict[str, Any]:
    body = {**OPENAI_OK, "choices": [dict(OPENAI_OK["choices"][0])]}
    body["choices"][0]["message"] = {"role": "assistant", "content": content, "refusal": refusal}
    body["choices"][0]["finish_reason"] = finish
    return body


def openai_error(message: str, type_: str, code: str | None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


OPENAI = {
    "ok": Canned(200, OPENAI_OK, {"x-request-id": "req_7f3a9c"}),
    "filtered": Canned(200, openai_choice("Partial", "content_filter")),
    "refusal": Canned(200, openai_choice(None, "stop", "I'm sorry, I can't help with that.")),
    "empty": Canned(200, openai_choice("", "stop")),
    "length_empty": Canned(200, openai_choice("", "length")),
    "context": Canned(
        400,
        openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130512 tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        ),
    ),
    "policy": Canned(
        400,
        openai_error(
            "Your request was rejected as a result of our safety system.",
            "invalid_request_error",
            "content_policy_violation",
        ),
    ),
    "auth": Canned(
        401,
        openai_error(
            f"Incorrect API key provided: {KEY}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            "invalid_api_key",
        ),
    ),
    "model": Canned(
        404,
        openai_error(
            "The model `gpt-9` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
    ),
    "unprocessable": Canned(422, {"detail": [{"loc": ["body", "messages"], "msg": "bad"}]}),
    "ratelimit": Canned(
        429,
        openai_error(
            "Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): "
            "Limit 500, Used 500, Requested 1. Please try again in 120ms.",
            "requests",
            "rate_limit_exceeded",
        ),
        {
            **RETRY_FAST,
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "120ms",
        },
    ),
    "server": Canned(
        500,
        openai_error(
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
        ),
        RETRY_FAST,
    ),
    "html": Canned(200, "<html><body>502 Bad Gateway</body></html>"),
    "shape": Canned(200, {"object": "list", "data": []}),
    "slow": Canned(200, OPENAI_OK, delay_s=0.6),
}

# --------------------------------------------------------------------------- Anthropic bodies

ANTHROPIC_OK = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "thinking", "thinking": "The options are...", "signature": "EqQBCgIYAhIM"},
        {"type": "text", "text": "The answer is B."},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 25,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "output_tokens": 60,
        "service_tier": "standard",
    },
}


def anthropic_error(type_: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": type_, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


ANTHROPIC = {
    "ok": Canned(200, ANTHROPIC_OK, {"request-id": "req_018EeWyXxfu5pfWkrYcMdjWG"}),
    "length": Canned(200, {**ANTHROPIC_OK, "stop_reason": "max_tokens"}),
    "refusal": Canned(200, {**ANTHROPIC_OK, "content": [], "stop_reason": "refusal"}),
    "empty": Canned(200, {**ANTHROPIC_OK, "content": []}),
    "context": Canned(
        400,
        anthropic_error(
            "invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum"
        ),
    ),
    "too_large": Canned(
        413, anthropic_error("request_too_large", "Request exceeds the maximum size")
    ),
    "bad": Canned(400, anthropic_error("invalid_request_error", "messages: field required")),
    "auth": Canned(401, anthropic_error("authentication_error", "invalid x-api-key")),
    "permission": Canned(
        403, anthropic_error("permission_error", "Your API key does not have permission")
    ),
    "ratelimit": Canned(
        429,
        anthropic_error(
            "rate_limit_error", "This request would exceed your organization's rate limit."
        ),
        {"retry-after": "0.01"},
    ),
    "server": Canned(500, anthropic_error("api_error", "Internal server error"), RETRY_FAST),
    "overloaded": Canned(529, anthropic_error("overloaded_error", "Overloaded"), RETRY_FAST),
    "html": Canned(200, b"\x00\x01not json"),
}

# --------------------------------------------------------------------------- Gemini bodies

GEMINI_USAGE = {
    "promptTokenCount": 1200,
    "candidatesTokenCount": 8,
    "totalTokenCount": 1408,
    "cachedContentTokenCount": 1024,
    "thoughtsTokenCount": 200,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1200}],
}
GEMINI_OK = {
    "candidates": [
        {
            "content": {
                "parts": [
                    {"text": "Considering each option...", "thought": True},
                    {"text": "The answer is B."},
                ],
                "role": "model",
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": GEMINI_USAGE,
    "modelVersion": "gemini-2.5-flash",
    "responseId": "mAitaLmkHPPlz7IPvtfUqQ4",
}


def gemini_error(code: int, status: str, message: str, reason: str | None = None) -> dict:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if reason:
        error["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "googleapis.com",
            }
        ]
    return {"error": error}


GEMINI = {
    "ok": Canned(200, GEMINI_OK),
    "safety": Canned(
        200,
        {
            "candidates": [
                {
                    "finishReason": "SAFETY",
                    "index": 0,
                    "safetyRatings": [
                        {
                            "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                            "probability": "HIGH",
                            "blocked": True,
                        }
                    ],
                }
            ],
            "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
        },
    ),
    "blocked": Canned(
        200,
        {
            "promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []},
            "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8},
            "modelVersion": "gemini-2.0-flash",
        },
    ),
    "max_tokens_empty": Canned(
        200,
        {
            "candidates": [{"content": {"role": "model"}, "finishReason": "MAX_TOKENS"}],
            "usageMetadata": GEMINI_USAGE,
        },
    ),
    "auth": Canned(
        400,
        gemini_error(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            "API_KEY_INVALID",
        ),
    ),
    "context": Canned(
        400,
        gemini_error(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
        ),
    ),
    "denied": Canned(403, gemini_error(403, "PERMISSION_DENIED", "Permission denied")),
    "missing": Canned(404, gemini_error(404, "NOT_FOUND", "models/gemini-9 is not found")),
    "ratelimit": Canned(
        429,
        gemini_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
        ),
        RETRY_FAST,
    ),
    "unavailable": Canned(
        503,
        gemini_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
        RETRY_FAST,
    ),
    "shape": Canned(200, {"candidates": "nope"}),
}

FIXTURES = {
    **{f"oa_{k}": v for k, v in OPENAI.items()},
    **{f"an_{k}": v for k, v in ANTHROPIC.items()},
    **{f"ge_{k}": v for k, v in GEMINI.items()},
}

REQUEST = ModelRequest(
    model="some-model",
    messages=(
        {"role": "system", "content": "Answer with a letter."},
        {"role": "user", "content": "Which? A) 1 B) 2"},
    ),
    params=SamplingParams(temperature=0.0, max_tokens=64),
)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITEMEVAL_TEST_WIRE_KEY", KEY)


def settings(kind: str, base_url: str, **extra: Any) -> EndpointSettings:
    values: dict[str, Any] = {
        "kind": kind,
        "base_url": base_url,
        "api_key_env": "ITEMEVAL_TEST_WIRE_KEY",
        "max_attempts": 2,
        "max_rate_limited_attempts": 2,
        "backoff_initial_s": 0.01,
        "backoff_max_s": 0.02,
    }
    values.update(extra)
    return EndpointSettings(**values)


def call(kind: str, fixture: str, request: ModelRequest = REQUEST, **extra: Any) -> ModelResult:
    async def main() -> ModelResult:
        async with WireServer(FIXTURES) as server:
            provider = make_provider(settings(kind, server.url(fixture), **extra))
            try:
                return await provider.complete(request)
            finally:
                await provider.aclose()

    return asyncio.run(main())


def assert_clean(result: ModelResult) -> None:
    assert KEY not in (result.error_message or "")
    assert KEY not in repr(result)


# --------------------------------------------------------------------------- successes


def test_openai_success_with_usage_details() -> None:
    result = call("openai", "oa_ok")
    assert result.ok and result.text == "The answer is B."
    assert result.finish_reason == "stop"
    assert result.usage == Usage(1117, 46, cached_input_tokens=1024, reasoning_tokens=32)
    assert result.request_id == "req_7f3a9c"
    assert result.http_status == 200 and result.attempts == 1 and result.latency_ms > 0


def test_anthropic_success_counts_cache_reads_and_writes_as_input() -> None:
    result = call("anthropic", "an_ok")
    assert result.ok and result.text == "The answer is B."  # the thinking block is skipped
    assert result.finish_reason == "stop"
    assert result.usage == Usage(
        1125, 60, cached_input_tokens=1000, reasoning_tokens=0, cache_write_input_tokens=100
    )
    assert result.request_id == "req_018EeWyXxfu5pfWkrYcMdjWG"


def test_gemini_success_counts_thoughts_as_output() -> None:
    result = call("gemini", "ge_ok")
    assert result.ok and result.text == "The answer is B."  # the thought part is skipped
    assert result.finish_reason == "stop"
    assert result.usage == Usage(1200, 208, cached_input_tokens=1024, reasoning_tokens=200)
    assert result.request_id == "mAitaLmkHPPlz7IPvtfUqQ4"


def test_anthropic_max_tokens_is_length() -> None:
    result = call("anthropic", "an_length")
    assert result.ok and result.finish_reason == "length"


# --------------------------------------------------------------------------- failures

CASES = [
    ("openai", "oa_filtered", ErrorCode.CONTENT_FILTER, 200),
    ("openai", "oa_refusal", ErrorCode.CONTENT_FILTER, 200),
    ("openai", "oa_empty", ErrorCode.EMPTY_OUTPUT, 200),
    ("openai", "oa_length_empty", ErrorCode.EMPTY_OUTPUT, 200),
    ("openai", "oa_context", ErrorCode.CONTEXT_LENGTH, 400),
    ("openai", "oa_policy", ErrorCode.CONTENT_FILTER, 400),
    ("openai", "oa_auth", ErrorCode.AUTH, 401),
    ("openai", "oa_model", ErrorCode.BAD_REQUEST, 404),
    ("openai", "oa_unprocessable", ErrorCode.BAD_REQUEST, 422),
    ("openai", "oa_ratelimit", ErrorCode.RATE_LIMITED, 429),
    ("openai", "oa_server", ErrorCode.SERVER_ERROR, 500),
    ("openai", "oa_html", ErrorCode.MALFORMED_RESPONSE, 200),
    ("openai", "oa_shape", ErrorCode.MALFORMED_RESPONSE, 200),
    ("anthropic", "an_refusal", ErrorCode.CONTENT_FILTER, 200),
    ("anthropic", "an_empty", ErrorCode.EMPTY_OUTPUT, 200),
    ("anthropic", "an_context", ErrorCode.CONTEXT_LENGTH, 400),
    ("anthropic", "an_too_large", ErrorCode.CONTEXT_LENGTH, 413),
    ("anthropic", "an_bad", ErrorCode.BAD_REQUEST, 400),
    ("anthropic", "an_auth", ErrorCode.AUTH, 401),
    ("anthropic", "an_permission", ErrorCode.AUTH, 403),
    ("anthropic", "an_ratelimit", ErrorCode.RATE_LIMITED, 429),
    ("anthropic", "an_server", ErrorCode.SERVER_ERROR, 500),
    ("anthropic", "an_overloaded", ErrorCode.SERVER_ERROR, 529),
    ("anthropic", "an_html", ErrorCode.MALFORMED_RESPONSE, 200),
    ("gemini", "ge_safety", ErrorCode.CONTENT_FILTER, 200),
    ("gemini", "ge_blocked", ErrorCode.CONTENT_FILTER, 200),
    ("gemini", "ge_max_tokens_empty", ErrorCode.EMPTY_OUTPUT, 200),
    ("gemini", "ge_auth", ErrorCode.AUTH, 400),
    ("gemini", "ge_context", ErrorCode.CONTEXT_LENGTH, 400),
    ("gemini", "ge_denied", ErrorCode.AUTH, 403),
    ("gemini", "ge_missing", ErrorCode.BAD_REQUEST, 404),
    ("gemini", "ge_ratelimit", ErrorCode.RATE_LIMITED, 429),
    ("gemini", "ge_unavailable", ErrorCode.SERVER_ERROR, 503),
    ("gemini", "ge_shape", ErrorCode.MALFORMED_RESPONSE, 200),
]


@pytest.mark.parametrize(("kind", "fixture", "code", "status"), CASES)
def test_failures_become_stable_codes(
    kind: str, fixture: str, code: ErrorCode, status: int
) -> None:
    result = call(kind, fixture)
    assert not result.ok
    assert result.error_code == code, result.error_message
    assert result.http_status == status
    assert result.error_message
    assert_clean(result)
    transient = code in (ErrorCode.RATE_LIMITED, ErrorCode.SERVER_ERROR)
    assert result.attempts == (2 if transient else 1)


def test_gemini_usage_survives_a_filtered_answer() -> None:
    result = call("gemini", "ge_max_tokens_empty")
    assert result.usage.output_tokens == 208  # billed even though there is no text


def test_timeouts_are_retried_then_reported() -> None:
    result = call("openai", "oa_slow", timeout_s=0.1)
    assert result.error_code == ErrorCode.TIMEOUT and result.attempts == 2


def test_connection_refused_is_a_connection_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the call: nothing listens
    result = asyncio.run(_complete(settings("openai", f"http://127.0.0.1:{port}/v1")))
    assert result.error_code == ErrorCode.CONNECTION_ERROR and result.attempts == 2


async def _complete(endpoint: EndpointSettings) -> ModelResult:
    provider = make_provider(endpoint)
    try:
        return await provider.complete(REQUEST)
    finally:
        await provider.aclose()


def test_429s_are_reported_to_the_rate_bucket() -> None:
    async def main() -> tuple[ModelResult, int]:
        async with WireServer(FIXTURES) as server:
            endpoint = settings("openai", server.url("oa_ratelimit"), requests_per_minute=60_000)
            bucket = make_bucket(endpoint)
            assert bucket is not None
            provider = make_provider(endpoint, permit_source=LocalPermitSource(bucket))
            try:
                result = await provider.complete(REQUEST)
            finally:
                await provider.aclose()
            return result, bucket.state().rate_limited

    result, reported = asyncio.run(main())
    assert result.error_code == ErrorCode.RATE_LIMITED
    assert reported == 2  # both attempts


# --------------------------------------------------------------------------- what is sent

FULL = ModelRequest(
    model="m-1",
    messages=(
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"},
    ),
    params=SamplingParams(
        temperature=0.2, top_p=0.9, max_tokens=100, seed=7, stop=("END",), thinking_budget=2048
    ),
    sim_hints={"item_id": "x"},
)


def sent(kind: str, fixture: str, request: ModelRequest = FULL, **extra: Any):
    async def main():
        async with WireServer(FIXTURES) as server:
            provider = make_provider(settings(kind, server.url(fixture), **extra))
            try:
                await provider.complete(request)
            finally:
                await provider.aclose()
            return server.seen[-1]

    return asyncio.run(main())


def test_openai_request_mapping() -> None:
    seen = sent("openai", "oa_ok", headers={"OpenAI-Organization": "org-1"})
    assert seen.path == "/oa_ok/chat/completions"
    assert seen.headers["Authorization"] == f"Bearer {KEY}"
    assert seen.headers["OpenAI-Organization"] == "org-1"
    assert seen.body == {
        "model": "m-1",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": "A1"},
            {"role": "user", "content": "Q2"},
        ],
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 100,  # a non-OpenAI host: max_tokens
        "seed": 7,
        "stop": ["END"],
    }  # no thinking budget (not in chat completions), no sim hints (not a sim endpoint)
    effort = ModelRequest("o3", FULL.messages, SamplingParams(max_tokens=5, reasoning_effort="low"))
    body = sent("openai", "oa_ok", effort, max_tokens_param="max_completion_tokens").body
    assert body["max_completion_tokens"] == 5 and body["reasoning_effort"] == "low"
    assert "max_tokens" not in body


def test_anthropic_request_mapping() -> None:
    seen = sent("anthropic", "an_ok", headers_env={"anthropic-beta": "ITEMEVAL_TEST_WIRE_KEY"})
    assert seen.path == "/an_ok/v1/messages"
    assert seen.headers["x-api-key"] == KEY
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert seen.headers["anthropic-beta"] == KEY  # a secret header read from the environment
    assert seen.body == {
        "model": "m-1",
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": "A1"},
            {"role": "user", "content": "Q2"},
        ],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "max_tokens": 2148,  # raised so the answer has room after the thinking budget
        "temperature": 0.2,
        "top_p": 0.9,
        "stop_sequences": ["END"],
    }  # no seed: the Messages API has none
    plain = ModelRequest("m", ({"role": "user", "content": "hi"},))
    assert sent("anthropic", "an_ok", plain).body["max_tokens"] == 4096


def test_gemini_request_mapping() -> None:
    seen = sent("gemini", "ge_ok")
    assert seen.path == "/ge_ok/models/m-1:generateContent"
    assert seen.headers["x-goog-api-key"] == KEY
    assert seen.body == {
        "contents": [
            {"role": "user", "parts": [{"text": "Q1"}]},
            {"role": "model", "parts": [{"text": "A1"}]},
            {"role": "user", "parts": [{"text": "Q2"}]},
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {
            "temperature": 0.2,
            "topP": 0.9,
            "maxOutputTokens": 100,
            "seed": 7,
            "stopSequences": ["END"],
            "thinkingConfig": {"thinkingBudget": 2048},
        },
    }
    effort = ModelRequest("m", FULL.messages, SamplingParams(reasoning_effort="minimal"))
    config = sent("gemini", "ge_ok", effort).body["generationConfig"]
    assert config == {"thinkingConfig": {"thinkingBudget": 0}}


def test_sim_endpoints_send_hints_as_an_extra_body_field() -> None:
    body = sent("sim", "oa_ok").body
    assert body["itemeval_sim"] == {"item_id": "x"}
