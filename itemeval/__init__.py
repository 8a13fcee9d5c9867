"""itemeval: distributed, resumable, budget-safe LLM benchmark evaluations on Ray.

The Python API (docs/python-api.md):

    import itemeval
    study = itemeval.Study.from_yaml("study.yaml")
    study.estimate().total_usd
    study.run(limit=20)
    table = study.results()          # the long table, a pyarrow Table

the commands that take no study: `itemeval.validate_dataset`, `convert_dataset`, `compact_store`,
`import_sources`, `list_limiters`, `remove_limiters`; and what plugins use: `itemeval.Score` and
`@itemeval.scorer` for custom scorers. Names are
imported on first use, so `import itemeval` stays light (the CLI starts fast).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

__version__ = "0.2.0"

_EXPORTS: dict[str, str] = {
    "Study": "itemeval.api",
    "PlanSummary": "itemeval.api",
    "EstimateSummary": "itemeval.api",
    "RunSummary": "itemeval.api",
    "StatusSummary": "itemeval.api",
    "DatasetValidation": "itemeval.api",
    "ConvertedDataset": "itemeval.api",
    "StoreCompaction": "itemeval.api",
    "validate_dataset": "itemeval.api",
    "convert_dataset": "itemeval.api",
    "compact_store": "itemeval.api",
    "import_sources": "itemeval.api",
    "list_limiters": "itemeval.api",
    "remove_limiters": "itemeval.api",
    "StudyConfig": "itemeval.config",
    "Score": "itemeval.scoring",
    "scorer": "itemeval.scoring",
    "ConfigError": "itemeval.errors",
    "ExitCode": "itemeval.errors",
    "InputError": "itemeval.errors",
    "ItemevalError": "itemeval.errors",
}

__all__ = [
    "ConfigError",
    "ConvertedDataset",
    "DatasetValidation",
    "EstimateSummary",
    "ExitCode",
    "InputError",
    "ItemevalError",
    "PlanSummary",
    "RunSummary",
    "Score",
    "StatusSummary",
    "StoreCompaction",
    "Study",
    "StudyConfig",
    "__version__",
    "compact_store",
    "convert_dataset",
    "import_sources",
    "list_limiters",
    "remove_limiters",
    "scorer",
    "validate_dataset",
]


_, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from itemeval.api import (
        ConvertedDataset,
        DatasetValidation,
        EstimateSummary,
        PlanSummary,
        RunSummary,
        StatusSummary,
        StoreCompaction,
        Study,
        compact_store,
        convert_dataset,
        import_sources,
        list_limiters,
        remove_limiters,
        validate_dataset,
    )
    from itemeval.config import StudyConfig
    from itemeval.errors import ConfigError, ExitCode, InputError, ItemevalError
    from itemeval.scoring import Score, scorer
