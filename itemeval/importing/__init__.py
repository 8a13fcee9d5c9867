"""Bring results from other tools into a store: Every Eval Ever records, and the logs of
lm-eval, inspect_ai and HELM (docs/importing.md). `import_sources` writes; `store_plan` reads a
store without a study file (what `report`, `status` and `export` do with `--store` alone).

The public names are `__all__` below, imported on first use. The modules are private: `_run` and
`_writer` write an import, `_catalog` its record, `_sources` finds the files, `_eee`,
`_eee_columns`, `_lm_eval`, `_inspect_log` and `_helm` read each tool's files into `_model`'s
samples, `_items` writes their items, `_keys` holds the keys seen, `_conditions` says what a
report notes of imported answers and lets a native condition reuse them, `_store_plan` plans
over a store alone. The records' format and the imported conditions as the design knows them
are planning's (`planning/_import_records.py`, `planning/_imported.py`): `make_plan` reads
them for a study's `imported:`, so they sit below this package."""

from __future__ import annotations

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

_MODULES: dict[str, tuple[str, ...]] = {
    "itemeval.planning._import_records": ("ImportRecord", "read_imports"),
    "itemeval.planning._imported": ("with_imported",),
    "_conditions": ("imported_notes", "reuse_imported"),
    "_run": ("ImportResult", "import_sources"),
    "_store_plan": ("store_plan",),
}
__all__, __getattr__, __dir__ = lazy_exports(
    __name__, {name: module for module, names in _MODULES.items() for name in names}
)


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from itemeval.importing._conditions import imported_notes as imported_notes
    from itemeval.importing._conditions import reuse_imported as reuse_imported
    from itemeval.importing._run import ImportResult as ImportResult
    from itemeval.importing._run import import_sources as import_sources
    from itemeval.importing._store_plan import store_plan as store_plan
    from itemeval.planning._import_records import ImportRecord as ImportRecord
    from itemeval.planning._import_records import read_imports as read_imports
    from itemeval.planning._imported import with_imported as with_imported
