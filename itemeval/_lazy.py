"""A package's public names imported on first use: the package's `__getattr__` (PEP 562).

`itemeval.statistics` and `itemeval.importing` use it, so that `import itemeval` and the
commands that never compare or import load neither their modules nor numpy or scipy.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_names(package: str, modules: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """Each name of `modules` (a module of `package` -> its public names) -> its module."""
    return {name: f"{package}.{module}" for module, names in modules.items() for name in names}


def lazy_getattr(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of `package` that answers each of `names` from its module."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module), name)

    return __getattr__
