"""Imported conditions as the design knows them (`GenerateCondition`, `GradeCondition`), made
from the store's import records, for a store read alone (`importing.store_plan`) and for a study
that grades imported answers (`imported:` in the study file: `make_plan` adds the selected
imported generate conditions to its design, `with_imported`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from itemeval.datasets import WorkItem
from itemeval.errors import ConfigError, Problem
from itemeval.ids import slugify
from itemeval.planning._design import Design, GenerateCondition, GradeCondition
from itemeval.planning._import_records import GenerateRecord, GradeRecord, read_imports
from itemeval.providers.types import SamplingParams
from itemeval.store import StudyStore, select_conditions
from itemeval.templates import Template


@dataclass(frozen=True)
class StatedParams:
    """Sampling parameters as a source stated them (names it uses beyond ours kept)."""

    values: tuple[tuple[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)

    def __getattr__(self, name: str) -> Any:
        """Our sampling parameters by name (None when the source did not state one)."""
        if name in SamplingParams.__slots__:
            return dict(self.values).get(name)
        raise AttributeError(name)


def imported_generate(record: GenerateRecord, endpoint: str | None = None) -> GenerateCondition:
    """An imported generate condition as the design knows it. `endpoint`: the endpoint a
    study names it under (never called: its cells are stored, and planning leaves it out of
    the pending cells); by default `imported:<tool>`."""
    prompt = Template(
        name=record.prompt_name,
        kind="prompt",
        text=_renderable(record.prompt_text),
        sha256=str(record.native_payload.get("prompt", {}).get("sha256") or ""),
        source=f"imported from {record.tool}",
    )
    return GenerateCondition(
        id=record.id,
        slug=record.slug,
        model_id=record.model_id,
        model_label=record.model_name,
        endpoint=endpoint or f"imported:{record.tool}",
        prompt=prompt,
        config_name=record.config_name,
        params=StatedParams(tuple(sorted(record.params.items()))),  # type: ignore[arg-type]
        payload=record.native_payload | {"imported": record.imported_payload},
    )


def distinct_slugs(conditions: Sequence[GenerateCondition]) -> list[GenerateCondition]:
    """`conditions` with no two imported ones sharing a slug: imported conditions of one tool,
    task and model that differ in what the source stated (generation settings, the prompt) are
    named by the settings that tell them apart (`..._temperature-0.7`), else by their id's hash.
    Status, the report and the viewer show slugs."""
    by_slug: dict[str, list[GenerateCondition]] = {}
    for c in conditions:  # a native condition keeps its slug (and an imported one beside it
        if "imported" in c.payload:  # with the same slug: the report says they match)
            by_slug.setdefault(c.slug, []).append(c)
    renamed: dict[str, str] = {}
    for slug, group in by_slug.items():
        if len(group) < 2:
            continue
        stated = [c.params.as_dict() for c in group]
        names = set().union(*stated)
        differ = sorted(n for n in names if len({repr(p.get(n)) for p in stated}) > 1)
        for c, params in zip(group, stated, strict=True):
            tag = "-".join(f"{n}-{params[n]}" for n in differ if params.get(n) is not None)
            renamed[c.id] = slugify(f"{slug}_{tag or 'defaults'}") if differ else slug
        if len({renamed[c.id] for c in group}) < len(group):  # the settings do not tell
            for c in group:
                renamed[c.id] = f"{renamed[c.id]}_{c.id.rsplit('--', 1)[1][:6]}"
    return [replace(c, slug=renamed[c.id]) if c.id in renamed else c for c in conditions]


def _renderable(text: str | None) -> str:
    """The stated prompt when our template language renders it (itemeval's own), else
    `{{ input }}`: what the source stated as the input is the whole prompt it sent (lm-eval's
    `{{problem}}` or inspect's templates are not ours; the estimate renders every prompt)."""
    if not text:
        return "{{ input }}"
    probe = WorkItem(
        id="probe",
        input="x",
        target="x",
        grading_scheme=None,
        metadata={},
        dataset="d",
        modality=None,
        task_prompt=None,
        difficulty=None,
    )
    try:
        Template(name="probe", kind="prompt", text=text, sha256="", source="").render_prompt(probe)
    except (ValueError, KeyError, TypeError):
        return "{{ input }}"
    return text


def imported_grade(record: GradeRecord) -> GradeCondition:
    """An imported grade condition: the source's metric as a scorer (or its judge)."""
    payload: dict[str, Any] = {"stage": "grade", "imported": {"tool": record.tool}}
    if record.kind == "judge":
        rubric = Template(
            name=record.rubric_name or f"{record.tool}:rubric",
            kind="rubric",
            text=record.rubric_text or "",
            sha256="",
            source=f"imported from {record.tool}",
            max_score=record.max_score if record.max_score is not None else 1.0,
            pass_score=record.pass_score if record.pass_score is not None else 1.0,
        )
        return GradeCondition(
            id=record.id,
            slug=record.slug,
            kind="judge",
            payload=payload,
            grader_name=record.metric,
            model_id=record.grader_model,
            endpoint=f"imported:{record.tool}",
            rubric=rubric,
        )
    return GradeCondition(
        id=record.id, slug=record.slug, kind="scorer", payload=payload, scorer=record.metric
    )


def with_imported(
    design: Design,
    store: StudyStore,
    selectors: Sequence[str],
    endpoint: str,
    *,
    with_grades: bool = False,
) -> tuple[Design, set[str]]:
    """`design` with the imported generate conditions that `selectors` name (ids, slugs,
    prefixes or globs, as `--condition`), and their ids. `with_grades` (a plan that reads: the
    report, results, analyses) adds first the imported scorers that graded them, so that the
    source's own grades are the study's headline; a plan that runs never holds them (they are
    not run again). A selector that names nothing is a `ConfigError`."""
    records = {g.id: g for r in read_imports(store) for g in r.generate}
    if not records:
        raise ConfigError(
            Problem(
                "the store holds no imported conditions",
                field="imported",
                hint=f"`itemeval import SOURCE --store {store.root.url}` first",
            )
        )
    chosen = select_conditions(list(records), list(selectors))
    known = {c.id for c in design.generate}
    added = tuple(imported_generate(records[i], endpoint) for i in chosen if i not in known)
    graders: tuple[GradeCondition, ...] = ()
    if with_grades:
        graders = _imported_scorers(store, {c.id for c in added}, {c.id for c in design.grade})
    generate = tuple(distinct_slugs([*design.generate, *added]))  # natives keep their slugs
    design = Design(generate=generate, grade=graders + design.grade, epochs=design.epochs)
    return design, {c.id for c in added}


def _imported_scorers(
    store: StudyStore, generate: set[str], known: set[str]
) -> tuple[GradeCondition, ...]:
    """The imported scorers that graded the imported generate conditions `generate` (the
    source's own grades), first in the design: the first is the study's headline grader, and
    the study's own scorers and judges are reported beside it."""
    if not generate:
        return ()
    from itemeval.store import GRADES

    records = {g.id: g for r in read_imports(store) for g in r.grade if g.kind == "scorer"}
    stored = store.condition_ids(GRADES)
    chosen = []
    for grade_id in records:
        if grade_id in known or grade_id not in stored:
            continue
        pairs = store.read_by_condition(GRADES, [grade_id], ["gen_condition_id"])[grade_id]
        if generate & set(pairs.column("gen_condition_id").unique().to_pylist()):
            chosen.append(imported_grade(records[grade_id]))
    return tuple(chosen)
