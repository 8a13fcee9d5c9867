"""Checks of a validated study that span its sections, and the keys a run needs.

`cross_check` finds what a schema cannot: references (a model's endpoint, a facet's grader),
duplicate names, templates that must exist and load, scorers that must resolve, a pricing file,
budget settings that contradict each other. `check_keys` says which API key variables are not
set (a run needs them; `plan` and `estimate` do not).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence

from itemeval.config._models import StudyConfig
from itemeval.errors import ConfigError, Problem
from itemeval.ids import slugify
from itemeval.plugins import PROVIDER_GROUP, load_plugin
from itemeval.providers import BUILTIN_KINDS
from itemeval.scoring import scorer_identity
from itemeval.secrets import KEY_HINT
from itemeval.storage import url_under


def check_keys(study: StudyConfig, endpoints: set[str] | None = None) -> None:
    """Every API key variable of the endpoints this study uses (or of `endpoints`) is set: a
    run needs them; `plan` and `estimate` do not. Never prints a value."""
    problems: list[Problem] = []
    for name, endpoint in study.used_endpoints().items():
        if endpoints is not None and name not in endpoints:
            continue
        variables = [("api_key_env", endpoint.api_key_env)] if endpoint.api_key_env else []
        variables += [(f"headers_env.{h}", env) for h, env in endpoint.headers_env.items()]
        for field, variable in variables:
            if not os.environ.get(variable):
                problems.append(
                    Problem(
                        f"environment variable {variable} is not set",
                        file=str(study.path) if study.path else None,
                        field=f"endpoints.{name}.{field}",
                        hint=KEY_HINT.format(variable=variable),
                    )
                )
    if problems:
        raise ConfigError(problems)


def cross_check(study: StudyConfig) -> list[Problem]:
    """Checks that span sections: references, duplicates, templates, scorers."""
    problems: list[Problem] = []

    def unknown(kind: str, name: str, choices: list[str], field: str) -> None:
        close = difflib.get_close_matches(name, choices, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known {kind}s: {', '.join(choices)}"
        problems.append(Problem(f"unknown {kind} {name!r}", field=field, hint=hint))

    endpoints = sorted(study.endpoints)
    seen_labels: dict[str, int] = {}
    for index, model in enumerate(study.models):
        if model.endpoint not in study.endpoints:
            unknown("endpoint", model.endpoint, endpoints, f"models[{index}].endpoint")
        label = slugify(model.label)
        if label in seen_labels:
            problems.append(
                Problem(
                    f"duplicate model {model.label!r} (also models[{seen_labels[label]}])",
                    field=f"models[{index}]",
                    hint="give one of them a distinct `name:` to compare two settings of a model",
                )
            )
        seen_labels.setdefault(label, index)

    _check_unique([d.name for d in study.datasets], "dataset name", "datasets[{}].name", problems)
    _check_unique(
        [c.name for c in study.facets.model_configs],
        "model_config name",
        "facets.model_config[{}].name",
        problems,
    )
    _check_unique(study.facets.prompt, "prompt", "facets.prompt[{}]", problems)

    for name, grader in study.graders.items():
        if grader.endpoint not in study.endpoints:
            unknown("endpoint", grader.endpoint, endpoints, f"graders.{name}.endpoint")
    model_names = sorted({m.label for m in study.models} | {m.id for m in study.models})
    for name, grader in study.graders.items():
        if grader.kind == "pairwise" and not grader.baseline:
            problems.append(
                Problem(
                    "a pairwise grader needs a baseline",
                    field=f"graders.{name}.baseline",
                    hint="name the model whose answers the others are compared with",
                )
            )
        elif grader.kind == "pairwise" and grader.baseline not in model_names:
            unknown("model", str(grader.baseline), model_names, f"graders.{name}.baseline")
        elif grader.kind == "judge" and grader.baseline is not None:
            problems.append(
                Problem(
                    "`baseline` is only for a pairwise grader",
                    field=f"graders.{name}.baseline",
                    hint="set `kind: pairwise`, or remove `baseline`",
                )
            )
        if grader.kind == "pairwise" and name in {
            member for panel in study.panels.values() for member in panel.graders
        }:
            problems.append(
                Problem(
                    "a pairwise grader cannot sit on a panel",
                    field=f"graders.{name}",
                    hint="panels combine judges of single answers",
                )
            )
    for index, name in enumerate(study.facets.grader):
        if name not in study.graders:
            unknown("grader", name, sorted(study.graders), f"facets.grader[{index}]")
    for name, panel in study.panels.items():
        for index, member in enumerate(panel.graders):
            if member not in study.facets.grader:
                unknown(
                    "grader", member, list(study.facets.grader), f"panels.{name}.graders[{index}]"
                )
        if len(set(panel.graders)) != len(panel.graders):
            problems.append(Problem("a panel names a grader twice", field=f"panels.{name}.graders"))
        problems.extend(_panel_rule_problems(study, name))
    if study.gold.scorer is not None and study.gold.scorer not in study.scorers:
        unknown("scorer", study.gold.scorer, study.scorers, "gold.scorer")
    if study.facets.rubric and not study.facets.grader:
        problems.append(
            Problem(
                "rubrics are set but no grader uses them",
                field="facets.rubric",
                hint="add a judge under `graders:` and name it in `facets.grader`",
            )
        )
    for index, scorer in enumerate(study.scorers):
        try:
            scorer_identity(scorer, field=f"facets.scorer[{index}]")
        except ConfigError as exc:
            problems.extend(exc.problems)
    for name, endpoint in study.endpoints.items():
        if endpoint.kind not in BUILTIN_KINDS:
            problems.extend(_provider_problems(endpoint.kind, f"endpoints.{name}.kind"))
    if not study.scorers and not study.facets.grader:
        problems.append(
            Problem(
                "nothing grades the solutions: no scorer and no grader",
                field="facets",
                hint="remove `scorer: []` or add a grader",
            )
        )

    for index, name in enumerate(study.facets.prompt):
        try:
            study.prompt_template(name, field=f"facets.prompt[{index}]")
        except ConfigError as exc:
            problems.extend(exc.problems)
    for index, name in enumerate(study.rubrics):
        try:
            study.rubric_template(name, field=f"facets.rubric[{index}]")
        except ConfigError as exc:
            problems.extend(exc.problems)
    covering = [p for p in study.storage_options_by_prefix if url_under(study.store or "", p)]
    if study.storage_options and covering:
        problems.append(
            Problem(
                f"the store {study.store} gets `storage_options` and also the options of "
                f"prefix {max(covering, key=len)!r}",
                field="storage_options_by_prefix",
                hint="keep one of them: `storage_options` are the store's (and the default of "
                "every URL with its protocol)",
            )
        )
    if study.pricing and not study.pricing_path.is_file():  # type: ignore[union-attr]
        problems.append(Problem(f"pricing file not found: {study.pricing_path}", field="pricing"))
    if (
        study.budget.confirm_above_usd is not None
        and study.budget.max_usd is not None
        and study.budget.confirm_above_usd > study.budget.max_usd
    ):
        problems.append(
            Problem(
                "confirm_above_usd is above max_usd, so confirmation can never be asked",
                field="budget.confirm_above_usd",
                severity="warning",
            )
        )
    return problems


def _panel_rule_problems(study: StudyConfig, name: str) -> list[Problem]:
    """A panel's rule must say what it does: `tie` only where an even split can happen,
    `threshold` only for `mean` and `median`, and a threshold for those over pass/fail verdicts
    (where the rubric's pass score is its maximum, the mean of the verdicts reaches it only when
    every judge passed: unanimity, not an average)."""
    panel = study.panels[name]
    field = f"panels.{name}"
    members = len(panel.graders)
    problems: list[Problem] = []
    if panel.tie is not None and panel.combine == "mean":
        problems.append(
            Problem(
                "`tie` does nothing for `combine: mean`: a mean exactly at the threshold passes",
                field=f"{field}.tie",
                hint="remove `tie` (or use `combine: majority` or `median`, where an even number "
                "of judges can split evenly)",
            )
        )
    elif panel.tie is not None and members % 2:
        problems.append(
            Problem(
                f"`tie` does nothing for a panel of {members} judges: an odd number never "
                "splits evenly",
                field=f"{field}.tie",
                hint="remove `tie`",
            )
        )
    if panel.threshold is not None and panel.combine == "majority":
        problems.append(
            Problem(
                "`threshold` is for `combine: mean` and `median`; a majority passes an answer "
                "more than half of the judges passed (an even split goes to `tie`)",
                field=f"{field}.threshold",
                hint="remove `threshold`, or use `combine: mean` with `threshold: <share of "
                "judges>` (e.g. 0.5: at least half) over pass/fail verdicts",
            )
        )
    if panel.combine == "majority":
        return problems
    for index, rubric_name in enumerate(study.rubrics):
        try:
            rubric = study.rubric_template(rubric_name, field=f"facets.rubric[{index}]")
        except ConfigError:
            continue  # reported by the template check
        scale = f"{rubric.min_score:g} to {rubric.max_score:g}"
        if panel.threshold is None and rubric.pass_score >= rubric.max_score:
            problems.append(
                Problem(
                    f"`combine: {panel.combine}` over pass/fail verdicts needs a `threshold`: "
                    f"rubric {rubric.name} passes only at its maximum score "
                    f"({rubric.max_score:g}), so the judges' {panel.combine} would reach it only "
                    + (
                        "when every judge passed (unanimity)"
                        if panel.combine == "mean"
                        else "when more than half passed (a majority)"
                    ),
                    field=f"{field}.combine",
                    hint="use `combine: majority` (more than half of the judges), or set "
                    f"`threshold:` on the rubric's scale ({scale}; e.g. "
                    f"{(rubric.min_score + rubric.max_score) / 2:g}: at least half of the "
                    "judges passed it)",
                )
            )
        elif panel.threshold is not None and not (
            rubric.min_score < panel.threshold <= rubric.max_score
        ):
            problems.append(
                Problem(
                    f"threshold {panel.threshold:g} is outside rubric {rubric.name}'s scale "
                    f"({scale}): the panel would pass every answer or none",
                    field=f"{field}.threshold",
                    hint=f"a score above {rubric.min_score:g} and at most {rubric.max_score:g}",
                )
            )
    return problems


def _check_unique(
    names: Sequence[str | None], kind: str, field: str, problems: list[Problem]
) -> None:
    seen: set[str] = set()
    for index, name in enumerate(names):
        if name is None:  # a dataset's name is set from its path when validated
            continue
        key = name.casefold()
        if key in seen:
            problems.append(Problem(f"duplicate {kind} {name!r}", field=field.format(index)))
        seen.add(key)


def _provider_problems(kind: str, field: str) -> list[Problem]:
    """A provider plugin must load and be callable (it is called like a client class)."""
    try:
        plugin = load_plugin(
            PROVIDER_GROUP, kind, what="provider", field=field, builtin=BUILTIN_KINDS
        )
    except ConfigError as exc:
        return exc.problems
    if not callable(plugin.obj):
        return [
            Problem(
                f"provider {kind!r} is a {type(plugin.obj).__name__}, not a class or function",
                field=field,
                hint="point it at a Provider class (e.g. an HttpProvider subclass) or a "
                "function with the same arguments",
            )
        ]
    return []
