"""Attribute names matched case-insensitively, and lenient reading of attribute values.

Both specs say attribute names are matched case-insensitively (`title`, `Title`, `TITLE`).
`split_attributes` finds the standard attributes of a mapping under any spelling, remembers the
spelling so it can be written back, and keeps every other key as an ad hoc attribute.
The `read_*` functions accept what is unambiguous (a number where text is expected) with a
warning and reject the rest; they return the value and append `Problem`s to a list.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from itemeval.datasets.format._findings import Where
from itemeval.errors import Problem

# RFC 3986 "unreserved" characters: the spec's "web-friendly characters".
IDENTIFIER_PATTERN = re.compile(r"^[A-Za-z0-9._~-]+\Z")
IDENTIFIER_HINT = "use only letters, digits and - _ . ~"


class _Missing:
    """The value of an attribute that is not there at all (as opposed to `null`)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass
class SplitAttributes:
    """The result of `split_attributes`."""

    values: dict[str, Any] = field(default_factory=dict)  # canonical name -> value
    spellings: dict[str, str] = field(default_factory=dict)  # canonical -> key, if different
    extras: dict[str, Any] = field(default_factory=dict)  # ad hoc attributes, as written
    problems: list[Problem] = field(default_factory=list)


def split_attributes(
    raw: Mapping[Any, Any], standard: Mapping[str, str], where: Where
) -> SplitAttributes:
    """Separate standard attributes (`standard` maps casefolded name -> canonical name) from
    ad hoc ones. Two keys that differ only in case are an error: which one wins is ambiguous."""
    result = SplitAttributes()
    for key, value in raw.items():
        canonical = standard.get(key.casefold()) if isinstance(key, str) else None
        if canonical is None:
            result.extras[str(key) if not isinstance(key, str) else key] = value
            continue
        if canonical in result.values:
            first = result.spellings.get(canonical, canonical)
            result.problems.append(
                where.error(
                    f"attribute given twice, as {first!r} and {key!r} "
                    "(attribute names are case-insensitive)",
                    field=canonical,
                    hint="keep one of them",
                )
            )
            continue
        result.values[canonical] = value
        if key != canonical:  # only unusual spellings, so equal content compares equal
            result.spellings[canonical] = key
    return result


def format_number(value: int | float) -> str:
    return str(value) if isinstance(value, int) else repr(value)


def read_text(
    value: Any,
    name: str,
    where: Where,
    problems: list[Problem],
    *,
    required: bool,
    allow_empty: bool = False,
) -> str | None:
    """A string attribute. Numbers are read as text with a warning; None/absent is an error
    when `required`; anything else (lists, objects, booleans) is an error."""
    if value is None or value is MISSING:
        if required:
            what = "missing" if value is MISSING else "null"
            problems.append(where.error(f"required attribute is {what}", field=name))
        return None
    if isinstance(value, bool):
        problems.append(where.error(f"expected text, found JSON {str(value).lower()}", field=name))
        return None
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(where.error(f"expected text, found {value!r}", field=name))
            return None
        problems.append(where.warning("a number where text is expected; read as text", field=name))
        return format_number(value)
    if not isinstance(value, str):
        problems.append(where.error(f"expected text, found a {_json_type(value)}", field=name))
        return None
    if not allow_empty and not value.strip():
        problems.append(where.error("expected non-empty text, found an empty string", field=name))
        return None
    return value


def read_identifier(value: Any, name: str, where: Where, problems: list[Problem]) -> str | None:
    """A required identifier of web-friendly characters."""
    text = read_text(value, name, where, problems, required=True)
    if text is None:
        return None
    if not IDENTIFIER_PATTERN.match(text):
        problems.append(
            where.error(
                f"identifier {text!r} has characters that are not web-friendly",
                field=name,
                hint=IDENTIFIER_HINT,
            )
        )
        return None
    return text


def read_fraction(value: Any, name: str, where: Where, problems: list[Problem]) -> float | None:
    """An optional number in [0, 1] (numeric strings are read with a warning)."""
    if value is None or value is MISSING:
        return None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            problems.append(
                where.error(f"expected a number between 0 and 1, found {value!r}", field=name)
            )
            return None
        problems.append(where.warning("a number given as text; read as a number", field=name))
        value = number
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.append(
            where.error(
                f"expected a number between 0 and 1, found a {_json_type(value)}", field=name
            )
        )
        return None
    if not 0.0 <= value <= 1.0:  # false for NaN too; math.isfinite overflows on a huge int
        problems.append(
            where.error(f"expected a number between 0 and 1, found {value!r}", field=name)
        )
        return None
    return float(value)


def read_text_or_list(
    value: Any, name: str, where: Where, problems: list[Problem], *, required: bool
) -> str | list[str] | None:
    """Text, or a list of texts (creators, subjects, languages)."""
    if isinstance(value, list):
        texts = [
            read_text(v, f"{name}[{i}]", where, problems, required=True)
            for i, v in enumerate(value)
        ]
        if not value:
            if required:
                problems.append(where.error("expected text or a non-empty list", field=name))
            return None
        return None if any(t is None for t in texts) else [t for t in texts if t is not None]
    return read_text(value, name, where, problems, required=required)


def _json_type(value: Any) -> str:
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, bool):
        return "boolean"
    return type(value).__name__
