"""The Python API: `Study` and what its methods return (docs/python-api.md).

* `study`      `Study`: from a YAML file or a mapping; plan, estimate, run, status, results,
               export, report: what the CLI does, which is a thin layer over it
* `summaries`  `PlanSummary`, `EstimateSummary`, `RunSummary`, `StatusSummary`: the objects
               behind the CLI's output (`to_json()` is its `--json`)
"""

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

__all__ = [
    "EstimateSummary",
    "PlanSummary",
    "RunSummary",
    "Selection",
    "StatusSummary",
    "Study",
    "format_usd",
    "gate_verdict",
    "write_starter_study",
]
