"""Study planning: everything before the first model call.

    from itemeval.planning import make_plan, commit_plan
    plan = make_plan(study, limit=20)                       # reads only
    plan.estimate.total_usd
    commit_plan(plan)                                       # pins datasets, snapshots items

- `_design`: the design grid (generate, grade and panel conditions, their content-derived ids)
- `_plan`: `make_plan`, `refresh_estimate`, `restrict_plan`, `commit_plan`
- `_cap_bounds`: `check_cap_bounds`, a capped run's calls priced and bounded before any is sent
- `_tokens`: the estimate's prior, tokens counted from the real prompts
- `_estimate`: tokens and USD per stage and model, and the confirmation gate
- `_calibration`, `_usage_rows`: the estimate's corrections learned from reported usage
- `_item_index`: the plan's item index, cut into part runs for shards
- `_item_keys`: `analysis.cluster_by` checked against the items while they are read

The public names are `__all__`, imported on first use, so importing one module of the
package stays light; the modules are private.
"""

from __future__ import annotations

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _plan: DatasetPlan Plan commit_plan keep_item_tables make_plan refresh_estimate restrict_plan
    _cap_bounds: check_cap_bounds
    _design: Design GenerateCondition GradeCondition PanelCondition build_design
    _estimate: Estimate EstimateLine build_estimate gate
    _item_index: PartRun SelectedItems build_item_index
    _item_keys: CLUSTER_ATTRIBUTES
    """,
)
