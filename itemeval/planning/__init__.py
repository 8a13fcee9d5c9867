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

from typing import TYPE_CHECKING

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


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from itemeval.planning._cap_bounds import check_cap_bounds as check_cap_bounds
    from itemeval.planning._design import Design as Design
    from itemeval.planning._design import GenerateCondition as GenerateCondition
    from itemeval.planning._design import GradeCondition as GradeCondition
    from itemeval.planning._design import PanelCondition as PanelCondition
    from itemeval.planning._design import build_design as build_design
    from itemeval.planning._estimate import Estimate as Estimate
    from itemeval.planning._estimate import EstimateLine as EstimateLine
    from itemeval.planning._estimate import build_estimate as build_estimate
    from itemeval.planning._estimate import gate as gate
    from itemeval.planning._item_index import PartRun as PartRun
    from itemeval.planning._item_index import SelectedItems as SelectedItems
    from itemeval.planning._item_index import build_item_index as build_item_index
    from itemeval.planning._item_keys import CLUSTER_ATTRIBUTES as CLUSTER_ATTRIBUTES
    from itemeval.planning._plan import DatasetPlan as DatasetPlan
    from itemeval.planning._plan import Plan as Plan
    from itemeval.planning._plan import commit_plan as commit_plan
    from itemeval.planning._plan import keep_item_tables as keep_item_tables
    from itemeval.planning._plan import make_plan as make_plan
    from itemeval.planning._plan import refresh_estimate as refresh_estimate
    from itemeval.planning._plan import restrict_plan as restrict_plan
