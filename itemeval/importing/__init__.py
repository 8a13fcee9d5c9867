"""Bring results from other tools into a store: Every Eval Ever records, and the logs of
lm-eval, inspect_ai and HELM (docs/importing.md). `import_sources` writes; `store_plan` reads a
store without a study file (what `report`, `status` and `export` do with `--store` alone)."""

from itemeval.importing.catalog import ImportRecord, read_imports
from itemeval.importing.run import ImportResult, import_sources

__all__ = ["ImportRecord", "ImportResult", "import_sources", "read_imports"]
