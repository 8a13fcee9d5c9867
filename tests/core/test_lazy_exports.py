"""Each package that imports its public names on first use (`lazy_exports`) also imports the
same names under `if TYPE_CHECKING:`, which is all a type checker or an editor reads: the two
lists name the same names, and each import there is the object the package gives at run time,
so neither can drift from the other."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _lazy_packages() -> list[str]:
    found = []
    for init in sorted((ROOT / "itemeval").rglob("__init__.py")):
        if "lazy_exports(" in init.read_text():
            parts = init.parent.relative_to(ROOT).parts
            found.append(".".join(parts))
    return found


def _type_checking_imports(init: Path) -> dict[str, tuple[str, str]]:
    """The names bound under the module's top-level `if TYPE_CHECKING:`: name -> (module, the
    name imported from it)."""
    names: dict[str, tuple[str, str]] = {}
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.level == 0, ast.unparse(stmt)
                for alias in stmt.names:
                    bound = alias.asname or alias.name
                    assert bound not in names, f"{bound} imported twice in {init}"
                    names[bound] = (str(stmt.module), alias.name)
    return names


LAZY_PACKAGES = _lazy_packages()


def test_the_lazy_packages_are_found() -> None:
    assert {"itemeval", "itemeval.statistics", "itemeval.providers.limits"} <= set(LAZY_PACKAGES)


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_type_checking_imports_name_the_lazy_table(name: str) -> None:
    package = importlib.import_module(name)
    table: dict[str, str] = package.__lazy_exports__
    init = Path(str(package.__file__))
    imports = _type_checking_imports(init)
    missing = sorted(set(table) - set(imports))
    wanted = "\n".join(f"    from {table[n]} import {n} as {n}" for n in missing)
    assert missing == [], f"lazy in {init}, unseen by a type checker; add:\n{wanted}"
    assert sorted(set(imports) - set(table)) == [], f"under TYPE_CHECKING in {init}, not lazy"
    assert set(table) <= set(package.__all__)
    for bound, (module, imported) in imports.items():
        seen = getattr(importlib.import_module(module), imported)
        assert seen is getattr(package, bound), f"{name}.{bound}: {module}.{imported} differs"
