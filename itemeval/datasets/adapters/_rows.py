"""Applying a `MappingSpec` to one row: the row's columns become an `Item` or a `WorkItem`.

A row is a mapping of column names to values (a JSON object, a CSV record, a parquet or Hugging
Face row). When the mapping gives a modality (or choices, which imply `choiceofN`) the mapped row
goes through the item spec's own checks (`parse_item`), so converted data and item-format data
obey one set of rules.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from itemeval import render
from itemeval.datasets._workitem import WorkItem
from itemeval.datasets.adapters._items import item_to_workitem
from itemeval.datasets.adapters._mapping import (
    DEFAULT_ID_TEMPLATE,
    MappingSpec,
    column_hint,
)
from itemeval.datasets.format import Item, Where, parse_item
from itemeval.datasets.format._attributes import read_fraction, read_identifier
from itemeval.datasets.format._modality import (
    CHOICE_RANGE,
    LETTERS,
    MAX_CHOICES,
    MIN_CHOICES,
    Modality,
)
from itemeval.errors import Problem

_UNSAFE_ID_CHARACTERS = re.compile(r"[^A-Za-z0-9._~-]+")

# item attribute -> the mapping fields that feed it (for messages in the user's terms)
_SOURCE_FIELDS = {
    "identifier": ("id", "id_template"),
    "prompt": ("input", "input_template"),
    "response": ("target", "target_template"),
    "modality": ("modality", "modality_column"),
    "taskPrompt": ("task_prompt", "task_prompt_column"),
    "difficulty": ("difficulty_column",),
    "support": ("support_column",),
}


@dataclass(frozen=True, slots=True)
class RowContext:
    """Where a row is and the computed template values that go with it."""

    where: Where
    index: int  # 0-based row number within its file
    stem: str  # file name without suffix
    dataset: str  # dataset name (a study's source name, or the id `convert` writes)


@dataclass(slots=True)
class MappedRow:
    id: str
    input: str
    target: str
    modality: Modality | None
    task_prompt: str | None = None
    grading_scheme: str | None = None
    difficulty: Any = None
    support: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)


class RowMapper:
    """A validated mapping, ready to map rows."""

    def __init__(self, spec: MappingSpec):
        self.spec = spec
        self._pattern = (
            re.compile(spec.target_pattern, re.MULTILINE) if spec.target_pattern else None
        )
        self._id_template = spec.id_template or (None if spec.id else DEFAULT_ID_TEMPLATE)
        self.needs_modality_check = (
            spec.modality is not None
            or spec.modality_column is not None
            or spec.choices is not None
        )

    # -- public ----------------------------------------------------------------------------
    def to_item(self, row: Mapping[str, Any], ctx: RowContext) -> tuple[Item | None, list[Problem]]:
        """The row as a spec `Item` (needs a modality: `modality`, `modality_column` or
        `choices`)."""
        mapped, problems = self.map(row, ctx)
        if mapped is None:
            return None, problems
        if mapped.modality is None:
            problems.append(
                ctx.where.at(item=mapped.id).error(
                    "no modality: the item format needs one",
                    field="mapping.modality",
                    hint="add `modality:` (e.g. single-value) or `modality_column:` to the mapping",
                )
            )
            return None, problems
        raw: dict[str, Any] = {
            "identifier": mapped.id,
            "modality": mapped.modality.value,
            "prompt": mapped.input,
            "response": mapped.target,
        }
        for key, value in (
            ("difficulty", mapped.difficulty),
            ("support", mapped.support),
            ("taskPrompt", mapped.task_prompt),
        ):
            if value is not None:
                raw[key] = value
        raw.update(mapped.metadata)
        if mapped.grading_scheme is not None:
            raw["gradingScheme"] = mapped.grading_scheme
        item, found = parse_item(raw, ctx.where.at(item=mapped.id))
        problems.extend(self._in_mapping_terms(p) for p in found)
        return item, problems

    def to_workitem(
        self, row: Mapping[str, Any], ctx: RowContext
    ) -> tuple[WorkItem | None, list[Problem]]:
        """The row as a `WorkItem` for dataset `ctx.dataset`."""
        if self.needs_modality_check:
            item, problems = self.to_item(row, ctx)
            return (item_to_workitem(item, ctx.dataset) if item else None), problems
        mapped, problems = self.map(row, ctx)
        if mapped is None:
            return None, problems
        where = ctx.where.at(item=mapped.id)
        found: list[Problem] = []
        identifier = read_identifier(mapped.id, "identifier", where, found)
        difficulty = read_fraction(mapped.difficulty, "difficulty", where, found)
        if not mapped.input.strip():
            found.append(where.error("the input is empty", field="prompt"))
        problems.extend(self._in_mapping_terms(p) for p in found)
        if identifier is None or any(p.severity == "error" for p in found):
            return None, problems
        metadata = dict(mapped.metadata)
        if mapped.support is not None:
            metadata["support"] = mapped.support
        return WorkItem(
            id=identifier,
            input=mapped.input,
            target=mapped.target,
            grading_scheme=mapped.grading_scheme,
            metadata=metadata,
            dataset=ctx.dataset,
            modality=None,
            task_prompt=mapped.task_prompt,
            difficulty=difficulty,
        ), problems

    def map(
        self, row: Mapping[str, Any], ctx: RowContext
    ) -> tuple[MappedRow | None, list[Problem]]:
        """The mapped values of a row, before the item checks."""
        spec = self.spec
        problems: list[Problem] = []
        if not isinstance(row, Mapping):
            return None, [
                ctx.where.error(f"expected an object (a row), found a {type(row).__name__}")
            ]
        # one flat dict (a copy of the row, computed values on top): faster than a ChainMap
        values: dict[str, Any] = dict(row)
        values.update(_index=ctx.index, _stem=ctx.stem, _dataset=ctx.dataset)
        where = ctx.where

        item_id = self._text(values, spec.id, self._id_template, "id", where, problems)
        if item_id is not None and spec.sanitize_ids:
            item_id = _UNSAFE_ID_CHARACTERS.sub("-", item_id)
        if item_id is not None:
            where = where.at(item=item_id)

        modality = spec.modality
        choices: list[str] | None = None
        target = self._text(
            values,
            spec.target,
            spec.target_template,
            "target",
            where,
            problems,
            required=spec.target is not None,
        )
        if target is not None and self._pattern is not None:
            target = self._extract(target, where, problems)
        if spec.choices is not None:
            choices, letter = self._choices(values, target, where, problems)
            if choices is not None:
                values["_choices"] = "\n".join(
                    f"{LETTERS[i]}. {text}" for i, text in enumerate(choices)
                )
                modality = Modality.for_choices(len(choices))
                target = letter
        elif spec.modality_column is not None:
            modality = self._modality(values, where, problems)

        if spec.input is not None:
            text = self._text(values, spec.input, None, "input", where, problems)
            if text is not None and choices is not None:
                text = f"{text}\n\n{values['_choices']}"
        else:
            text = self._text(values, None, spec.input_template, "input", where, problems)

        task_prompt = self._text(
            values,
            spec.task_prompt_column,
            spec.task_prompt,
            "task_prompt",
            where,
            problems,
            required=False,
        )
        grading = self._text(
            values,
            spec.grading_scheme_column,
            spec.grading_scheme,
            "grading_scheme",
            where,
            problems,
            required=False,
        )
        difficulty = self._value(
            values, spec.difficulty_column, "difficulty_column", where, problems
        )
        support = self._value(values, spec.support_column, "support_column", where, problems)
        metadata: dict[str, Any] = {}
        for key, source in spec.metadata.items():
            if "{{" in source:
                metadata[key] = self._render(source, values, f"metadata.{key}", where, problems)
            else:
                value = self._value(values, source, f"metadata.{key}", where, problems)
                metadata[key] = _json_safe(value)
        if choices is not None:
            metadata["choices"] = choices
        if problems or item_id is None or text is None:
            return None, problems
        return MappedRow(
            id=item_id,
            input=text,
            target=target or "",
            modality=modality,
            task_prompt=task_prompt,
            grading_scheme=grading,
            difficulty=difficulty,
            support=support,
            metadata=metadata,
        ), problems

    # -- pieces ----------------------------------------------------------------------------
    def _value(
        self,
        values: Mapping[str, Any],
        column: str | None,
        name: str,
        where: Where,
        problems: list[Problem],
    ) -> Any:
        if column is None:
            return None
        if column in values:  # a plain column name, possibly with dots or spaces in it
            return values[column]
        try:
            return render.lookup(values, column)
        except render.TemplateFieldError:
            problems.append(_missing_column(column, values, name, where))
            return None

    def _render(
        self,
        template: str,
        values: Mapping[str, Any],
        name: str,
        where: Where,
        problems: list[Problem],
    ) -> str | None:
        try:
            return render.render(template, values)
        except render.TemplateFieldError as exc:
            problems.append(_missing_column(exc.name, values, name, where))
            return None

    def _text(
        self,
        values: Mapping[str, Any],
        column: str | None,
        template: str | None,
        name: str,
        where: Where,
        problems: list[Problem],
        *,
        required: bool = True,
    ) -> str | None:
        if template is not None:
            return self._render(
                template,
                values,
                f"{name}_template" if name in ("id", "input", "target") else name,
                where,
                problems,
            )
        if column is None:
            return None
        field_name = name if name in ("id", "input", "target") else f"{name}_column"
        before = len(problems)
        value = self._value(values, column, field_name, where, problems)
        if value is None:
            if required and len(problems) == before:
                problems.append(
                    where.error(f"column {column!r} is null", field=f"mapping.{field_name}")
                )
            return None
        if isinstance(value, bool):
            return "True" if value else "False"
        if isinstance(value, int | float | str):
            return str(value) if not isinstance(value, float) else repr(value)
        problems.append(
            where.error(
                f"column {column!r} holds a {type(value).__name__}, expected text or a number",
                field=f"mapping.{field_name}",
            )
        )
        return None

    def _extract(self, target: str, where: Where, problems: list[Problem]) -> str | None:
        assert self._pattern is not None
        match = self._pattern.search(target)
        if match is None:
            shown = target if len(target) <= 60 else "..." + target[-57:]
            problems.append(
                where.error(
                    f"the target {shown!r} does not match {self._pattern.pattern!r}",
                    field="mapping.target_pattern",
                )
            )
            return None
        return (match.group(1) if self._pattern.groups else match.group(0)).strip()

    def _modality(
        self, values: Mapping[str, Any], where: Where, problems: list[Problem]
    ) -> Modality | None:
        before = len(problems)
        raw = self._value(values, self.spec.modality_column, "modality_column", where, problems)
        if raw is None:
            if len(problems) == before:
                problems.append(
                    where.error("the modality column is null", field="mapping.modality_column")
                )
            return None
        try:
            return Modality.parse(str(raw))
        except ValueError as exc:
            problems.append(where.error(str(exc), field="mapping.modality_column"))
            return None

    def _choices(
        self, values: Mapping[str, Any], target: str | None, where: Where, problems: list[Problem]
    ) -> tuple[list[str] | None, str | None]:
        spec = self.spec.choices
        assert spec is not None
        before = len(problems)
        labels: list[str] = []
        texts: list[str] = []
        if spec.columns is not None:
            for column in spec.columns:
                texts.append(_as_text(self._value(values, column, "choices", where, problems)))
            labels = list(LETTERS[: len(texts)])
        else:
            raw = self._value(values, spec.column, "choices", where, problems)
            if raw is None:
                if len(problems) == before:
                    problems.append(
                        where.error(f"column {spec.column!r} is null", field="mapping.choices")
                    )
                return None, None
            if not isinstance(raw, list):
                problems.append(
                    where.error(
                        f"column {spec.column!r} holds a "
                        f"{type(raw).__name__}, expected a list of choices",
                        field="mapping.choices",
                    )
                )
                return None, None
            for position, element in enumerate(raw):
                if isinstance(element, Mapping):
                    texts.append(_as_text(element.get(spec.text)))
                    label = element.get(spec.label) if spec.label else None
                    labels.append(
                        str(label).strip()
                        if label is not None
                        else LETTERS[position % len(LETTERS)]
                    )
                else:
                    texts.append(_as_text(element))
                    labels.append(LETTERS[position % len(LETTERS)])
        if len(problems) > before:
            return None, None
        if not MIN_CHOICES <= len(texts) <= MAX_CHOICES:
            problems.append(
                where.error(f"{len(texts)} choices; {CHOICE_RANGE}", field="mapping.choices")
            )
            return None, None
        letter = self._answer_letter(target, labels, texts, where, problems)
        return texts, letter

    def _answer_letter(
        self,
        target: str | None,
        labels: list[str],
        texts: list[str],
        where: Where,
        problems: list[Problem],
    ) -> str | None:
        spec = self.spec.choices
        assert spec is not None
        if target is None or not target.strip():
            problems.append(where.error("no answer: the target is empty", field="mapping.target"))
            return None
        key = target.strip()
        position: int | None = None
        if spec.answer == "index":
            if key.lstrip("-").isdigit() and 0 <= int(key) < len(texts):
                position = int(key)
            expected = f"a 0-based index below {len(texts)}"
        elif spec.answer == "text":
            matches = [i for i, text in enumerate(texts) if text.strip() == key]
            position = matches[0] if matches else None
            expected = "the text of one of the choices"
        else:
            folded = [label.casefold() for label in labels]
            position = folded.index(key.casefold()) if key.casefold() in folded else None
            expected = "one of the choice labels " + ", ".join(labels)
        if position is None:
            problems.append(
                where.error(f"answer {key!r} is not {expected}", field="mapping.target")
            )
            return None
        return LETTERS[position]

    def _in_mapping_terms(self, problem: Problem) -> Problem:
        sources = _SOURCE_FIELDS.get(problem.field or "")
        if not sources:
            return problem
        used = [s for s in sources if getattr(self.spec, s, None) is not None]
        if problem.field == "response" and self.spec.choices is not None:
            used = ["choices"]
        if not used:
            return problem
        return replace(problem, field=f"{problem.field} (from mapping.{used[0]})")


def _json_safe(value: Any) -> Any:
    """Parquet and Hugging Face rows can hold dates and decimals; metadata is JSON."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return str(value)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list | dict) else str(value)


def _missing_column(column: str, values: Mapping[str, Any], name: str, where: Where) -> Problem:
    available = [k for k in values if not str(k).startswith("_")]
    shown = ", ".join(str(k) for k in available[:30])
    return where.error(
        f"column {column!r} not found (the row has: {shown})",
        field=f"mapping.{name}",
        hint=column_hint(name, column),
    )
