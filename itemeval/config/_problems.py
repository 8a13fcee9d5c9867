"""pydantic's validation errors as `Problem`s a user can act on.

Each error names the field path (`models[1].endpoint`), the line when the study came from a file,
what is wrong in plain words (an unknown key, a missing one, our validators' own sentences), and
for an unknown key the nearest valid name or the valid keys at that place.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from itemeval._util.yaml_lines import YamlLines
from itemeval.errors import Problem


def validation_problems(
    exc: ValidationError,
    model: type[BaseModel],
    *,
    file: str | None = None,
    lines: YamlLines | None = None,
) -> list[Problem]:
    """One `Problem` per error of `exc`, raised validating `model`."""
    problems = []
    for error in exc.errors():
        loc = tuple(p for p in error["loc"] if not _is_union_tag(p))
        field = field_path(loc)
        hint = None
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            siblings = _field_names_at(model, loc[:-1])
            close = difflib.get_close_matches(str(loc[-1]), siblings, n=1, cutoff=0.5)
            message = "unknown key"
            hint = f"did you mean {close[0]!r}?" if close else None
            if not hint and siblings:
                hint = "valid keys here: " + ", ".join(sorted(siblings))
        elif error["type"] == "missing":
            message = "required key is missing"
        elif error["type"] == "value_error":
            message = message.removeprefix("Value error, ")  # our validators' own words
        line = lines.line_of(field) if lines is not None else None
        problems.append(Problem(message, file=file, line=line, field=field or None, hint=hint))
    return problems


def field_path(loc: tuple[Any, ...]) -> str:
    """A pydantic location as a field path: `("models", 1, "endpoint")` -> `models[1].endpoint`."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path


def _is_union_tag(part: Any) -> bool:
    # pydantic adds the union member or literal tag to locations (e.g. "function-after[...]")
    return isinstance(part, str) and ("[" in part or part in {"str", "int", "float"})


def _field_names_at(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The valid key names of the model found by walking `loc` down from `model`."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = _find_field(current, str(part))
            if field is None:
                return []
            current = field.annotation
        else:
            origin = typing.get_origin(current)
            args = typing.get_args(current)
            if origin in (list, tuple) or origin is dict:
                current = args[-1] if args else Any
            else:
                return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or name for name, f in current.model_fields.items()]
    return []


def _find_field(model: type[BaseModel], key: str) -> Any:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field
    return None


def _unwrap(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        return models[0] if models else (members[0] if members else annotation)
    return annotation
