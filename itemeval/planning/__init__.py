"""Study planning: everything before the first model call.

    from itemeval.planning import make_plan, commit_plan
    plan = make_plan(study, limit=20)                       # reads only
    plan.estimate.total_usd
    commit_plan(plan)                                       # pins datasets, snapshots items

- `design.py`: the design grid (generate, grade and panel conditions, their content-derived ids)
- `plan.py`: `make_plan`, `refresh_estimate`, `restrict_plan`, `commit_plan`, `check_cap_bounds`
- `estimate.py`: tokens and USD per stage and model, and the confirmation gate
- `calibration.py`, `usage_rows.py`: the estimate's corrections learned from reported usage
- `item_index.py`: the plan's item index, cut into part runs for shards

Names are imported on first use, so importing one module of the package stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    # the plan
    "DatasetPlan": "plan",
    "Plan": "plan",
    "check_cap_bounds": "plan",
    "commit_plan": "plan",
    "make_plan": "plan",
    "refresh_estimate": "plan",
    "restrict_plan": "plan",
    # the design grid
    "Design": "design",
    "GenerateCondition": "design",
    "GradeCondition": "design",
    "PanelCondition": "design",
    "build_design": "design",
    # the estimate and the gate
    "Estimate": "estimate",
    "EstimateLine": "estimate",
    "build_estimate": "estimate",
    "gate": "estimate",
}

__all__ = [
    "DatasetPlan",
    "Design",
    "Estimate",
    "EstimateLine",
    "GenerateCondition",
    "GradeCondition",
    "PanelCondition",
    "Plan",
    "build_design",
    "build_estimate",
    "check_cap_bounds",
    "commit_plan",
    "gate",
    "make_plan",
    "refresh_estimate",
    "restrict_plan",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name, "plan")
    try:
        value = getattr(importlib.import_module(f"itemeval.planning.{module}"), name)
    except AttributeError:
        raise AttributeError(f"module 'itemeval.planning' has no attribute {name!r}") from None
    # Other names of the former module `itemeval.planning` (now `itemeval.planning.plan`) still
    # resolve here for one release.
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # pragma: no cover
    from itemeval.planning.design import (
        Design,
        GenerateCondition,
        GradeCondition,
        PanelCondition,
        build_design,
    )
    from itemeval.planning.estimate import Estimate, EstimateLine, build_estimate, gate
    from itemeval.planning.plan import (
        DatasetPlan,
        Plan,
        check_cap_bounds,
        commit_plan,
        make_plan,
        refresh_estimate,
        restrict_plan,
    )
