"""`itemeval sim-server` through the official `openai`, `anthropic` and `google-genai` SDKs:
structured output for any prompt and schema (OpenAI `json_schema` and `json_object`, pydantic
models through `parse`, forced tools; Anthropic forced tools and `output_config.format`; Gemini
`responseSchema` and `responseJsonSchema`, function calling), Gemini under `/v1` and `/v1beta`,
and thinking budgets in both of Gemini's spellings.

Every structured value is validated with `jsonschema` against the schema the SDK sent, and its
answer field holds the same answer the simulated model gives to the same prompt as text."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types
from sim_schemas import HAND_WRITTEN, Choice, MathReasoning, Person, assert_valid

from itemeval.scoring import parse_judge_output

MODEL = "sim/medium"


def question(i: int) -> str:
    return (
        f"Question {i}: which number is prime?\nA) {4 + 2 * i}\nB) 7\nC) {9 + 3 * i}\n"
        f"D) {10 + 2 * i}\nAnswer with the letter."
    )


def hints(i: int) -> dict[str, Any]:
    return {"item_id": f"sdk-{i}", "target": "B", "modality": "choiceof4"}


def openai_client(server: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)


def openai_parse(client: openai.OpenAI) -> Any:
    """`client.chat.completions.parse` (`client.beta.chat.completions.parse` in older SDKs)."""
    parse = getattr(client.chat.completions, "parse", None)
    return parse or client.beta.chat.completions.parse


def anthropic_client(server: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)


def gemini_client(server: Any, version: str = "v1beta") -> genai.Client:
    options = types.HttpOptions(base_url=server.url, api_version=version)
    return genai.Client(api_key="x", http_options=options)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


OBJECT_SCHEMAS = [s for s in HAND_WRITTEN if s.get("type") == "object" or "allOf" in s] + [
    Person.model_json_schema(),
    MathReasoning.model_json_schema(),
]

# --------------------------------------------------------------------------- OpenAI


def test_openai_parse_gives_the_model_holding_the_text_answer(sim_server) -> None:
    client = openai_client(sim_server)
    answers = []
    for i in range(12):
        body = {"itemeval_sim": hints(i)}
        text = client.chat.completions.create(
            model=MODEL, messages=user(question(i)), extra_body=body
        )
        parsed = openai_parse(client)(
            model=MODEL, messages=user(question(i)), response_format=Choice, extra_body=body
        )
        message = parsed.choices[0].message
        assert isinstance(message.parsed, Choice), message.content
        assert message.parsed.answer == text.choices[0].message.content.strip()
        assert parsed.choices[0].finish_reason == "stop"
        # Billed as the JSON it wrote (a token per 4 characters).
        assert parsed.usage.completion_tokens == -(-len(message.content) // 4)
        answers.append(message.parsed.answer)
    assert "B" in answers and set(answers) - {"B"}, answers  # calibrated: right and wrong


@pytest.mark.parametrize("schema", [*HAND_WRITTEN, Person.model_json_schema()])
def test_openai_json_schema_any_schema(sim_server, schema: dict[str, Any]) -> None:
    client = openai_client(sim_server)
    response_format = {"type": "json_schema", "json_schema": {"name": "any", "schema": schema}}
    first, again = (
        client.chat.completions.create(
            model=MODEL, messages=user("Describe a person."), response_format=response_format
        )
        for _ in range(2)
    )
    value = json.loads(first.choices[0].message.content)
    assert_valid(value, schema)
    assert again.choices[0].message.content == first.choices[0].message.content


def test_openai_json_object(sim_server) -> None:
    client = openai_client(sim_server)
    reply = client.chat.completions.create(
        model=MODEL, messages=user(question(1)), response_format={"type": "json_object"}
    )
    value = json.loads(reply.choices[0].message.content)
    assert isinstance(value, dict) and value["answer"] in "ABCD"


def test_openai_tools_forced_by_name_or_required(sim_server) -> None:
    client = openai_client(sim_server)
    person = Person.model_json_schema()
    tools: list[Any] = [
        openai.pydantic_function_tool(Choice, name="record_answer"),
        {"type": "function", "function": {"name": "lookup", "parameters": person}},
    ]
    named = client.chat.completions.create(
        model=MODEL,
        messages=user(question(2)),
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "lookup"}},
    )
    (call,) = named.choices[0].message.tool_calls
    assert call.function.name == "lookup" and named.choices[0].message.content is None
    assert_valid(json.loads(call.function.arguments), person)
    assert named.choices[0].finish_reason == "stop"  # as OpenAI ends a call it was told to make

    required = openai_parse(client)(
        model=MODEL, messages=user(question(2)), tools=tools[:1], tool_choice="required"
    )
    (call,) = required.choices[0].message.tool_calls
    assert isinstance(call.function.parsed_arguments, Choice)
    assert required.choices[0].finish_reason == "tool_calls"
    text = client.chat.completions.create(model=MODEL, messages=user(question(2)))
    assert call.function.parsed_arguments.answer == text.choices[0].message.content.strip()

    auto = client.chat.completions.create(
        model=MODEL, messages=user(question(2)), tools=tools, tool_choice="auto"
    )
    assert auto.choices[0].message.tool_calls is None and auto.choices[0].message.content
    with pytest.raises(openai.BadRequestError, match="no function named"):
        client.chat.completions.create(
            model=MODEL,
            messages=user(question(2)),
            tools=tools,
            tool_choice={"type": "function", "function": {"name": "missing"}},
        )


def test_openai_parse_cut_short_by_max_tokens(sim_server) -> None:
    client = openai_client(sim_server)
    with pytest.raises(openai.LengthFinishReasonError):
        openai_parse(client)(
            model=MODEL,
            messages=user(question(3)),
            response_format=MathReasoning,
            max_completion_tokens=5,
        )


def test_a_judge_prompt_keeps_its_verdict(sim_server) -> None:
    """A judge's prompt (no hints) asked for a verdict schema gives the verdict it gives in
    text, in the schema's own fields."""
    client = openai_client(sim_server)
    verdict = {
        "type": "object",
        "properties": {
            "explanation": {"type": "string"},
            "score": {"type": "integer", "minimum": 0, "maximum": 1},
        },
        "required": ["explanation", "score"],
        "additionalProperties": False,
    }
    response_format = {"type": "json_schema", "json_schema": {"name": "v", "schema": verdict}}
    scores = []
    for i in range(8):
        prompt = (
            f"Grade response {i}. Reference: 7. Response: ANSWER: {7 + i % 2}\n"
            'End with {"score": 0 or 1, "reasoning": "..."}.'
        )
        text = client.chat.completions.create(model="sim/judge", messages=user(prompt))
        structured = client.chat.completions.create(
            model="sim/judge", messages=user(prompt), response_format=response_format
        )
        value = json.loads(structured.choices[0].message.content)
        assert_valid(value, verdict)
        assert value["score"] == parse_judge_output(text.choices[0].message.content).score
        scores.append(value["score"])
    assert set(scores) == {0, 1}


def test_a_batch_answers_structured_requests_too(sim_server) -> None:
    import io

    client = openai_client(sim_server)
    schema = Choice.model_json_schema()
    line = {
        "custom_id": "c1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": MODEL,
            "messages": user(question(4)),
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "c", "schema": schema},
            },
        },
    }
    upload = client.files.create(
        file=("in.jsonl", io.BytesIO(json.dumps(line).encode())), purpose="batch"
    )
    batch = client.batches.create(
        input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 30
    while batch.status not in ("completed", "failed", "expired") and time.monotonic() < deadline:
        time.sleep(0.2)
        batch = client.batches.retrieve(batch.id)
    assert batch.status == "completed" and batch.output_file_id
    (result,) = [
        json.loads(x) for x in client.files.content(batch.output_file_id).text.splitlines()
    ]
    content = result["response"]["body"]["choices"][0]["message"]["content"]
    assert_valid(json.loads(content), schema)


# --------------------------------------------------------------------------- Anthropic


@pytest.mark.parametrize("schema", OBJECT_SCHEMAS)
def test_anthropic_forced_tool_any_schema(sim_server, schema: dict[str, Any]) -> None:
    client = anthropic_client(sim_server)
    message = client.messages.create(
        model=MODEL,
        max_tokens=1000,
        messages=user(question(5)),
        tools=[{"name": "record", "description": "Record it.", "input_schema": schema}],
        tool_choice={"type": "tool", "name": "record"},
    )
    (block,) = message.content
    assert block.type == "tool_use" and block.name == "record"
    assert message.stop_reason == "tool_use"
    assert_valid(block.input, schema)


def test_anthropic_tools_parse_and_output_config(sim_server) -> None:
    client = anthropic_client(sim_server)
    text = client.messages.create(model=MODEL, max_tokens=200, messages=user(question(6)))
    answer = text.content[0].text.strip()
    tools: list[Any] = [
        {"name": "record", "input_schema": Choice.model_json_schema()},
        {"name": "other", "input_schema": Person.model_json_schema()},
    ]
    anyone = client.messages.create(
        model=MODEL,
        max_tokens=200,
        messages=user(question(6)),
        tools=tools,
        tool_choice={"type": "any"},
    )
    (block,) = anyone.content
    assert block.name == "record" and block.input["answer"] == answer
    parsed = client.messages.parse(
        model=MODEL, max_tokens=200, messages=user(question(6)), output_format=Choice
    )
    assert isinstance(parsed.parsed_output, Choice) and parsed.parsed_output.answer == answer
    person = Person.model_json_schema()
    formatted = client.messages.create(
        model=MODEL,
        max_tokens=2000,
        messages=user("Describe a person."),
        output_config={"format": {"type": "json_schema", "schema": person}},
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    kinds = [b.type for b in formatted.content]
    assert kinds == ["thinking", "text"]
    assert_valid(json.loads(formatted.content[1].text), person)


@pytest.mark.parametrize(
    "thinking", [{"type": "adaptive"}, {"type": "enabled", "budget_tokens": 1024}]
)
def test_anthropic_refuses_a_forced_tool_with_thinking(sim_server, thinking: Any) -> None:
    client = anthropic_client(sim_server)
    with pytest.raises(anthropic.BadRequestError, match="Thinking may not be enabled"):
        client.messages.create(
            model=MODEL,
            max_tokens=2000,
            messages=user(question(7)),
            tools=[{"name": "record", "input_schema": Choice.model_json_schema()}],
            tool_choice={"type": "any"},
            thinking=thinking,
        )


# --------------------------------------------------------------------------- Gemini


@pytest.mark.parametrize("version", ["v1beta", "v1"])
def test_gemini_response_schema_with_thinking(sim_server, version: str) -> None:
    client = gemini_client(sim_server, version)
    text = client.models.generate_content(model=MODEL, contents=question(8)).text.strip()
    thinking = types.ThinkingConfig(thinking_budget=300, include_thoughts=True)
    reply = client.models.generate_content(
        model=MODEL,
        contents=question(8),
        config=types.GenerateContentConfig(
            response_mime_type="application/json",
            response_schema=Choice,
            thinking_config=thinking,
        ),
    )
    assert isinstance(reply.parsed, Choice) and reply.parsed.answer == text
    assert 0 < reply.usage_metadata.thoughts_token_count <= 300
    parts = reply.candidates[0].content.parts
    assert [bool(p.thought) for p in parts] == [True, False]
    off = client.models.generate_content(
        model=MODEL,
        contents=question(8),
        config=types.GenerateContentConfig(thinking_config=types.ThinkingConfig(thinking_budget=0)),
    )
    assert not off.usage_metadata.thoughts_token_count


@pytest.mark.parametrize("schema", [*HAND_WRITTEN, Person.model_json_schema()])
def test_gemini_response_json_schema_any_schema(sim_server, schema: dict[str, Any]) -> None:
    client = gemini_client(sim_server)
    reply = client.models.generate_content(
        model=MODEL,
        contents="Describe a person.",
        config=types.GenerateContentConfig(
            response_mime_type="application/json", response_json_schema=schema
        ),
    )
    assert_valid(json.loads(reply.text), schema)


def test_gemini_openapi_schema_enum_and_function_calling(sim_server) -> None:
    client = gemini_client(sim_server, "v1")
    schema = types.Schema(
        type=types.Type.OBJECT,
        properties={
            "answer": types.Schema(type=types.Type.STRING, enum=["A", "B", "C", "D"]),
            "confidence": types.Schema(type=types.Type.NUMBER, minimum=0, maximum=1),
            "steps": types.Schema(
                type=types.Type.ARRAY, items=types.Schema(type=types.Type.STRING), min_items=2
            ),
            "note": types.Schema(type=types.Type.STRING, nullable=True),
        },
        required=["answer", "confidence", "steps"],
    )
    reply = client.models.generate_content(
        model=MODEL,
        contents=question(9),
        config=types.GenerateContentConfig(
            response_mime_type="application/json", response_schema=schema
        ),
    )
    expected = {
        "type": "object",
        "properties": {
            "answer": {"enum": ["A", "B", "C", "D"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "steps": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "note": {"type": ["string", "null"]},
        },
        "required": ["answer", "confidence", "steps"],
    }
    assert_valid(json.loads(reply.text), expected)

    enum = client.models.generate_content(
        model=MODEL,
        contents=question(9),
        config=types.GenerateContentConfig(
            response_mime_type="text/x.enum",
            response_schema=types.Schema(type=types.Type.STRING, enum=["A", "B", "C", "D"]),
        ),
    )
    assert enum.text == json.loads(reply.text)["answer"]

    declaration = types.FunctionDeclaration(
        name="record", parameters_json_schema=Person.model_json_schema()
    )
    called = client.models.generate_content(
        model=MODEL,
        contents="Record a person.",
        config=types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=[declaration])],
            tool_config=types.ToolConfig(
                function_calling_config=types.FunctionCallingConfig(
                    mode=types.FunctionCallingConfigMode.ANY
                )
            ),
        ),
    )
    (call,) = called.function_calls
    assert call.name == "record"
    assert_valid(call.args, Person.model_json_schema())


@pytest.mark.parametrize(
    "config",
    [
        {"generationConfig": {"thinkingConfig": {"thinkingBudget": 200}}},
        {"generation_config": {"thinking_config": {"thinking_budget": 200}}},
    ],
)
def test_gemini_thinking_budget_in_either_spelling(sim_server, config: dict[str, Any]) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": question(10)}]}], **config}
    request = urllib.request.Request(
        f"{sim_server.url}/v1beta/models/{MODEL}:generateContent",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        usage = json.loads(response.read())["usageMetadata"]
    assert 0 < usage["thoughtsTokenCount"] <= 200


def test_a_malformed_judge_output_stays_malformed(start_sim_server) -> None:
    """`--judge-malformed-rate` is a fault on purpose: a structured judge call gets the broken
    output (a sentence, an object without a valid score) as it is, not a repaired one."""
    server = start_sim_server("--judge-malformed-rate", "1")
    client = openai_client(server)
    verdict = {"name": "verdict", "schema": {"type": "object", "required": ["score"]}}
    contents = []
    for i in range(16):
        prompt = f'Grade response {i}: ANSWER: 7. Reference: 7. End with {{"score": 0 or 1}}.'
        reply = client.chat.completions.create(
            model="sim/judge",
            messages=user(prompt),
            response_format={"type": "json_schema", "json_schema": verdict},
        )
        contents.append(reply.choices[0].message.content)
    assert not any(parse_judge_output(c).ok for c in contents)
    assert any(not c.startswith("{") for c in contents) and any(c.startswith("{") for c in contents)
