"""Bring results from other tools into a store: Every Eval Ever records, and the logs of
lm-eval, inspect_ai and HELM (docs/importing.md). `import_sources` writes; `store_plan` reads a
store without a study file (what `report`, `status` and `export` do with `--store` alone).

The public names are `__all__` below, imported on first use: planning needs only
`_conditions` (a study's `imported:`), not the readers. The modules are private: `_run` and
`_writer` write an import, `_catalog` lists what a store imported, `_sources` finds the files,
`_eee`, `_eee_columns`, `_lm_eval`, `_inspect_log` and `_helm` read each tool's files into
`_model`'s samples, `_items` writes their items, `_keys` holds the keys seen, `_conditions`
gives the design its imported conditions, `_store_plan` plans over a store alone."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_NAMES = {
    "ImportRecord": "itemeval.importing._catalog",
    "read_imports": "itemeval.importing._catalog",
    "imported_notes": "itemeval.importing._conditions",
    "reuse_imported": "itemeval.importing._conditions",
    "with_imported": "itemeval.importing._conditions",
    "ImportResult": "itemeval.importing._run",
    "import_sources": "itemeval.importing._run",
    "store_plan": "itemeval.importing._store_plan",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'itemeval.importing' has no attribute {name!r}")
    return getattr(import_module(module), name)
