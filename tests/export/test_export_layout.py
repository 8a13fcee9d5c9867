"""The layout inside `itemeval/export/` that its docstring states: `_outputs` imports nothing of
`export`; every directory of modules is a package. (The floors between packages:
tests/core/test_floors.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

import itemeval.export

EXPORT = Path(itemeval.export.__file__).parent


def _export_imports(path: Path) -> set[str]:
    """The `itemeval.export...` modules a file imports, as dotted names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        names.update(m for m in modules if m.startswith("itemeval.export"))
    return names


def _module(path: Path) -> str:
    return ".".join(("itemeval", *path.relative_to(EXPORT.parent).with_suffix("").parts))


def test_outputs_stand_alone():
    assert not _export_imports(EXPORT / "_outputs.py")


def test_every_directory_of_modules_is_a_package():
    """setuptools' `packages.find` leaves out directories without `__init__.py`: a module there
    would work from the checkout and be missing from the wheel."""
    for path in EXPORT.rglob("*.py"):
        assert (path.parent / "__init__.py").exists(), path
