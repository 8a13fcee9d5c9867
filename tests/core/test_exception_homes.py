"""Exceptions live where docs/architecture.md says: `itemeval/errors.py` defines every deliberate
exception. One defined anywhere else must be a private control-flow signal named in
`itemeval.errors`' docstring (and below); a class that moved keeps its old import path."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import itemeval
import itemeval.errors

PACKAGE = Path(itemeval.__file__).parent

#: Defined near their code: nothing outside their module names them (errors.py says why).
KEPT_NEAR_CODE = {"RunGone"}
KEPT_PRIVATE = {"_Busy", "_NotFound", "_Reject", "_NotUtf8", "_Restart"}

#: Moved into errors.py; the old module re-exports each (old imports keep working).
MOVED = {
    "TransientFailure": "itemeval.providers._retry",
    "MalformedBody": "itemeval.providers._transport",
    "PermitsUnavailable": "itemeval.providers.limits._concurrency",
    "BatchApiError": "itemeval.providers._batch_client",
    "UncertainCreate": "itemeval.providers._batch_client",
    "LimiterUnreachable": "itemeval.providers.limits._machine",
    "TemplateFieldError": "itemeval.render",
    "ScorerError": "itemeval.scoring._custom",
    "LedgerUnavailable": "itemeval.calls._spend",
    "WorkerLost": "itemeval.runtime._dispatch",
    "Interrupted": "itemeval.calls._shard_calls",
    "NotSent": "itemeval.providers.money._attempts",
    "Stopped": "itemeval.store._compact_merge",
    "Vanished": "itemeval.store._compact_merge",
}

#: Base names that make a class an exception: the builtin ones, and asyncio's and
#: concurrent.futures' (referred to as `asyncio.CancelledError`, `TimeoutError`, ...).
EXCEPTION_BASES = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
} | {"CancelledError", "InvalidStateError", "IncompleteReadError", "LimitOverrunError"}


def _class_bases(tree: ast.AST) -> list[tuple[str, list[str], int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = []
            for base in node.bases:
                if isinstance(base, ast.Name):
                    bases.append(base.id)
                elif isinstance(base, ast.Attribute):
                    bases.append(base.attr)
            out.append((node.name, bases, node.lineno))
    return out


def exception_classes(root: Path) -> dict[str, list[str]]:
    """Every class under `root` that derives from an exception (directly, or through another
    class defined there), by name: where each is defined (`path:line`)."""
    classes = [
        (name, bases, f"{path.relative_to(root.parent)}:{line}")
        for path in sorted(root.rglob("*.py"))
        for name, bases, line in _class_bases(ast.parse(path.read_text(), str(path)))
    ]
    known = set(EXCEPTION_BASES)
    while True:  # to a fixed point: subclasses of subclasses
        more = {name for name, bases, _ in classes if name not in known and known & set(bases)}
        if not more:
            break
        known |= more
    found: dict[str, list[str]] = {}
    for name, bases, where in classes:
        if known & set(bases):
            found.setdefault(name, []).append(where)
    return found


def test_every_exception_is_defined_in_errors_py_or_named_as_kept():
    found = exception_classes(PACKAGE)
    outside = {
        name: [w for w in where if not w.startswith("itemeval/errors.py")]
        for name, where in found.items()
    }
    outside = {name: where for name, where in outside.items() if where}
    unexpected = sorted(set(outside) - KEPT_NEAR_CODE - KEPT_PRIVATE)
    assert not unexpected, (
        "exception classes defined outside itemeval/errors.py: "
        + "; ".join(f"{n} ({', '.join(outside[n])})" for n in unexpected)
        + ". Define them in errors.py (re-export at the old place), or, for a private "
        "control-flow signal, name it in errors.py's docstring and in KEPT_NEAR_CODE."
    )
    assert set(outside) == KEPT_NEAR_CODE | KEPT_PRIVATE, "stale: " + str(
        sorted(KEPT_NEAR_CODE | KEPT_PRIVATE - set(outside))
    )
    assert len(found) >= 25  # the scan sees errors.py's classes too


def test_errors_py_says_which_stay_near_their_code_and_why():
    doc = itemeval.errors.__doc__ or ""
    for name in sorted(KEPT_NEAR_CODE | KEPT_PRIVATE | set(MOVED)):
        assert f"`{name}`" in doc or f".{name}`" in doc, name


def test_moved_exceptions_keep_their_old_import_path():
    for name, old in MOVED.items():
        moved = getattr(itemeval.errors, name)
        assert issubclass(moved, BaseException)
        assert getattr(importlib.import_module(old), name) is moved, (old, name)


def test_the_scan_sees_a_new_exception(tmp_path):
    package = tmp_path / "itemeval"
    (package / "sub").mkdir(parents=True)
    (package / "errors.py").write_text("class Known(Exception):\n    pass\n")
    (package / "sub" / "mod.py").write_text(
        "import asyncio\n"
        "class Base(ValueError): ...\n"
        "class Derived(Base): ...\n"
        "class Stop(asyncio.CancelledError): ...\n"
        "class Plain: ...\n"
    )
    found = exception_classes(package)
    assert set(found) == {"Known", "Base", "Derived", "Stop"}
    assert found["Derived"] == ["itemeval/sub/mod.py:3"]
