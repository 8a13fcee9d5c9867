"""A string that a regular expression finds: what the sim-server writes for a schema's `pattern`.

Built from the regex as Python's own parser reads it (`re._parser`, private but stable since
3.11: no third-party dependency): a literal as itself, a class as one of its members, a
repeat its minimum times (plus `extra`), a branch as its first alternative, a back-reference as
what its group wrote. Anchors and lookarounds write nothing; the result is checked with
`re.search` (JSON Schema's unanchored match), so a pattern this cannot satisfy gives None.
"""

from __future__ import annotations

import re
from typing import Any


def search(pattern: str, text: str) -> bool:
    """Does `pattern` occur in `text`? (A pattern Python cannot read is not held against it.)"""
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return True


def regex_string(pattern: str, *, extra: int = 0) -> str | None:
    """A string in which `pattern` is found (JSON Schema's unanchored match), built from the
    parsed regex: each repeat `extra` times beyond its minimum (within its maximum); None when
    the pattern cannot be read or the string built does not match (lookarounds, say)."""
    try:
        # The stdlib's own regex parser (private, stable since 3.11): no third-party dependency.
        from re import _parser  # type: ignore[attr-defined]  # private: typeshed omits it

        tree = _parser.parse(pattern)
        text = _Regex(extra).build(list(tree))
    except (re.error, RecursionError, ValueError, TypeError, IndexError, OverflowError):
        return None
    return text if search(pattern, text) else None


class _Regex:
    def __init__(self, extra: int):
        self.extra = extra
        self.groups: dict[int, str] = {}

    def build(self, items: list[Any]) -> str:
        return "".join(self.one(op, arg) for op, arg in items)

    def one(self, op: Any, arg: Any) -> str:
        name = str(op)
        if name == "LITERAL":
            return chr(arg)
        if name == "NOT_LITERAL":
            return "a" if arg != ord("a") else "b"
        if name == "ANY":
            return "a"
        if name == "IN":
            return _char_in(arg)
        if name == "BRANCH":
            return self.build(list(arg[1][0]))
        if name == "SUBPATTERN":
            text = self.build(list(arg[-1]))
            if arg[0] is not None:
                self.groups[arg[0]] = text
            return text
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            count = min(low + self.extra, high)
            return "".join(self.build(list(sub)) for _ in range(count))
        if name == "ATOMIC_GROUP":
            return self.build(list(arg))
        if name == "GROUPREF":
            return self.groups.get(arg, "")
        return ""  # AT (anchors), ASSERT, ASSERT_NOT, ...: nothing to write


def _char_in(items: list[Any]) -> str:
    negate = bool(items) and str(items[0][0]) == "NEGATE"
    if not negate:
        op, arg = items[0]
        name = str(op)
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            return chr(arg[0])
        if name == "CATEGORY":
            return _CATEGORY_CHARS.get(str(arg), "a")
    for candidate in "aA0_- .x":
        if not any(_in_item(candidate, op, arg) for op, arg in items[1:]):
            return candidate
    return "~"


def _in_item(char: str, op: Any, arg: Any) -> bool:
    name = str(op)
    if name == "LITERAL":
        return ord(char) == arg
    if name == "RANGE":
        return arg[0] <= ord(char) <= arg[1]
    if name == "CATEGORY":
        test = _CATEGORY_TESTS.get(str(arg))
        return bool(test and test(char))
    return False


_CATEGORY_CHARS = {
    "CATEGORY_DIGIT": "0",
    "CATEGORY_NOT_DIGIT": "a",
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_SPACE": "a",
    "CATEGORY_WORD": "a",
    "CATEGORY_NOT_WORD": "-",
}
_CATEGORY_TESTS = {
    "CATEGORY_DIGIT": str.isdigit,
    "CATEGORY_NOT_DIGIT": lambda c: not c.isdigit(),
    "CATEGORY_SPACE": str.isspace,
    "CATEGORY_NOT_SPACE": lambda c: not c.isspace(),
    "CATEGORY_WORD": lambda c: c.isalnum() or c == "_",
    "CATEGORY_NOT_WORD": lambda c: not (c.isalnum() or c == "_"),
}
