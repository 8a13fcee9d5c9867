"""A capped run's calls each have a worst case the run can price, checked before anything is
sent: a price for every model and a bounded output for every call (`check_cap_bounds`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from itemeval.config import StudyConfig
from itemeval.errors import ConfigError, Problem
from itemeval.providers.money import output_token_bound
from itemeval.providers.types import SamplingParams

if TYPE_CHECKING:
    from itemeval.planning._plan import Plan


def check_cap_bounds(plan: Plan, stages: Sequence[str]) -> None:
    """Under a cap (`budget.max_usd` or `budget.study_max_usd`) every call must have a worst case
    the run can price: a price (the packaged table or the study's `pricing:` file) and a bounded
    output (a `max_tokens`, or the model's `max_output` in the price table). Refuses the run
    before anything is sent (exit 2)."""
    study = plan.study
    if study.budget.max_usd is None and study.budget.study_max_usd is None:
        return
    cap_field = "budget.max_usd" if study.budget.max_usd is not None else "budget.study_max_usd"
    calls: list[tuple[str, str, str, SamplingParams]] = []
    if "generate" in stages:
        for c in plan.design.generate:
            calls.append((c.slug, c.model_id, c.endpoint, c.params))
    if "grade" in stages:
        for c in plan.design.judges:
            assert c.model_id and c.endpoint and c.params
            calls.append((c.slug, c.model_id, c.endpoint, c.params))
    problems = []
    unpriced: set[str] = set()
    for slug, model, endpoint, params in calls:
        price = plan.pricing.price(model)
        if price is None:
            if model not in unpriced:
                unpriced.add(model)
                problems.append(_unpriced_problem(study, slug, model, cap_field))
            continue
        settings = study.endpoints[endpoint]
        if output_token_bound(settings, params, price.max_output_tokens) is None:
            problems.append(
                Problem(
                    f"condition {slug}: model {model!r} has no max_tokens and the price table "
                    "knows no output limit for it, so a call's worst case is unbounded and "
                    f"{cap_field} cannot be a hard cap",
                    file=str(study.path) if study.path else None,
                    field=cap_field,
                    hint="set max_tokens (in the model's params, `sampling:` or a model_config), "
                    "or give the model a max_output in your pricing file",
                )
            )
    if problems:
        raise ConfigError(problems)


def _unpriced_problem(study: StudyConfig, slug: str, model: str, cap_field: str) -> Problem:
    """A capped run cannot price `model`'s calls: say so, and how to declare a price."""
    if study.pricing:
        where = f"add it to your pricing file {study.pricing}"
    else:
        where = "set `pricing: my_prices.yaml` in the study and write its price there"
    return Problem(
        f"condition {slug}: model {model!r} has no price (neither the packaged price table nor "
        f"the study's pricing file knows it, and an id that only begins with a priced model's "
        f"is not priced as that model), so the worst case of its calls cannot be priced and "
        f"{cap_field} cannot be a hard cap; nothing was sent",
        file=str(study.path) if study.path else None,
        field=cap_field,
        hint=f"{where}, under `models:`, as `{model}: {{input: 2.5, output: 10.0, "
        "max_output: 16384}` (USD per million input and output tokens, the model's output "
        "limit in tokens; a model you pay nothing per token for: input: 0, output: 0)",
    )
