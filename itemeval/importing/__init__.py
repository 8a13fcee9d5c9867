"""Bring results from other tools into a store: Every Eval Ever records, and the logs of
lm-eval, inspect_ai and HELM (docs/importing.md). `import_sources` writes; `store_plan` reads a
store without a study file (what `report`, `status` and `export` do with `--store` alone).

The names are imported on first use: planning needs only `conditions` (a study's `imported:`),
not the readers."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_NAMES = {
    "ImportRecord": "itemeval.importing.catalog",
    "read_imports": "itemeval.importing.catalog",
    "ImportResult": "itemeval.importing.run",
    "import_sources": "itemeval.importing.run",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'itemeval.importing' has no attribute {name!r}")
    return getattr(import_module(module), name)
