"""Structured output on the sim-server: what a request asks for, and the reply that fits it.

Asked for by (each wire's parser calls one of these):

* OpenAI: `response_format` `json_schema` (the schema) or `json_object` (any object); `tools`
  with `tool_choice` naming a function or `"required"` (the first function): a tool call.
* Anthropic: `tool_choice` `{"type": "tool", name}` or `{"type": "any"}` (the first tool): a
  `tool_use` block; `output_config.format` (and the beta's `output_format`) `json_schema`: the
  object as text.
* Gemini: `responseMimeType: application/json` with `responseSchema` (its OpenAPI subset,
  converted by `gemini_schema`) or `responseJsonSchema`, or neither (any object);
  `text/x.enum` (the enum value as plain text); `functionDeclarations` with
  `functionCallingConfig.mode: ANY`: a function call.

`structure` turns the simulator's answer into a value of the schema (`schema_value`): the
answer goes into a property that names it (`answer`, `final_answer`, ...), the reasoning before
an `ANSWER:` line into `reasoning`, a judge's verdict into `score` and `reasoning`, a pairwise
verdict into `winner`. A judge's malformed output (`judge_malformed_rate`, a fault on purpose)
is sent as it is.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from itemeval.ids import sha256_hex
from itemeval.simulator._answers import is_judge_prompt
from itemeval.simulator._engine import MAX_OUTPUT_TOKENS, SimReply, count_tokens
from itemeval.simulator._schema_values import field_of, schema_value

#: What `json_object` (or JSON without a schema) gets: an object holding the answer.
ANY_OBJECT: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
_INTEGER_KEYWORDS = (
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
)
_ANSWER_LINE = re.compile(r"^\s*ANSWER\s*:\s*(.*)$", re.I | re.M)


@dataclass(frozen=True, slots=True)
class Output:
    """The structured output one request asks for."""

    #: "json": the value as JSON text; "tool": a tool (function) call whose arguments are the
    #: value; "enum": the value as plain text (Gemini's `text/x.enum`)
    form: str
    name: str  # the schema's or the tool's name
    schema: Any  # a JSON Schema (Gemini's OpenAPI subset already converted)
    #: OpenAI: a function named by `tool_choice` ends with finish_reason "stop", "required"
    #: with "tool_calls"
    named: bool = True


# --------------------------------------------------------------------------- what is asked


def openai_output(body: Mapping[str, Any]) -> Output | None:
    tools = [t for t in body.get("tools") or [] if isinstance(t, Mapping)]
    choice = body.get("tool_choice")
    if tools and (choice == "required" or isinstance(choice, Mapping)):
        functions = {str(_function(t).get("name")): _function(t) for t in tools}
        if isinstance(choice, Mapping):
            name = str(_function(choice).get("name"))
            if name not in functions:
                raise ValueError(f"tool_choice: no function named {name!r} in `tools`")
        else:
            name = next(iter(functions))
        schema = functions[name].get("parameters") or {"type": "object", "properties": {}}
        return Output("tool", name, schema, named=isinstance(choice, Mapping))
    response_format = body.get("response_format")
    if not isinstance(response_format, Mapping):
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return Output("json", "response", ANY_OBJECT)
    if kind != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, Mapping) or not spec.get("name"):
        raise ValueError("response_format.json_schema: `name` is required")
    schema = spec.get("schema")
    if schema is not None and not isinstance(schema, Mapping):
        raise ValueError("response_format.json_schema.schema: must be an object")
    return Output("json", str(spec["name"]), schema or ANY_OBJECT)


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    function = tool.get("function")
    return function if isinstance(function, Mapping) else {}


def anthropic_output(body: Mapping[str, Any], thinking: bool) -> Output | None:
    """The forced tool (as Anthropic checks it), else a JSON output format, else None."""
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in ("tool", "any"):
        tools = {
            str(t["name"]): t
            for t in body.get("tools") or []
            if isinstance(t, Mapping) and "name" in t and "input_schema" in t
        }
        name = choice.get("name") if choice.get("type") == "tool" else next(iter(tools), None)
        if name not in tools:
            raise ValueError(f"tool_choice: no tool named {name!r} in `tools`")
        if thinking:
            raise ValueError("Thinking may not be enabled when tool_choice forces tool use.")
        return Output("tool", str(name), tools[str(name)]["input_schema"])
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, Mapping) else None
    fmt = fmt or body.get("output_format")  # the beta's spelling
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        if not isinstance(schema, Mapping):
            raise ValueError("output_config.format.schema: field required")
        return Output("json", "output", schema)
    return None


def gemini_output(body: Mapping[str, Any], config: Mapping[str, Any]) -> Output | None:
    """Function calling in mode ANY, else the response MIME type and schema."""
    calling = None
    if body.get("tools"):
        tool_config = gemini_field(body, "toolConfig") or {}
        calling = gemini_field(tool_config, "functionCallingConfig")
    if calling and str(gemini_field(calling, "mode") or "").upper() == "ANY":
        declared = [
            d
            for tool in body.get("tools") or []
            for d in gemini_field(tool, "functionDeclarations") or []
            if isinstance(d, Mapping) and d.get("name")
        ]
        allowed = gemini_field(calling, "allowedFunctionNames") or [d["name"] for d in declared]
        for declaration in declared:
            if declaration["name"] in allowed:
                schema = gemini_field(declaration, "parametersJsonSchema")
                if schema is None:
                    schema = gemini_schema(declaration.get("parameters") or {"type": "OBJECT"})
                return Output("tool", str(declaration["name"]), schema)
        raise ValueError("toolConfig.functionCallingConfig: mode ANY without a declared function")
    mime = str(gemini_field(config, "responseMimeType") or "")
    json_schema = gemini_field(config, "responseJsonSchema")
    if json_schema is None:
        json_schema = config.get("_responseJsonSchema")  # an older SDK's spelling
    schema = gemini_field(config, "responseSchema")
    if schema is not None and json_schema is not None:
        raise ValueError("responseSchema and responseJsonSchema cannot both be set")
    if json_schema is not None:
        schema = json_schema
    elif schema is not None:
        schema = gemini_schema(schema)
    if mime == "text/x.enum":
        return Output("enum", "response", schema or {"type": "string"})
    if mime == "application/json" or schema is not None:
        return Output("json", "response", schema or ANY_OBJECT)
    return None


def gemini_schema(schema: Any) -> Any:
    """Gemini's `Schema` (an OpenAPI 3.0 subset: upper-case types, `nullable`, integers that
    may arrive as strings) as a JSON Schema."""
    if isinstance(schema, list):
        return [gemini_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    nullable = False
    for raw_key, value in schema.items():
        key = _camel(raw_key)
        if key == "type":
            kind = str(value).lower()
            if kind not in ("", "type_unspecified"):
                out["type"] = kind
        elif key == "nullable":
            nullable = bool(value)
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {name: gemini_schema(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf", "additionalProperties"):
            out[key] = gemini_schema(value)
        elif key in ("$defs", "defs") and isinstance(value, Mapping):
            out["$defs"] = {name: gemini_schema(sub) for name, sub in value.items()}
        elif key in _INTEGER_KEYWORDS:
            out[key] = int(value)
        elif key in ("minimum", "maximum"):
            out[key] = float(value)
        elif key == "format" and value == "enum":
            continue  # Gemini's marker for a string enum: `enum` says it all
        else:
            out[key] = value
    if nullable:
        declared = out.get("type")
        if isinstance(declared, str):
            out["type"] = [declared, "null"]
        if isinstance(out.get("enum"), list):
            out["enum"] = [*out["enum"], None]
    return out


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def gemini_field(body: Any, camel: str) -> Any:
    """A field of a Gemini body in either spelling (camelCase or snake_case, as protobuf's
    JSON reader takes both)."""
    if not isinstance(body, dict):  # (a parsed JSON body; dict is quicker to check than Mapping)
        return None
    if camel in body:
        return body[camel]
    return body.get(_snake(camel))


@functools.cache
def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower()


# --------------------------------------------------------------------------- the reply


def structure(
    reply: SimReply,
    output: Output,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    hints: Any,
    max_tokens: int | None,
    seed: int,
) -> SimReply:
    """`reply` with its text turned into the value `output` asks for (see the module doc)."""
    if reply.kind != "ok":
        return reply
    hints = hints if isinstance(hints, Mapping) else {}
    prompt = "\n\n".join(_text(m) for m in messages)
    if _is_judge(prompt, hints) and not _is_verdict(reply.text):
        return reply  # a malformed judge output: the fault is the point
    key = (
        seed,
        model,
        sha256_hex(json.dumps([prompt, output.schema, dict(hints)], default=str))[:16],
    )
    value = schema_value(output.schema, reply_fields(reply.text), key)
    if output.form == "enum" and isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False)
    usage = reply.usage
    reasoning = usage.reasoning_tokens
    limit = MAX_OUTPUT_TOKENS if max_tokens is None else max_tokens
    finish = "stop"
    if count_tokens(text) + reasoning > limit:  # cut as a provider cuts: mid-value
        text = text[: max(0, limit - reasoning) * 4]
        finish = "length"
    usage = dataclasses.replace(usage, output_tokens=count_tokens(text) + reasoning)
    return dataclasses.replace(reply, text=text, finish_reason=finish, usage=usage)


def reply_fields(text: str) -> dict[str, Any]:
    """What the simulated model said, by field: a verdict object's own fields; else the
    `answer` (of an `ANSWER:` line, or the whole text) and the `reasoning` before it."""
    parsed = _object(text)
    if parsed is not None:
        return {field_of(k) or k: v for k, v in parsed.items()}
    matches = list(_ANSWER_LINE.finditer(text))
    if matches:
        last = matches[-1]
        fields: dict[str, Any] = {"answer": last.group(1).strip()}
        reasoning = text[: last.start()].strip()
        if reasoning:
            fields["reasoning"] = reasoning
        return fields
    return {"answer": text.strip()}


def tool_arguments(text: str) -> dict[str, Any] | None:
    """A structured reply's object (a tool call's arguments), None for anything else."""
    return _object(text)


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _is_judge(prompt: str, hints: Mapping[str, Any]) -> bool:
    # As `Simulator.answer` decides who answers.
    return hints.get("role") == "judge" or (not hints and is_judge_prompt(prompt))


def _is_verdict(text: str) -> bool:
    parsed = _object(text)
    score = parsed.get("score") if parsed else None
    return isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score)


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return ""
