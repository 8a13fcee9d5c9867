"""Structured verdicts: each client asks for the verdict schema in its wire's own form, the
sim-server answers in that form (Anthropic: a forced tool call), and the reply is the verdict
(parsed by `parse_structured_verdict`, nothing fished out of text). The request hash covers the
schema, so a structured judge call never meets a text one in the response cache."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from itemeval.calls import VERDICT
from itemeval.providers import (
    AnthropicMessagesProvider,
    EndpointSettings,
    GeminiProvider,
    ModelRequest,
    OpenAIChatProvider,
    SamplingParams,
    make_provider,
)
from itemeval.providers.limits import RateLimiter
from itemeval.scoring import ParseCode, parse_judge_output, parse_structured_verdict
from itemeval.store import request_hashes
from itemeval.store._cache import request_hash

LOCAL = "http://127.0.0.1:9"
PROMPT = (
    "Grade the response against the reference.\nReference: 42\nResponse: {solution}\n"
    'End with a fenced JSON block {{"score": <0 or 1>, "reasoning": "..."}}.'
)


def judge_request(i: int, *, structured: bool = True, thinking: int | None = None) -> ModelRequest:
    solution = f"ANSWER: {42 if i % 2 else 41}"
    return ModelRequest(
        "sim/judge",
        ({"role": "user", "content": PROMPT.format(solution=solution)},),
        SamplingParams(temperature=0.0, max_tokens=2048, thinking_budget=thinking),
        sim_hints={"item_id": f"q{i}", "epoch": 0, "target": "42", "role": "judge"}
        | {"solution": solution},
        reply_schema=VERDICT if structured else None,
    )


def run(endpoint: dict[str, Any], requests: list[ModelRequest]) -> list[Any]:
    async def main() -> list[Any]:
        provider = make_provider(EndpointSettings(**endpoint))
        try:
            return list(await asyncio.gather(*(provider.complete(r) for r in requests)))
        finally:
            await provider.aclose()

    return asyncio.run(main())


def test_each_client_asks_for_the_schema_in_its_wire_form() -> None:
    request = judge_request(1)
    limiter = RateLimiter(None, max_concurrency=4)
    openai = OpenAIChatProvider(EndpointSettings(kind="openai", base_url=LOCAL), limiter=limiter)
    body = openai.build_body(request)["response_format"]
    assert body["type"] == "json_schema" and body["json_schema"]["strict"] is True
    assert body["json_schema"]["schema"]["required"] == ["reasoning", "score"]
    anthropic = AnthropicMessagesProvider(
        EndpointSettings(kind="anthropic", base_url=LOCAL), limiter=limiter
    )
    body = anthropic.build_body(request)
    assert body["tools"][0]["input_schema"] == VERDICT.schema
    assert body["tool_choice"] == {"type": "tool", "name": "verdict"}
    gemini = GeminiProvider(EndpointSettings(kind="gemini", base_url=LOCAL), limiter=limiter)
    config = gemini.build_body(request)["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert "additionalProperties" not in config["responseSchema"]
    assert config["responseSchema"]["propertyOrdering"] == ["reasoning", "score"]
    # A text request's body is as it always was.
    assert "response_format" not in openai.build_body(judge_request(1, structured=False))


def test_the_schema_is_request_content() -> None:
    structured, text = judge_request(3), judge_request(3, structured=False)
    assert request_hash(structured) != request_hash(text)
    assert request_hashes([structured, text]) == [request_hash(structured), request_hash(text)]


@pytest.mark.parametrize(
    ("endpoint", "suffix"),
    [
        ({"kind": "sim"}, None),
        ({"kind": "sim", "sim": {"wire_format": "openai"}}, "/v1"),
        ({"kind": "sim", "sim": {"wire_format": "anthropic"}}, ""),
        ({"kind": "openai"}, "/v1"),
        ({"kind": "anthropic"}, ""),
        ({"kind": "gemini"}, "/v1beta"),
    ],
)
def test_a_structured_reply_is_the_verdict_on_every_wire(
    sim_server, endpoint: dict[str, Any], suffix: str | None
) -> None:
    if suffix is not None:
        endpoint = {**endpoint, "base_url": sim_server.url + suffix}
    requests = [judge_request(i) for i in range(12)]
    structured = run(endpoint, requests)
    text = run(endpoint, [judge_request(i, structured=False) for i in range(12)])
    assert all(r.ok for r in structured + text), [r.error_message for r in structured + text]
    verdicts = [parse_structured_verdict(r.text, max_score=1) for r in structured]
    assert all(v.ok for v in verdicts), [r.text for r in structured]
    # The same judge gives the same verdicts either way; only the form differs.
    assert [v.score for v in verdicts] == [parse_judge_output(r.text).score for r in text]
    assert all(not r.text.lstrip().startswith("{") for r in text)


def test_anthropic_refuses_a_forced_tool_with_thinking(sim_server) -> None:
    endpoint = {"kind": "anthropic", "base_url": sim_server.url}
    (result,) = run(endpoint, [judge_request(1, thinking=2048)])
    assert not result.ok and result.http_status == 400


def test_a_structured_reply_without_the_object_fails_with_the_contract_codes() -> None:
    from itemeval.providers import SimSettings
    from itemeval.simulator import Simulator

    sim = Simulator(SimSettings(judge_malformed_rate=1.0))
    codes = set()
    for i in range(40):
        request = judge_request(i)
        reply = sim.answer(
            request.model, request.messages, hints=request.sim_hints, structured=True
        )
        codes.add(parse_structured_verdict(reply.text).code)
    assert codes == {
        ParseCode.NO_JSON_OBJECT,
        ParseCode.NO_SCORE_IN_JSON,
        ParseCode.SCORE_NOT_NUMERIC,
        ParseCode.SCORE_NOT_FINITE,
    }
