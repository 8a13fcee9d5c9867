"""Study planning: everything before the first model call.

    from itemeval.planning import make_plan, commit_plan
    plan = make_plan(study, limit=20)                       # reads only
    plan.estimate.total_usd
    commit_plan(plan)                                       # pins datasets, snapshots items

- `design.py`: the design grid (generate, grade and panel conditions, their content-derived ids)
- `plan.py`: `make_plan`, `refresh_estimate`, `restrict_plan`, `commit_plan`, `check_cap_bounds`
- `tokens.py`: the estimate's prior, tokens counted from the real prompts
- `estimate.py`: tokens and USD per stage and model, and the confirmation gate
- `calibration.py`, `usage_rows.py`: the estimate's corrections learned from reported usage
- `item_index.py`: the plan's item index, cut into part runs for shards

Names are imported on first use, so importing one module of the package stays light.
"""

from __future__ import annotations

from itemeval._util.lazy import lazy_exports

# Other names of the former module `itemeval.planning` (now `itemeval.planning.plan`) still
# resolve here (`fallback`) for one release.
__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    plan: DatasetPlan Plan check_cap_bounds commit_plan make_plan refresh_estimate restrict_plan
    design: Design GenerateCondition GradeCondition PanelCondition build_design
    estimate: Estimate EstimateLine build_estimate gate
    """,
    fallback="plan",
)
