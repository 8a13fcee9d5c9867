"""The floors inside `itemeval/export/` that docs/architecture.md states: `_table/` reads the
store and imports neither `_eee/` nor `_report/`; `_stats` and `_outputs` import nothing of
`export`."""

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


def test_table_reads_without_eee_or_report():
    files = sorted((EXPORT / "_table").glob("*.py"))
    assert len(files) >= 5
    for path in files:
        above = {
            m
            for m in _export_imports(path)
            if m.startswith(("itemeval.export._eee", "itemeval.export._report"))
        }
        assert not above, f"{_module(path)} imports {sorted(above)}"


def test_stats_and_outputs_stand_alone():
    for name in ("_stats.py", "_outputs.py"):
        assert not _export_imports(EXPORT / name), name


def test_every_directory_of_modules_is_a_package():
    """setuptools' `packages.find` leaves out directories without `__init__.py`: a module there
    would work from the checkout and be missing from the wheel."""
    for path in EXPORT.rglob("*.py"):
        assert (path.parent / "__init__.py").exists(), path
