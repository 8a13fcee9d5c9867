"""The sim-server's structured values: for any schema, a value that `jsonschema` accepts,
deterministic in its key, carrying the simulated answer where a property names it.

The schemas: pydantic models as the OpenAI and Anthropic SDKs send them (`$defs`/`$ref`,
recursion, `anyOf` with null, constrained fields), hand-written ones for every keyword the
builder reads, Gemini's OpenAPI subset, and 600 schemas drawn at random from those keywords."""

from __future__ import annotations

import random
from typing import Any

import pytest
from sim_schemas import (
    FORMATS,
    HAND_WRITTEN,
    VALIDATOR,
    Choice,
    MathReasoning,
    Node,
    Person,
    assert_valid,
)

from itemeval.simulator._regex_strings import regex_string
from itemeval.simulator._schema_values import schema_value
from itemeval.simulator._structured import gemini_schema, reply_fields


@pytest.mark.parametrize(
    "schema",
    [
        MathReasoning.model_json_schema(),
        Node.model_json_schema(),
        Person.model_json_schema(),
        Choice.model_json_schema(),
        *HAND_WRITTEN,
    ],
)
@pytest.mark.parametrize("answer", ["B", "42", "a sentence of prose"])
def test_every_schema_gets_a_valid_value(schema: dict[str, Any], answer: str) -> None:
    fields = {"answer": answer, "reasoning": "Because."}
    value = schema_value(schema, fields, (7, "medium", "k"))
    assert_valid(value, schema)
    assert schema_value(schema, fields, (7, "medium", "k")) == value  # deterministic


def test_the_answer_goes_where_a_property_names_it() -> None:
    fields = reply_fields("Let me work through this.\n\nANSWER: C")
    assert fields == {"answer": "C", "reasoning": "Let me work through this."}
    value = schema_value(Choice.model_json_schema(), fields, (1,))
    assert value == {"reasoning": "Let me work through this.", "answer": "C"}
    value = schema_value(MathReasoning.model_json_schema(), {"answer": "12"}, (1,))
    assert value["final_answer"] == "12"
    # A letter picks the enum entry at its index; a number fits an integer; a bare schema.
    options = {"type": "object", "properties": {"choice": {"enum": ["red", "green", "blue"]}}}
    assert schema_value(options, {"answer": "B"}, (1,)) == {"choice": "green"}
    count = {"type": "object", "properties": {"result": {"type": "integer"}}}
    assert schema_value(count, {"answer": "41"}, (1,)) == {"result": 41}
    assert schema_value({"type": "string"}, {"answer": "Paris"}, (1,)) == "Paris"
    # A judge's verdict keeps its score and reasoning.
    verdict = reply_fields('{"reasoning": "Right.", "score": 1}')
    rubric = {
        "type": "object",
        "properties": {"explanation": {"type": "string"}, "rating": {"type": "integer"}},
    }
    assert schema_value(rubric, verdict, (1,)) == {"explanation": "Right.", "rating": 1}


def test_different_keys_give_different_free_choices() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 10**6}},
    }
    values = {schema_value(schema, {}, (i,))["n"] for i in range(20)}
    assert len(values) > 10


def test_gemini_openapi_schemas_become_json_schemas() -> None:
    openapi = {
        "type": "OBJECT",
        "properties": {
            "answer": {"type": "STRING", "format": "enum", "enum": ["A", "B"]},
            "confidence": {"type": "NUMBER", "minimum": 0, "maximum": 1},
            "steps": {"type": "ARRAY", "items": {"type": "STRING"}, "min_items": "2"},
            "note": {"type": "STRING", "nullable": True},
        },
        "required": ["answer", "confidence", "steps"],
        "property_ordering": ["steps", "answer", "confidence", "note"],
    }
    schema = gemini_schema(openapi)
    assert schema["properties"]["steps"]["minItems"] == 2
    assert schema["properties"]["note"]["type"] == ["string", "null"]
    value = schema_value(schema, {"answer": "B"}, (3,))
    assert_valid(value, schema)
    assert list(value) == ["steps", "answer", "confidence", "note"] and value["answer"] == "B"


@pytest.mark.parametrize(
    "pattern", [r"^\d{3}-\d{4}$", r"[A-Z]{2,}", r"^(?:ab|cd)+x?$", r"^[^0-9]+$", r"\bfoo\b"]
)
def test_patterns_get_a_string_they_match(pattern: str) -> None:
    import re

    text = regex_string(pattern)
    assert text is not None and re.search(pattern, text)


# --------------------------------------------------------------------------- random schemas


def random_schema(rng: random.Random, depth: int, defs: dict[str, Any]) -> dict[str, Any]:
    kinds = ["string", "integer", "number", "boolean", "enum", "null"]
    if depth < 3:
        kinds += ["object", "object", "array", "anyOf", "allOf", "ref"]
    kind = rng.choice(kinds)
    if kind == "string":
        schema: dict[str, Any] = {"type": "string"}
        if rng.random() < 0.3:
            schema["minLength"] = rng.randint(0, 8)
        if rng.random() < 0.3:
            schema["maxLength"] = schema.get("minLength", 0) + rng.randint(0, 6)
        if rng.random() < 0.2:  # (a format holds its own length)
            schema = {"type": "string"}
            schema["format"] = rng.choice(["date", "date-time", "email", "uuid", "ipv4", "uri"])
        elif rng.random() < 0.2:
            schema.pop("maxLength", None)
            schema["pattern"] = rng.choice([r"^[a-f0-9]{8}$", r"^[A-Z][a-z]+$", r"\d+", "^x|y$"])
        return schema
    if kind in ("integer", "number"):
        schema = {"type": kind}
        low = rng.randint(-50, 50)
        if rng.random() < 0.5:
            schema["exclusiveMinimum" if rng.random() < 0.3 else "minimum"] = low
        if rng.random() < 0.5:
            schema["exclusiveMaximum" if rng.random() < 0.3 else "maximum"] = low + rng.randint(
                12, 40
            )
        if rng.random() < 0.3:
            schema["multipleOf"] = rng.choice([2, 5] if kind == "integer" else [0.5, 0.1, 0.25])
        return schema
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "null":
        return {"type": "null"}
    if kind == "enum":
        return {"enum": rng.sample(["x", "y", 3, 4.5, True, None, "z"], rng.randint(1, 4))}
    if kind == "object":
        names = rng.sample(["answer", "reasoning", "score", "a", "b", "label", "n"], 4)
        properties = {n: random_schema(rng, depth + 1, defs) for n in names[: rng.randint(0, 4)]}
        schema = {"type": "object", "properties": properties}
        schema["required"] = [n for n in properties if rng.random() < 0.7]
        if rng.random() < 0.5:
            schema["additionalProperties"] = False
        return schema
    if kind == "array":
        schema = {"type": "array", "items": random_schema(rng, depth + 1, defs)}
        if rng.random() < 0.4:
            schema["minItems"] = rng.randint(0, 3)
        if rng.random() < 0.3:
            schema["maxItems"] = schema.get("minItems", 0) + rng.randint(0, 2)
        return schema
    if kind == "anyOf":
        return {"anyOf": [random_schema(rng, depth + 1, defs) for _ in range(rng.randint(1, 3))]}
    if kind == "allOf":
        halves = [
            {"type": "object", "properties": {n: random_schema(rng, depth + 1, defs)}}
            | {"required": [n]}
            for n in rng.sample(["p", "q", "r"], 2)
        ]
        return {"allOf": halves}
    name = f"d{len(defs)}"
    defs[name] = {}
    defs[name] = random_schema(rng, depth + 1, defs)
    return {"$ref": f"#/$defs/{name}"}


def test_six_hundred_random_schemas_get_valid_values() -> None:
    rng = random.Random(20240611)
    failures = []
    for i in range(600):
        defs: dict[str, Any] = {}
        schema = random_schema(rng, 0, defs)
        if defs:
            schema = {**schema, "$defs": defs}
        value = schema_value(schema, {"answer": rng.choice(["B", "17", "prose"])}, (i,))
        errors = list(VALIDATOR(schema, format_checker=FORMATS).iter_errors(value))
        if errors:
            failures.append((schema, value, errors[0].message))
    assert not failures, failures[:3]
