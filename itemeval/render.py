"""The one template language of itemeval: `{{ name }}` placeholders, nothing else.

Used by prompt and rubric templates and by dataset mappings. It is brace-safe by construction:

* only `{{ identifier }}` or `{{ identifier.key.key }}` is a placeholder; a single `{`, LaTeX
  (`\\frac{a}{b}`), JSON (`{"score": 1}`) and code are literal text in a template;
* rendering is one left-to-right pass over the *template*; substituted values are never scanned
  again, so braces, `{{ ... }}` or anything else inside item text is copied as it is.

There are no filters, conditionals or loops on purpose: templates are content-hashed and their
meaning must be obvious from reading them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from itemeval.errors import TemplateFieldError

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_\-]+)*)\s*\}\}")


def placeholders(template: str) -> list[str]:
    """The placeholder names in `template`, in order of first appearance."""
    seen: dict[str, None] = {}
    for match in PLACEHOLDER.finditer(template):
        seen.setdefault(match.group(1), None)
    return list(seen)


def lookup(values: Mapping[str, Any], name: str) -> Any:
    """Resolve a dotted name (`metadata.subject`) against nested mappings."""
    if type(values) is dict and "." not in name and name in values:  # without the ABC check
        return values[name]
    current: Any = values
    for part in name.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        else:
            raise TemplateFieldError(name, sorted(_flat_names(values)))
    return current


def render(template: str, values: Mapping[str, Any]) -> str:
    """Substitute every placeholder; `None` renders as an empty string, other values as `str()`."""
    pieces = list(_pieces(template))
    for index in range(1, len(pieces), 2):
        value = lookup(values, pieces[index])
        pieces[index] = "" if value is None else str(value)
    return "".join(pieces)


@functools.lru_cache(maxsize=512)
def _pieces(template: str) -> tuple[str, ...]:
    """`template` cut at its placeholders, once per template (a run renders it per item):
    literal text at even positions, placeholder names at odd ones."""
    return tuple(PLACEHOLDER.split(template))


def check(template: str, available: set[str] | frozenset[str]) -> list[str]:
    """Placeholders whose first segment is not in `available` (for load-time validation)."""
    return [name for name in placeholders(template) if name.split(".")[0] not in available]


def _flat_names(values: Mapping[str, Any], prefix: str = "") -> list[str]:
    names: list[str] = []
    for key, value in values.items():
        full = f"{prefix}{key}"
        names.append(full)
        if isinstance(value, Mapping) and len(value) <= 50:
            names.extend(_flat_names(value, prefix=f"{full}."))
    return names
