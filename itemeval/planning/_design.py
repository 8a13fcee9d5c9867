"""The design grid: generate and grade conditions, their content-derived ids, and cell counts.

Full crossing (`../shared/spec/pipeline-concepts.md`):

* generate conditions = models x prompts x model configs;
* grade conditions = graders x rubrics, plus one verifiable condition per scorer;
* replications are epochs `0 .. replications-1`, a column of every row, never part of an id.

Condition ids are a contract: `<slug>--<sha256(canonical JSON payload)[:12]>`, where the payload is
exactly the content that defines the condition and nothing else:

* generate: `{"stage": "generate", "model": <model id>, "params": <resolved sampling params>,
  "prompt": {"name": <template name>, "sha256": <template hash>}}`
* judge: `{"stage": "grade", "grader": {"model": <judge model id>, "params": <judge params>},
  "rubric": {"name": <rubric name>, "sha256": <rubric hash>}}`; a grader with
  `structured: false` adds `"verdict": "text"` to its `grader` object (the default, structured
  where the endpoint has it, adds nothing: ids from before structured verdicts stay)
* pairwise judge (`kind: pairwise`, two conditions per grader and rubric, one per order): the
  judge payload with `"pairwise": {"baseline": <baseline model id>, "first": "condition" |
  "baseline"}` in its `grader` object. Its cells are the compared condition's answers; the
  baseline's answer to the same item and epoch (the generate condition of the baseline model
  with the same prompt and model config, `GradeCondition.pairwise.baselines`) is the other
  side. The baseline's own cells are never pending (`Design.drop_self_pairs`)
* verifiable: `{"stage": "grade", "scorer": <name>, "version": <scorer version>}`; a custom
  scorer's names where its function is defined and its version or source hash instead
  (`scoring/_custom.py`)
* panel (`panels:`, one per panel and rubric): `{"stage": "grade", "panel": {"members":
  [<member judge condition ids>], "combine": <rule>, "tie": <rule>}}`. A panel is computed from
  its members' stored grades (`itemeval.judging._panels`); it is in `Design.panels`, never in
  `Design.grade`, so nothing runs it

Readable names (the model's `name`, a model config's `name`, a grader's key) only enter the slug.
Execution knobs (endpoints, retries, timeouts, limits, concurrency, budget, store, runtime) never
enter a payload, so changing them never changes an id.

`Design` is the one place conditions are looked up: by id (`condition`, `generate_by_id`,
`grade_by_id`) and by what a user typed (`select`, with the matching rules of
`store.select_conditions`, which `compact` also applies to stored partitions).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from itemeval.config import StudyConfig, resolve_sampling
from itemeval.errors import InputError, Problem
from itemeval.ids import condition_id, slugify
from itemeval.providers.types import SamplingParams
from itemeval.scoring import SCORERS, scorer_identity
from itemeval.store import CellMasks, select_conditions
from itemeval.templates import Template


@dataclass(frozen=True, slots=True)
class GenerateCondition:
    id: str
    slug: str
    model_id: str
    model_label: str
    endpoint: str
    prompt: Template
    config_name: str
    params: SamplingParams
    payload: dict[str, Any] = field(repr=False)

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "stage": "generate",
            "model": self.model_id,
            "model_name": self.model_label,
            "endpoint": self.endpoint,
            "prompt": self.prompt.name,
            "prompt_sha256": self.prompt.sha256,
            "model_config": self.config_name,
            "params": self.params.as_dict(),
        }


@dataclass(frozen=True, slots=True)
class Pairwise:
    """A pairwise judge's side of the comparison: which answer it is shown first, and per
    compared generate condition the baseline's generate condition."""

    baseline_model: str
    condition_first: bool
    baselines: dict[str, str] = field(default_factory=dict)  # gen id -> baseline gen id


@dataclass(frozen=True, slots=True)
class GradeCondition:
    id: str
    slug: str
    kind: Literal["judge", "scorer"]
    payload: dict[str, Any] = field(repr=False)
    # judges
    grader_name: str | None = None
    model_id: str | None = None
    endpoint: str | None = None
    rubric: Template | None = None
    params: SamplingParams | None = None
    #: the judge answers through its endpoint's structured output (the verdict is the reply)
    structured: bool = False
    # verifiable scorers: the name the study uses (built-in, entry point or module:function)
    scorer: str | None = None
    #: a pairwise judge (the condition's answer against a baseline's); None: a judge of one
    pairwise: Pairwise | None = None

    @property
    def label(self) -> str:
        """What graded: the judge model id, or the scorer name (the `grader` column)."""
        return str(self.model_id) if self.kind == "judge" else str(self.scorer)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "stage": "grade", "kind": self.kind}
        if self.kind == "judge":
            assert self.rubric is not None and self.params is not None
            out |= {
                "grader": self.grader_name,
                "model": self.model_id,
                "endpoint": self.endpoint,
                "rubric": self.rubric.name,
                "rubric_sha256": self.rubric.sha256,
                "params": self.params.as_dict(),
                "structured": self.structured,
            }
            if self.pairwise is not None:
                out["pairwise"] = {
                    "baseline": self.pairwise.baseline_model,
                    "first": "condition" if self.pairwise.condition_first else "baseline",
                }
        else:
            out["scorer"] = self.scorer
            if self.scorer not in SCORERS:  # a custom scorer: where its function is defined
                out["function"] = self.payload["scorer"]
            out |= {k: v for k, v in self.payload.items() if k not in ("stage", "scorer")}
        return out


@dataclass(frozen=True, slots=True)
class PanelCondition:
    """A panel of judges under one rubric: its members' verdicts combined, no call made."""

    id: str
    slug: str
    name: str  # the panel's key under `panels:`
    members: tuple[str, ...]  # judge grade condition ids, in the panel's order
    member_names: tuple[str, ...]  # the judges' names under `graders:`
    rubric: Template
    combine: str
    tie: str
    payload: dict[str, Any] = field(repr=False)
    #: `mean` and `median`: the combined score at or above which the panel passes (None: the
    #: rubric's pass score)
    threshold: float | None = None

    @property
    def pass_at(self) -> float:
        """The combined score at or above which the panel passes (`mean`, `median`)."""
        return self.rubric.pass_score if self.threshold is None else self.threshold

    @property
    def rule_text(self) -> str:
        """The rule in words: `majority of a, b, c`, `mean >= 0.5 of a, b`, ..."""
        members = ", ".join(self.member_names)
        if self.combine == "majority":
            goes = "passes" if self.tie == "pass" else "fails"
            split = f"; an even split {goes}" if len(self.members) % 2 == 0 else ""
            return f"majority of {members}{split}"
        split = ""
        if self.combine == "median" and len(self.members) % 2 == 0:
            split = f"; of the two middle scores the {'lower' if self.tie == 'fail' else 'upper'}"
        return f"{self.combine} >= {self.pass_at:g} of {members}{split}"

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "stage": "grade",
            "kind": "panel",
            "panel": self.name,
            "members": list(self.members),
            "graders": list(self.member_names),
            "rubric": self.rubric.name,
            "combine": self.combine,
            "tie": self.tie,
            "threshold": self.threshold,
            "rule": self.rule_text,
        }


@dataclass(frozen=True, slots=True)
class Design:
    generate: tuple[GenerateCondition, ...]
    grade: tuple[GradeCondition, ...]
    epochs: int
    panels: tuple[PanelCondition, ...] = ()

    @property
    def conditions(self) -> tuple[GenerateCondition | GradeCondition, ...]:
        """Every condition: generate, then grade, in design order."""
        return (*self.generate, *self.grade)

    def condition(self, condition_id: str) -> GenerateCondition | GradeCondition:
        """The condition with exactly this id (`KeyError` when the design has none)."""
        for cond in self.conditions:
            if cond.id == condition_id:
                return cond
        raise KeyError(condition_id)

    def generate_by_id(self) -> dict[str, GenerateCondition]:
        return {c.id: c for c in self.generate}

    def grade_by_id(self) -> dict[str, GradeCondition]:
        return {c.id: c for c in self.grade}

    @property
    def judges(self) -> tuple[GradeCondition, ...]:
        return tuple(c for c in self.grade if c.kind == "judge")

    @property
    def pairwise(self) -> tuple[GradeCondition, ...]:
        """The pairwise judges' conditions (two per grader and rubric: one per order)."""
        return tuple(c for c in self.grade if c.pairwise is not None)

    def drop_self_pairs(self, masks: CellMasks) -> CellMasks:
        """Pending grade masks without the cells where a pairwise judge would compare the
        baseline with itself (nothing to ask), or a condition without a baseline."""
        for cond in self.pairwise:
            for gen in self.generate:
                if not self.grades(cond, gen.id) and (cond.id, gen.id) in masks.masks:
                    masks.masks[(cond.id, gen.id)][:] = False
        return masks

    @property
    def scorers(self) -> tuple[GradeCondition, ...]:
        return tuple(c for c in self.grade if c.kind == "scorer")

    def grades(self, grade: GradeCondition, gen_condition_id: str) -> bool:
        """Whether `grade` grades this generate condition's answers (a pairwise judge: not the
        baseline's own, nor a condition without a baseline)."""
        if grade.pairwise is None:
            return True
        base = grade.pairwise.baselines.get(gen_condition_id)
        return base is not None and base != gen_condition_id

    def cell_counts(self, n_items: int) -> dict[str, int]:
        """Cells per stage for `n_items` items: generate = conditions x items x epochs; grade =
        grade conditions x the generate cells they grade (judge cells cost calls, scorer cells
        do not)."""
        per_condition = n_items * self.epochs
        judged = sum(self.grades(j, g.id) for j in self.judges for g in self.generate)
        return {
            "generate": len(self.generate) * per_condition,
            "grade_judge": judged * per_condition,
            "grade_scorer": len(self.scorers) * len(self.generate) * per_condition,
        }

    def select(self, selectors: str | list[str] | None) -> Design:
        """Narrow to the conditions that `--condition` names (see `store.select_conditions`:
        an exact id or slug, a unique id or hash prefix, or a glob).

        Selecting only generate conditions keeps every grade condition (they grade the selected
        solutions), and the other way round.
        """
        if not selectors:
            return self
        wanted = [selectors] if isinstance(selectors, str) else selectors
        known = [c.id for c in self.generate] + [c.id for c in self.grade]
        chosen = set(select_conditions(known, wanted))
        generate = tuple(c for c in self.generate if c.id in chosen)
        grade = tuple(c for c in self.grade if c.id in chosen) or self.grade
        kept = {c.id for c in grade}
        return Design(
            generate=generate or self.generate,
            grade=grade,
            epochs=self.epochs,
            panels=tuple(p for p in self.panels if kept.issuperset(p.members)),
        )


def build_design(study: StudyConfig) -> Design:
    """Expand the study's facets into the full grid of conditions."""
    generate: list[GenerateCondition] = []
    prompts = [
        study.prompt_template(name, field=f"facets.prompt[{i}]")
        for i, name in enumerate(study.facets.prompt)
    ]
    for model in study.models:
        for prompt in prompts:
            for config in study.facets.model_configs:
                params = resolve_sampling(study.sampling, model.params, config)
                payload = {
                    "stage": "generate",
                    "model": model.id,
                    "params": params.as_dict(),
                    "prompt": {"name": prompt.name, "sha256": prompt.sha256},
                }
                slug = slugify(f"{model.label}_{prompt.short_name}_{config.name}")
                generate.append(
                    GenerateCondition(
                        id=condition_id(slug, payload),
                        slug=slug,
                        model_id=model.id,
                        model_label=model.label,
                        endpoint=model.endpoint,
                        prompt=prompt,
                        config_name=config.name,
                        params=params,
                        payload=payload,
                    )
                )

    grade: list[GradeCondition] = []
    rubrics = [
        study.rubric_template(name, field=f"facets.rubric[{i}]")
        for i, name in enumerate(study.rubrics)
    ]
    for grader_name in study.facets.grader:
        grader = study.graders[grader_name]
        params = grader.params()
        endpoint = study.endpoints.get(grader.endpoint)
        structured = (
            grader.structured
            and endpoint is not None
            and endpoint.structured_output(thinking=grader.thinks)
        )
        identity: dict[str, Any] = {"model": grader.model, "params": params.as_dict()}
        if not grader.structured:
            identity["verdict"] = "text"
        if grader.kind == "pairwise":
            assert grader.baseline is not None  # checked with the study
            grade.extend(
                _pairwise(grader_name, grader, identity, params, structured, rubrics, generate)
            )
            continue
        for rubric in rubrics:
            payload = {
                "stage": "grade",
                "grader": identity,
                "rubric": {"name": rubric.name, "sha256": rubric.sha256},
            }
            slug = slugify(f"{grader_name}_{rubric.short_name}")
            grade.append(
                GradeCondition(
                    id=condition_id(slug, payload),
                    slug=slug,
                    kind="judge",
                    payload=payload,
                    grader_name=grader_name,
                    model_id=grader.model,
                    endpoint=grader.endpoint,
                    rubric=rubric,
                    params=params,
                    structured=structured,
                )
            )
    for index, scorer in enumerate(study.scorers):
        scorer_id = scorer_identity(scorer, field=f"facets.scorer[{index}]")
        grade.append(
            GradeCondition(
                id=condition_id(scorer_id.slug, scorer_id.payload),
                slug=scorer_id.slug,
                kind="scorer",
                payload=scorer_id.payload,
                scorer=scorer,
            )
        )
    _check_distinct(generate, grade)
    return Design(
        generate=tuple(generate),
        grade=tuple(grade),
        epochs=study.facets.replications,
        panels=_panels(study, grade, rubrics),
    )


def _pairwise(
    grader_name: str,
    grader: Any,
    identity: dict[str, Any],
    params: SamplingParams,
    structured: bool,
    rubrics: list[Template],
    generate: list[GenerateCondition],
) -> list[GradeCondition]:
    """A pairwise grader's conditions: per rubric, one with the condition's answer shown first
    and one with the baseline's."""
    base = [c for c in generate if grader.baseline in (c.model_label, c.model_id)]
    if not base:
        raise InputError(
            Problem(
                f"the baseline {grader.baseline!r} has no generate condition",
                field=f"graders.{grader_name}.baseline",
                hint="name a model of `models:`",
            )
        )
    baselines = {}
    for gen in generate:
        same = [
            b
            for b in base
            if b.prompt.sha256 == gen.prompt.sha256 and b.config_name == gen.config_name
        ]
        if same:
            baselines[gen.id] = same[0].id
    out = []
    for rubric in rubrics:
        for condition_first in (True, False):
            side = "condition" if condition_first else "baseline"
            payload = {
                "stage": "grade",
                "grader": identity | {"pairwise": {"baseline": base[0].model_id, "first": side}},
                "rubric": {"name": rubric.name, "sha256": rubric.sha256},
            }
            slug = slugify(f"{grader_name}_{rubric.short_name}_{side}-first")
            out.append(
                GradeCondition(
                    id=condition_id(slug, payload),
                    slug=slug,
                    kind="judge",
                    payload=payload,
                    grader_name=grader_name,
                    model_id=grader.model,
                    endpoint=grader.endpoint,
                    rubric=rubric,
                    params=params,
                    structured=structured,
                    pairwise=Pairwise(base[0].model_id, condition_first, baselines),
                )
            )
    return out


def _panels(
    study: StudyConfig, grade: list[GradeCondition], rubrics: list[Template]
) -> tuple[PanelCondition, ...]:
    """One panel condition per panel and rubric (its members: the judges' conditions under it)."""
    out = []
    for name, panel in study.panels.items():
        for rubric in rubrics:
            members = [
                next(
                    c.id
                    for c in grade
                    if c.kind == "judge"
                    and c.grader_name == member
                    and c.rubric is not None
                    and c.rubric.sha256 == rubric.sha256
                )
                for member in panel.graders
            ]
            rule: dict[str, Any] = {"combine": panel.combine, "tie": panel.tie_rule}
            if panel.threshold is not None:  # unset keeps the ids panels had before it existed
                rule["threshold"] = panel.threshold
            payload = {"stage": "grade", "panel": {"members": members, **rule}}
            slug = slugify(f"{name}_{rubric.short_name}")
            out.append(
                PanelCondition(
                    id=condition_id(slug, payload),
                    slug=slug,
                    name=name,
                    members=tuple(members),
                    member_names=tuple(panel.graders),
                    rubric=rubric,
                    combine=panel.combine,
                    tie=panel.tie_rule,
                    payload=payload,
                    threshold=panel.threshold,
                )
            )
    return tuple(out)


def _check_distinct(generate: Iterable[GenerateCondition], grade: Iterable[GradeCondition]) -> None:
    """Two entries with identical content would pay twice for the same thing: refuse."""
    seen: dict[str, str] = {}
    problems = []
    conditions: list[GenerateCondition | GradeCondition] = [*generate, *grade]
    for cond in conditions:
        digest = cond.id.rsplit("--", 1)[1]
        if digest in seen:
            problems.append(
                Problem(
                    f"conditions {seen[digest]!r} and {cond.slug!r} have identical content",
                    field="facets",
                    hint="two models or model configs resolve to the same model and "
                    "parameters; remove one or make them differ",
                )
            )
        seen[digest] = cond.slug
    if problems:
        raise InputError(problems)
