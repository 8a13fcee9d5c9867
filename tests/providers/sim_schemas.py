"""Schemas the sim-server's structured-output tests share: pydantic models as the SDKs send
them, and hand-written schemas for every keyword the value builder reads."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel, Field

VALIDATOR = jsonschema.Draft202012Validator
FORMATS = jsonschema.FormatChecker()


def assert_valid(value: Any, schema: Any) -> None:
    errors = [e.message for e in VALIDATOR(schema, format_checker=FORMATS).iter_errors(value)]
    assert not errors, f"{json.dumps(value)[:400]} against {json.dumps(schema)[:400]}: {errors}"


class Color(StrEnum):
    RED = "red"
    GREEN = "green"


class Step(BaseModel):
    explanation: str
    output: str


class MathReasoning(BaseModel):
    steps: list[Step]
    final_answer: str


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Person(BaseModel):
    name: str = Field(min_length=3, max_length=5)
    age: int = Field(ge=18, lt=21)
    share: float = Field(gt=0, le=0.5, multiple_of=0.1)
    email: str = Field(pattern=r"^[a-z]+@[a-z]+\.com$")
    color: Color
    tags: list[str] = Field(min_length=2, max_length=3)
    nickname: str | None = None
    kind: Literal["a", "b"]
    tree: Node


class Choice(BaseModel):
    reasoning: str
    answer: Literal["A", "B", "C", "D"]


HAND_WRITTEN: list[dict[str, Any]] = [
    {"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": True, "minItems": 3},
    {"type": "string", "enum": ["A", "B", "C"]},
    {"oneOf": [{"type": "object", "properties": {"t": {"const": "x"}}, "required": ["t"]}]},
    {"type": ["null", "number"], "exclusiveMinimum": 5, "exclusiveMaximum": 6},
    {"type": "integer", "minimum": 3, "exclusiveMinimum": True, "maximum": 5},
    {"type": "object", "minProperties": 3, "additionalProperties": {"type": "boolean"}},
    {
        "type": "object",
        "patternProperties": {"^k_[0-9]+$": {"type": "integer"}},
        "additionalProperties": False,
        "minProperties": 2,
    },
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": False},
    {"type": "array", "contains": {"type": "integer", "minimum": 100}, "minItems": 2},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "email"},
    {"type": "string", "pattern": r"^\d{3}-[A-Z]{2,4}(x|y)\1?$", "minLength": 7},
    {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"type": "string", "maxLength": 2}}, "required": ["b"]},
        ]
    },
    {"$ref": "#/definitions/x", "definitions": {"x": {"type": "number", "multipleOf": 0.25}}},
    {"type": "object", "required": ["undeclared"]},
    {"type": "object", "properties": {"a": {}, "b": True}, "maxProperties": 1, "required": ["b"]},
]
