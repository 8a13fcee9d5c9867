"""The Python API: `Study` and what its methods return, and the functions of the commands that
take no study (docs/python-api.md). The CLI is a thin layer over these names: it parses
arguments, calls them and prints (tests/cli/test_cli_uses_api.py holds this).

* `study`      `Study`: from a YAML file or a mapping; plan, estimate, run, status, results,
               export, report: what the CLI does
* `summaries`  `PlanSummary`, `EstimateSummary`, `RunSummary`, `StatusSummary`: the objects
               behind the CLI's output (`to_json()` is its `--json`)
* `datasets`   `validate_dataset`, `convert_dataset` (`itemeval validate`, `itemeval convert`)
* `stores`     `compact_store`, `import_sources` (`itemeval compact`, `itemeval import`)
* `limiters`   `list_limiters`, `remove_limiters` (`itemeval limiters`)
"""

from itemeval.api.datasets import (
    CONVERT_FORMATS,
    DEFAULT_ITEMS_PER_PART,
    DIALECTS,
    VALIDATE_FORMATS,
    ConvertedDataset,
    DatasetValidation,
    convert_dataset,
    validate_dataset,
)
from itemeval.api.limiters import list_limiters, remove_limiters
from itemeval.api.stores import (
    COMPACT_STAGES,
    StoreCompaction,
    SummaryRebuild,
    compact_store,
    import_sources,
    rebuild_store_summaries,
)
from itemeval.api.study import Study, write_starter_study
from itemeval.api.summaries import (
    EstimateSummary,
    PlanSummary,
    RunSummary,
    Selection,
    StatusSummary,
    format_usd,
    gate_verdict,
)
from itemeval.export import EEE_VERSIONS, RELATIONSHIPS
from itemeval.export import FORMATS as EXPORT_FORMATS
from itemeval.irt import FLAG_Q, q_text
from itemeval.report import format_leaderboard

__all__ = [
    "COMPACT_STAGES",
    "CONVERT_FORMATS",
    "DEFAULT_ITEMS_PER_PART",
    "DIALECTS",
    "EEE_VERSIONS",
    "EXPORT_FORMATS",
    "FLAG_Q",
    "RELATIONSHIPS",
    "VALIDATE_FORMATS",
    "ConvertedDataset",
    "DatasetValidation",
    "EstimateSummary",
    "PlanSummary",
    "RunSummary",
    "Selection",
    "StatusSummary",
    "StoreCompaction",
    "Study",
    "SummaryRebuild",
    "compact_store",
    "convert_dataset",
    "format_leaderboard",
    "format_usd",
    "gate_verdict",
    "import_sources",
    "list_limiters",
    "q_text",
    "rebuild_store_summaries",
    "remove_limiters",
    "validate_dataset",
    "write_starter_study",
]
