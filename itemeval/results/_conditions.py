"""Readable facets of the design's conditions, as every export writes them.

A condition id says exactly what a condition is but reads badly; exports and the report show the
facets next to it: for a generate condition the model id, its readable name, the prompt
template, the model config and the resolved sampling parameters; for a grade condition the kind
(`scorer` or `judge`), the scorer or the judge's name, the judge model and the rubric.

`primary_grader` says which grade condition the headline accuracy comes from: the first
verifiable scorer when the study has one (exact and free), else the first judge.

Facets are views in design order; conditions are looked up by id in
`itemeval.planning._design.Design`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from itemeval.ids import canonical_json
from itemeval.planning import Design, GenerateCondition, GradeCondition


@dataclass(frozen=True, slots=True)
class GenerateFacets:
    """What a generate condition is, in words."""

    id: str
    slug: str
    model: str  # the model id the endpoint knows
    model_name: str  # models[].name, else the id
    prompt: str  # template name, e.g. builtin:direct
    model_config: str
    params: str  # canonical JSON of the resolved sampling parameters
    endpoint: str

    @classmethod
    def of(cls, condition: GenerateCondition) -> GenerateFacets:
        return cls(
            id=condition.id,
            slug=condition.slug,
            model=condition.model_id,
            model_name=condition.model_label,
            prompt=condition.prompt.name,
            model_config=condition.config_name,
            params=canonical_json(condition.params.as_dict()),
            endpoint=condition.endpoint,
        )

    @property
    def params_dict(self) -> dict[str, object]:
        return dict(json.loads(self.params))


@dataclass(frozen=True, slots=True)
class GradeFacets:
    """What a grade condition is, in words."""

    id: str
    slug: str
    kind: str  # "scorer" | "judge" | "panel" (the report's panels of judges)
    grader: str  # the scorer's name, or the judge's key under `graders:`
    grader_model: str | None  # judges: the judge model id
    rubric: str | None  # judges: the rubric template name
    pass_score: float | None  # judges: the rubric's pass score (correct = score >= it)
    max_score: float | None

    @classmethod
    def of(cls, condition: GradeCondition) -> GradeFacets:
        if condition.kind == "judge":
            assert condition.rubric is not None
            return cls(
                id=condition.id,
                slug=condition.slug,
                kind="judge",
                grader=str(condition.grader_name),
                grader_model=condition.model_id,
                rubric=condition.rubric.name,
                pass_score=condition.rubric.pass_score,
                max_score=condition.rubric.max_score,
            )
        return cls(
            id=condition.id,
            slug=condition.slug,
            kind="scorer",
            grader=str(condition.scorer),
            grader_model=None,
            rubric=None,
            pass_score=None,
            max_score=None,
        )

    @property
    def label(self) -> str:
        """Short and unambiguous: `scorer: auto`, `judge: judge (sim/judge, rubric
        correctness)`."""
        if self.kind == "scorer":
            return f"scorer: {self.grader}"
        if self.kind == "panel":  # a panel of judges (the report adds them: report/judges.py)
            return f"panel: {self.grader}"
        rubric = (self.rubric or "").removeprefix("builtin:")
        return f"judge: {self.grader} ({self.grader_model}, rubric {rubric})"


@dataclass(frozen=True, slots=True)
class DesignFacets:
    """The facets of every condition of a design, in design order."""

    generate: tuple[GenerateFacets, ...]
    grade: tuple[GradeFacets, ...]
    epochs: int

    @classmethod
    def of(cls, design: Design) -> DesignFacets:
        return cls(
            generate=tuple(GenerateFacets.of(c) for c in design.generate),
            grade=tuple(GradeFacets.of(c) for c in design.grade),
            epochs=design.epochs,
        )

    @property
    def models(self) -> list[str]:
        """Model names in design order, each once."""
        return list(dict.fromkeys(f.model_name for f in self.generate))

    @property
    def prompts(self) -> list[str]:
        return list(dict.fromkeys(f.prompt for f in self.generate))

    @property
    def model_configs(self) -> list[str]:
        return list(dict.fromkeys(f.model_config for f in self.generate))


def primary_grader(grade: tuple[GradeFacets, ...] | list[GradeFacets]) -> GradeFacets | None:
    """The grade condition headline accuracies come from: the first scorer, else the first
    judge (None for a design without grade conditions)."""
    scorers = [g for g in grade if g.kind == "scorer"]
    if scorers:
        return scorers[0]
    return grade[0] if grade else None
