"""A package's public names, imported on first use (PEP 562), so importing one module of a
package does not import the whole package.

    __all__, __getattr__, __dir__ = lazy_exports(
        __name__,
        '''
        plan: Plan make_plan commit_plan
        design: Design build_design
        ''',
    )
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str,
    exports: str | Mapping[str, str],
    *,
    fallback: str | None = None,
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """`__all__`, `__getattr__` and `__dir__` of `package`. `exports` names, line by line, a
    module and its public names (`module: name name ...`; a line without a colon goes on with
    the module above), or maps each name to its module. A module is one of the package (`plan`,
    `limits._ratebucket`) or an absolute path (`itemeval.api`). A name not exported is looked up
    in `fallback` (a module of the package) when given: the names of a module the package
    replaced."""
    namespace = sys.modules[package].__dict__
    if isinstance(exports, str):
        where: dict[str, str] = {}
        module = ""
        for line in exports.strip().splitlines():
            if ":" in line:  # else the names go on from the line above
                module, _, line = line.partition(":")
            where.update(dict.fromkeys(line.split(), module.strip()))
    else:
        where = dict(exports)
    # The table by absolute module, for the test that holds each package's `TYPE_CHECKING`
    # imports (what a type checker sees) to the same names (tests/core/test_lazy_exports.py).
    namespace["__lazy_exports__"] = {
        name: module if module.startswith("itemeval") else f"{package}.{module}"
        for name, module in where.items()
    }

    def __getattr__(name: str) -> Any:
        module = where.get(name, fallback)
        if module is None or name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        path = module if module.startswith("itemeval") else f"{package}.{module}"
        try:
            value = getattr(importlib.import_module(path), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *where])

    return sorted(where), __getattr__, __dir__
