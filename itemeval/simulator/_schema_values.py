"""A value that validates against a JSON Schema: what the sim-server writes for structured output.

`schema_value(schema, fields, key)` walks the schema and builds one value, deterministic in `key`
(every free choice is a `stable_unit` of the key and the path). Where a property's name says
what it holds (`answer`, `reasoning`, `score`, ...: `FIELD_NAMES`) and `fields` holds that, the
value is taken from `fields` when it fits the property's schema (an enum is matched without
case, a letter picks the enum's entry at its index, a number is clamped into its bounds); every
other value is made up to fit.

Handled: `type` (one or a list), `enum`, `const`, `$ref` into the document (`$defs`,
`definitions`, recursion cut off after `MAX_DEPTH` levels), `allOf` (merged), `anyOf` and `oneOf`
(the first branch that fits), objects (every listed property in `propertyOrdering` or listed
order; `required` names not listed; `minProperties`/`maxProperties`, `additionalProperties`,
`patternProperties`), arrays (`items`, `prefixItems`, `contains`, `minItems`/`maxItems`,
`uniqueItems`), strings (`minLength`/`maxLength`, common `format`s, `pattern` through a string
built from the parsed regex), numbers and integers (`minimum`/`maximum`, exclusive bounds in both
drafts' spellings, `multipleOf`), booleans and null. Not honoured: `not`, `if`/`then`/`else`,
`dependentSchemas`, and a `oneOf` whose branches overlap (the value may match more than one).
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping
from typing import Any

from itemeval.ids import sha256_hex
from itemeval.simulator._answers import filler
from itemeval.simulator._model import stable_unit
from itemeval.simulator._regex_strings import regex_string, search

#: Nesting beyond which optional properties, optional items and recursive branches are left out.
MAX_DEPTH = 6
#: The reply's fields, and the property names (lower case, letters and digits only) that carry
#: each.
_FIELDS: dict[str, tuple[str, ...]] = {
    "answer": (
        "answer", "finalanswer", "answertext", "response", "result", "output", "prediction",
        "choice", "selectedoption", "selection", "option", "label", "solution", "final",
    ),
    "reasoning": (
        "reasoning", "rationale", "explanation", "justification", "thoughts", "thinking",
        "thoughtprocess", "analysis", "reason", "chainofthought",
    ),
    "score": ("score", "rating", "grade", "points"),
    "winner": ("winner", "preferred", "better"),
}  # fmt: skip
FIELD_NAMES: dict[str, str] = {name: field for field, names in _FIELDS.items() for name in names}
_MISSING: Any = object()
_FORMATS: dict[str, str] = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "12:00:00Z",
    "duration": "P1D",
    "email": "sim@example.com",
    "idn-email": "sim@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/sim",
    "url": "https://example.com/sim",
    "iri": "https://example.com/sim",
    "uri-reference": "/sim",
    "iri-reference": "/sim",
    "uri-template": "https://example.com/{sim}",
    "json-pointer": "/sim",
    "relative-json-pointer": "0/sim",
    "regex": ".*",
}
_MERGED_MIN = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_MERGED_MAX = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")


def field_of(name: str) -> str | None:
    """The reply field a property of this name carries (`FIELD_NAMES`), if any."""
    norm = re.sub(r"[^a-z0-9]", "", name.lower())
    return FIELD_NAMES.get(norm) or ("answer" if "answer" in norm else None)


# A value's place in the schema; a name apart, as `_Builder.object` hides the builtin there.
_Path = tuple[object, ...]


def schema_value(schema: Any, fields: Mapping[str, Any], key: tuple[object, ...]) -> Any:
    """A value valid against `schema` (a JSON Schema document), carrying `fields`."""
    return _Builder(schema, fields, key).value(schema, (), 0, fields.get("answer", _MISSING))


class _Builder:
    def __init__(self, root: Any, fields: Mapping[str, Any], key: tuple[object, ...]):
        self.root = root
        self.fields = fields
        self.key = key

    def unit(self, path: tuple[object, ...], what: str) -> float:
        return stable_unit("schema", *self.key, *path, what)

    # ------------------------------------------------------------ schema plumbing

    def resolve(self, schema: Any, depth: int = 0) -> dict[str, Any]:
        """`schema` with its `$ref` followed and its `allOf` merged in."""
        if schema is True or schema is None:
            return {}
        if schema is False or not isinstance(schema, Mapping):
            return {}
        out = dict(schema)
        ref = out.pop("$ref", None)
        if isinstance(ref, str) and depth < 32:
            out = _merge(self.resolve(self.pointer(ref), depth + 1), out)
        for part in out.pop("allOf", None) or []:
            out = _merge(out, self.resolve(part, depth + 1))
        return out

    def pointer(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return {}  # a remote reference: nothing to follow
        node: Any = self.root
        for token in ref[1:].lstrip("/").split("/") if ref != "#" else []:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return {}
        return node

    # ------------------------------------------------------------ values

    def value(self, schema: Any, path: tuple[object, ...], depth: int, hint: Any = _MISSING) -> Any:
        node = self.resolve(schema)
        if hint is not _MISSING:
            fitted = self.fitted(node, hint)
            if fitted is not _MISSING:
                return fitted
        for _ in range(16):  # branches within branches
            branches = node.pop("anyOf", None) or node.pop("oneOf", None)
            if not branches:
                break
            node = _merge(node, self.branch(branches, depth))
        if "const" in node:
            return node["const"]
        if isinstance(node.get("enum"), list) and node["enum"]:
            enum = node["enum"]
            return enum[int(self.unit(path, "enum") * len(enum))]
        kind = _kind(node, depth)
        if kind == "object":
            return self.object(node, path, depth)
        if kind == "array":
            return self.array(node, path, depth)
        if kind == "integer":
            return self.number(node, path, integer=True)
        if kind == "number":
            return self.number(node, path, integer=False)
        if kind == "boolean":
            return self.unit(path, "bool") < 0.5
        if kind == "null":
            return None
        return self.string(node, path)

    def fitted(self, node: dict[str, Any], hint: Any, nesting: int = 0) -> Any:
        """`hint` made to fit `node` or one of its branches; `_MISSING` when none takes it."""
        branches = node.get("anyOf") or node.get("oneOf")
        if not branches or nesting > 16:
            return _fit(node, hint)
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        for branch in branches:
            fitted = self.fitted(_merge(rest, self.resolve(branch)), hint, nesting + 1)
            if fitted is not _MISSING:
                return fitted
        return _MISSING

    def branch(self, branches: list[Any], depth: int) -> dict[str, Any]:
        resolved = [self.resolve(b) for b in branches]
        if depth >= MAX_DEPTH:  # deep inside a recursive schema: the branch that ends it
            for node in resolved:
                if _kind(node, depth) not in ("object", "array"):
                    return node
        for node in resolved:
            if _kind(node, depth) != "null":
                return node
        return resolved[0]

    def object(self, node: Mapping[str, Any], path: tuple[object, ...], depth: int) -> Any:
        properties = node.get("properties") or {}
        required = [str(n) for n in node.get("required") or []]
        order = [n for n in node.get("propertyOrdering") or [] if n in properties]
        names = [*order, *(n for n in properties if n not in order)]
        names += [n for n in required if n not in names]
        if depth >= MAX_DEPTH:
            names = [n for n in names if n in required]
        most = node.get("maxProperties")
        if isinstance(most, int):
            optional = [n for n in names if n not in required]
            names = [
                n for n in names if n in required or n in optional[: max(0, most - len(required))]
            ]
        out: dict[str, Any] = {}
        for name in names:
            sub = properties.get(name, self.extra_schema(node, name))
            field = field_of(name)
            hint = self.fields.get(field, _MISSING) if field else _MISSING
            out[name] = self.value(sub, (*path, name), depth + 1, hint)
        least = node.get("minProperties")
        # Names beyond the listed ones: any (additionalProperties), or ones a pattern allows.
        open_ended = node.get("additionalProperties", True) is not False or bool(
            node.get("patternProperties")
        )
        count = 0
        while isinstance(least, int) and len(out) < least and open_ended and count < 100:
            count += 1
            name = self.extra_name(node, path, count)
            if name not in out:
                out[name] = self.value(self.extra_schema(node, name), (*path, name), depth + 1)
        return out

    def extra_schema(self, node: Mapping[str, Any], name: str) -> Any:
        for pattern, sub in (node.get("patternProperties") or {}).items():
            if search(pattern, name):
                return sub
        extra = node.get("additionalProperties")
        return extra if isinstance(extra, Mapping) else {}

    def extra_name(self, node: Mapping[str, Any], path: _Path, count: int) -> str:
        for pattern in node.get("patternProperties") or {}:
            made = regex_string(pattern, extra=count)
            if made is not None:
                return made
        return f"key{count}"

    def array(self, node: Mapping[str, Any], path: _Path, depth: int) -> list[Any]:
        items = node.get("items")
        prefix = node.get("prefixItems") or (items if isinstance(items, list) else [])
        rest = node.get("additionalItems") if isinstance(items, list) else items
        least = int(node.get("minItems") or 0)
        most = node.get("maxItems")
        count = max(least, len(prefix), 0 if depth >= MAX_DEPTH else 1)
        if isinstance(most, int):
            count = min(count, most)
        contains = node.get("contains")
        unique = bool(node.get("uniqueItems"))
        out: list[Any] = []
        seen: set[str] = set()
        for i in range(count):
            sub = prefix[i] if i < len(prefix) else rest
            if contains is not None and i == len(prefix):
                sub = {"allOf": [sub or {}, contains]}
            for attempt in range(16 if unique else 1):
                item = self.value(sub, (*path, i, attempt), depth + 1)
                mark = repr(item)
                if mark not in seen:
                    break
            seen.add(mark)
            out.append(item)
        return out

    def number(self, node: Mapping[str, Any], path: _Path, *, integer: bool) -> Any:
        low, high, low_open, high_open = _bounds(node)
        u = self.unit(path, "number")
        if integer:  # integer ends, openness folded in
            lo = -math.inf if low is None else math.floor(low) + 1 if low_open or low % 1 else low
            hi = (
                math.inf if high is None else math.ceil(high) - 1 if high_open or high % 1 else high
            )
            lo, hi = _span(lo, hi, 10)
            low_open = high_open = False
        else:
            lo, hi = _span(-math.inf if low is None else low, math.inf if high is None else high, 1)
        step = node.get("multipleOf")
        if isinstance(step, int | float) and not isinstance(step, bool) and step > 0:
            return _multiple(step, lo, hi, low_open, high_open, integer, u)
        if integer:
            return int(lo + int(u * (hi - lo + 1)))
        value = round(lo + (hi - lo) * (0.25 + 0.5 * u), 3)
        if not lo <= value <= hi or (low_open and value == lo) or (high_open and value == hi):
            value = (lo + hi) / 2
        return _number(value)

    def string(self, node: Mapping[str, Any], path: _Path) -> str:
        least = int(node.get("minLength") or 0)
        most = node.get("maxLength")
        pattern = node.get("pattern")
        text: str | None = None
        if isinstance(pattern, str):
            for extra in (0, 1, 3, 8, least):
                text = regex_string(pattern, extra=extra)
                if text is not None and len(text) >= least:
                    break
        if text is None:
            fmt = node.get("format")
            if fmt == "uuid":
                text = str(uuid.UUID(sha256_hex(repr((*self.key, *path)))[:32]))
            elif isinstance(fmt, str) and fmt in _FORMATS:
                text = _FORMATS[fmt]
            elif path and field_of(str(path[-1])) == "reasoning":
                text = filler((*self.key, *path), 2)
            else:
                text = f"sample {path[-1]}" if path and isinstance(path[-1], str) else "sample"
        if len(text) < least:
            text += "x" * (least - len(text))
        if isinstance(most, int):
            text = text[:most]
        return text


# --------------------------------------------------------------------------- fitting a hint


def _kind(node: Mapping[str, Any], depth: int = 0) -> str:
    """The type a value of `node` gets: the first one declared that is not null (null deep in
    a recursive schema when allowed), else what its keywords imply."""
    declared = node.get("type")
    if isinstance(declared, list):
        kinds = [str(k) for k in declared]
        if depth >= MAX_DEPTH and "null" in kinds:
            return "null"
        return next((k for k in kinds if k != "null"), kinds[0] if kinds else "string")
    if isinstance(declared, str):
        return declared
    if "properties" in node or "required" in node or "additionalProperties" in node:
        return "object"
    if "items" in node or "prefixItems" in node or "minItems" in node:
        return "array"
    if "minimum" in node or "maximum" in node or "multipleOf" in node:
        return "number"
    return "string"


def _fit(node: Mapping[str, Any], hint: Any) -> Any:
    """`hint` made to fit `node` (a resolved schema), or `_MISSING` when it does not."""
    if "const" in node:
        return node["const"] if _loose_equal(node["const"], hint) else _MISSING
    enum = node.get("enum")
    if isinstance(enum, list) and enum:
        return _fit_enum(enum, hint)
    declared = node.get("type")
    kinds = declared if isinstance(declared, list) else [declared] if declared else []
    if not kinds and _kind(node) in ("object", "array"):
        return _MISSING
    for kind in kinds or ["string", "number", "boolean"]:
        fitted = _fit_kind(node, str(kind), hint)
        if fitted is not _MISSING:
            return fitted
    return _MISSING


def _fit_kind(node: Mapping[str, Any], kind: str, hint: Any) -> Any:
    if kind == "null":
        return None if hint is None else _MISSING
    if hint is None or isinstance(hint, dict | list):
        return _MISSING
    if kind == "boolean":
        if isinstance(hint, bool):
            return hint
        word = str(hint).strip().lower()
        return {"true": True, "yes": True, "false": False, "no": False}.get(word, _MISSING)
    if kind in ("number", "integer"):
        number = _as_number(hint)
        if number is None or (kind == "integer" and not float(number).is_integer()):
            return _MISSING
        low, high, low_open, high_open = _bounds(node)
        if (low is not None and (number < low or (low_open and number == low))) or (
            high is not None and (number > high or (high_open and number == high))
        ):
            return _MISSING
        step = node.get("multipleOf")
        if isinstance(step, int | float) and step > 0 and not float(number / step).is_integer():
            return _MISSING
        return int(number) if kind == "integer" else _number(number)
    if kind == "string":
        if isinstance(hint, bool):
            return _MISSING
        text = str(hint)
        most = node.get("maxLength")
        if isinstance(most, int):
            text = text[:most]
        if len(text) < int(node.get("minLength") or 0):
            return _MISSING
        pattern = node.get("pattern")
        if isinstance(pattern, str) and not search(pattern, text):
            return _MISSING
        if node.get("format") in _FORMATS or node.get("format") == "uuid":
            return _MISSING  # a formatted string is made, never an answer squeezed into it
        return text
    return _MISSING


def _fit_enum(enum: list[Any], hint: Any) -> Any:
    for value in enum:
        if _loose_equal(value, hint):
            return value
    text = str(hint).strip().lower() if not isinstance(hint, dict | list) else ""
    for value in enum:
        if isinstance(value, str) and value.strip().lower() == text:
            return value
    # A letter answer names an option: the enum's entry at its index (B -> the second).
    if len(text) == 1 and "a" <= text <= "z" and ord(text) - ord("a") < len(enum):
        return enum[ord(text) - ord("a")]
    return _MISSING


def _loose_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _as_number(hint: Any) -> float | int | None:
    if isinstance(hint, bool):
        return None
    if isinstance(hint, int | float):
        return hint if math.isfinite(hint) else None
    try:
        value = float(str(hint).strip().replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# --------------------------------------------------------------------------- helpers


def _bounds(node: Mapping[str, Any]) -> tuple[float | None, float | None, bool, bool]:
    """(low, high, low exclusive, high exclusive) in either draft's spelling."""
    low, high = node.get("minimum"), node.get("maximum")
    low_open = high_open = False
    ex_low, ex_high = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
    if ex_low is True:  # draft 4: a flag on `minimum`
        low_open = low is not None
    elif isinstance(ex_low, int | float) and (low is None or ex_low >= low):
        low, low_open = ex_low, True
    if ex_high is True:
        high_open = high is not None
    elif isinstance(ex_high, int | float) and (high is None or ex_high <= high):
        high, high_open = ex_high, True
    return low, high, low_open, high_open


def _span(lo: float, hi: float, width: float) -> tuple[Any, Any]:
    """Finite ends: an open side is `width` away from the other (or 0 and `width`)."""
    if math.isinf(lo) and math.isinf(hi):
        return 0, width
    if math.isinf(lo):
        return hi - width, hi
    if math.isinf(hi):
        return lo, lo + width
    return lo, hi


def _multiple(
    step: float, lo: float, hi: float, low_open: bool, high_open: bool, integer: bool, u: float
) -> float | int:
    """A multiple of `step` between the ends, one whose quotient by `step` is a whole number in
    floating point too (validators divide: 3 * 0.1 / 0.1 is not 3)."""
    first, last = math.ceil(lo / step), math.floor(hi / step)
    start = first + int(u * max(1, last - first + 1))
    for k in (start, *range(first, min(last, first + 64) + 1)):
        value = k * step
        inside = lo <= value <= hi and not (
            (low_open and value == lo) or (high_open and value == hi)
        )
        whole = float(value / step).is_integer() and (not integer or float(value).is_integer())
        if inside and whole:
            return _number(value)
    return 0 if lo <= 0 <= hi else _number(first * step)


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Two schemas that must both hold, as one (the keywords this builder reads)."""
    out = dict(base)
    for key, value in extra.items():
        if key not in out:
            out[key] = value
        elif key == "properties" and isinstance(value, Mapping):
            merged = dict(out[key])
            for name, sub in value.items():
                merged[name] = {"allOf": [merged[name], sub]} if name in merged else sub
            out[key] = merged
        elif key == "required":
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key in _MERGED_MIN and isinstance(value, int | float):
            out[key] = max(out[key], value) if isinstance(out[key], int | float) else value
        elif key in _MERGED_MAX and isinstance(value, int | float):
            out[key] = min(out[key], value) if isinstance(out[key], int | float) else value
        elif key == "enum" and isinstance(value, list) and isinstance(out[key], list):
            common = [v for v in out[key] if any(_loose_equal(v, w) for w in value)]
            out[key] = common or value
        elif key == "type" and isinstance(value, list | str):
            mine = out[key] if isinstance(out[key], list) else [out[key]]
            theirs = value if isinstance(value, list) else [value]
            # Both must hold: the types in both (an integer is a number).
            common = [t for t in mine if t in theirs or (t == "integer" and "number" in theirs)]
            if "number" in mine and "integer" in theirs and "integer" not in common:
                common.append("integer")
            common = common or theirs
            out[key] = common[0] if len(common) == 1 else common
        elif key in ("items", "additionalProperties", "contains") and isinstance(value, Mapping):
            out[key] = {"allOf": [out[key], value]} if isinstance(out[key], Mapping) else value
        else:
            out[key] = value
    return out
