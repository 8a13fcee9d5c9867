"""The mapping spec: how the rows of a JSONL, CSV, parquet or Hugging Face file become items.

Plain fields (`id`, `input`, `target`, `*_column`) name a column; dotted names reach into nested
JSON (`question.stem`). `*_template` fields and the free-text fields (`task_prompt`,
`grading_scheme`) are `{{ name }}` templates over the row's columns plus computed values:

    _index    0-based row number within the file     _stem     the file name without suffix
    _dataset  the dataset name                       _choices  the lettered choices ("A. ...")

A mapping lives inline in a study's `datasets:` entry or in a YAML file (`configs/mappings/`),
which may also carry the dataset attributes that `itemeval convert` writes, under `dataset:`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from itemeval import render
from itemeval._util.yaml_lines import safe_load
from itemeval.datasets.format import ITEM_ATTRIBUTES, MAX_CHOICES, MIN_CHOICES, Modality
from itemeval.datasets.format._modality import CHOICE_SPAN
from itemeval.errors import ConfigError, Problem
from itemeval.storage import resolve

DEFAULT_ID_TEMPLATE = "{{ _dataset }}.{{ _stem }}.{{ _index }}"
# fields that name a column -> the field that takes a template instead (None: no such field)
COLUMN_FIELDS: dict[str, str | None] = {
    "id": "id_template",
    "input": "input_template",
    "target": "target_template",
    "task_prompt_column": "task_prompt",
    "grading_scheme_column": "grading_scheme",
    "modality_column": None,
    "difficulty_column": None,
    "support_column": None,
}
COMPUTED = frozenset({"_index", "_stem", "_dataset", "_choices"})
_RESERVED_METADATA = {name.casefold() for name in ITEM_ATTRIBUTES} | {"gradingscheme"}


class ChoicesSpec(BaseModel):
    """Where the answer choices are. Either `columns` (one column per choice, like MMLU's A-D)
    or `column` (one list column, like ARC's `question.choices`, whose elements are objects with
    a `label` and a `text`, or plain strings). Choices are re-lettered A, B, C... by position,
    and the target is mapped the same way (ARC's digit labels 1-4 become A-D).

    `answer` says what the target holds: a choice `label` (default), a 0-based `index`, or the
    choice's `text`."""

    model_config = ConfigDict(extra="forbid")

    columns: list[str] | None = None
    column: str | None = None
    label: str | None = "label"
    text: str = "text"
    answer: Literal["label", "index", "text"] = "label"

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, value: Any) -> Any:
        if isinstance(value, list):
            return {"columns": value}
        if isinstance(value, str):
            return {"column": value}
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ChoicesSpec:
        if (self.columns is None) == (self.column is None):
            raise ValueError("give either `columns` (one per choice) or `column` (a list column)")
        if self.columns is not None and not MIN_CHOICES <= len(self.columns) <= MAX_CHOICES:
            raise ValueError(
                f"`columns` must name {MIN_CHOICES} to {MAX_CHOICES} choice columns "
                f"({CHOICE_SPAN}), found {len(self.columns)}"
            )
        return self


class MappingSpec(BaseModel):
    """How one row becomes an item (see the module doc and docs/datasets.md)."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    id_template: str | None = None
    sanitize_ids: bool = False
    input: str | None = None
    input_template: str | None = None
    target: str | None = None
    target_template: str | None = None
    target_pattern: str | None = None
    choices: ChoicesSpec | None = None
    modality: Modality | None = None
    modality_column: str | None = None
    task_prompt: str | None = None
    task_prompt_column: str | None = None
    grading_scheme: str | None = None
    grading_scheme_column: str | None = None
    difficulty_column: str | None = None
    support_column: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    columns: list[str] | None = None
    header: bool | None = None
    delimiter: str | None = None

    @field_validator("modality", mode="before")
    @classmethod
    def _modality(cls, value: Any) -> Any:
        return Modality.parse(value) if isinstance(value, str) else value

    @field_validator(*COLUMN_FIELDS, mode="after")
    @classmethod
    def _a_column_not_a_template(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and "{{" in value:
            raise ValueError(template_in_column_field(str(info.field_name), value))
        return value

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata_list(cls, value: Any) -> Any:
        if isinstance(value, list):  # [subject, title] keeps the column names
            return {str(name): str(name) for name in value}
        return value

    @model_validator(mode="after")
    def _consistent(self) -> MappingSpec:
        for plain, alternative in (
            ("id", "id_template"),
            ("input", "input_template"),
            ("target", "target_template"),
            ("modality", "modality_column"),
            ("task_prompt", "task_prompt_column"),
            ("grading_scheme", "grading_scheme_column"),
        ):
            if getattr(self, plain) is not None and getattr(self, alternative) is not None:
                raise ValueError(f"give `{plain}` or `{alternative}`, not both")
        if self.input is None and self.input_template is None:
            raise ValueError("`input` (a column) or `input_template` is required")
        if self.choices is not None:
            if self.modality is not None or self.modality_column is not None:
                raise ValueError("`choices` imply the modality choiceofN; remove `modality`")
            if self.input_template is not None and "_choices" not in render.placeholders(
                self.input_template
            ):
                raise ValueError(
                    "`input_template` must place the choices with {{ _choices }}, "
                    "or the model would not see them"
                )
            if "choices" in {k.casefold() for k in self.metadata}:
                raise ValueError("metadata `choices` is filled from `choices`; rename it")
        if self.target_pattern is not None:
            try:
                pattern = re.compile(self.target_pattern, re.MULTILINE)
            except re.error as exc:
                raise ValueError(f"`target_pattern` is not a valid regex: {exc}") from None
            if pattern.groups > 1:
                raise ValueError("`target_pattern` may have at most one group (the answer)")
        for name in self.metadata:
            if name.casefold() in _RESERVED_METADATA:
                raise ValueError(f"metadata name {name!r} is an item attribute; rename it")
        if self.header is False and not self.columns:
            raise ValueError("`header: false` needs `columns:` (the column names)")
        if self.delimiter is not None and len(self.delimiter) != 1:
            raise ValueError("`delimiter` must be one character")
        return self

    @property
    def has_header(self) -> bool:
        """CSV files have a header row unless `columns:` names the columns (headerless, MMLU)."""
        return self.header if self.header is not None else self.columns is None

    def referenced_columns(self) -> list[tuple[str, str]]:
        """(mapping field, column) for every column the mapping reads (first path segment)."""
        refs: list[tuple[str, str]] = []
        for name in (
            "id",
            "input",
            "target",
            "modality_column",
            "task_prompt_column",
            "grading_scheme_column",
            "difficulty_column",
            "support_column",
        ):
            value = getattr(self, name)
            if value is not None:
                refs.append((name, value.split(".")[0]))
        for name in (
            "id_template",
            "input_template",
            "target_template",
            "task_prompt",
            "grading_scheme",
        ):
            value = getattr(self, name)
            if value is not None:
                refs.extend((name, p.split(".")[0]) for p in render.placeholders(value))
        for key, value in self.metadata.items():
            if "{{" in value:
                refs.extend(
                    (f"metadata.{key}", p.split(".")[0]) for p in render.placeholders(value)
                )
            else:
                refs.append((f"metadata.{key}", value.split(".")[0]))
        if self.choices is not None:
            for column in self.choices.columns or [self.choices.column or ""]:
                refs.append(("choices", column.split(".")[0]))
        return [(f, c) for f, c in refs if c not in COMPUTED]

    def content(self) -> dict[str, Any]:
        """The mapping as plain data (what its content hash is computed over)."""
        return self.model_dump(mode="json", exclude_none=True, exclude_defaults=True)


def template_in_column_field(name: str, value: str) -> str:
    """What to say when a field that takes a column name was given a template."""
    alternative = COLUMN_FIELDS.get(name)
    columns = render.placeholders(value)
    whole = len(columns) == 1 and value.strip() == "{{ " + columns[0] + " }}"
    plain = f"`{name}: {columns[0]}`" if whole else f"`{name}: <column>`"
    if alternative is None:
        return f"`{name}` takes a column name, not a template like {value!r}: write {plain}"
    return (
        f"`{name}` takes a column name, not a template like {value!r}: write {plain}, or "
        f"`{alternative}: {value!r}` to build the text from columns"
    )


def column_hint(name: str, column: str) -> str:
    """The hint for a column that is not there: fields that take a column name have a twin
    that takes a template, and a template in the wrong one is the usual mistake."""
    if "{{" in column and name in COLUMN_FIELDS:
        return template_in_column_field(name, column)
    alternative = COLUMN_FIELDS.get(name)
    if alternative is not None:
        return (
            f"fix the column name; `{name}` takes a column name, and "
            f'`{alternative}` a template such as "{{{{ {column} }}}}"'
        )
    return "fix the column name in the mapping"


def load_mapping_file(
    path: str, storage_options: dict[str, Any] | None = None
) -> tuple[MappingSpec, dict[str, Any]]:
    """A mapping YAML file: the mapping, and the `dataset:` attributes it carries (or {})."""
    location = resolve(path, storage_options)
    if not location.exists():
        raise ConfigError(Problem("no such mapping file", file=location.url))
    try:
        raw = safe_load(location.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ConfigError(Problem("not valid UTF-8 text", file=location.url)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            Problem(
                f"not valid YAML: {getattr(exc, 'problem', exc)}",
                file=location.url,
                line=mark.line + 1 if mark is not None else None,
            )
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(Problem("expected a YAML mapping of mapping fields", file=location.url))
    dataset = raw.pop("dataset", None) or {}
    if not isinstance(dataset, dict):
        raise ConfigError(
            Problem("expected a mapping of dataset attributes", file=location.url, field="dataset")
        )
    return parse_mapping(raw, file=location.url), dataset


def parse_mapping(raw: Any, *, file: str | None = None, prefix: str = "") -> MappingSpec:
    """Validate mapping fields, turning pydantic errors into a `ConfigError` with a Problem each."""
    try:
        return MappingSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc, file=file, prefix=prefix)) from None


def validation_problems(
    exc: ValidationError, *, file: str | None = None, prefix: str = ""
) -> list[Problem]:
    problems = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"])
        field = f"{prefix}{loc}" if loc else (prefix.rstrip(".") or None)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field (check the spelling; see docs/datasets.md)"
        problems.append(Problem(message, file=file, field=field))
    return problems


def resolve_relative(path: str, base_dir: str | Path | None) -> str:
    """`path` as given if it is absolute or a URL, else joined to `base_dir` (default: cwd)."""
    if "://" in path or path.startswith(("/", "~")):
        return str(Path(path).expanduser()) if path.startswith("~") else path
    if base_dir is None:
        return str(Path(path).resolve())
    base = str(base_dir)
    if "://" in base:
        return base.rstrip("/") + "/" + path
    return str((Path(base) / path).resolve())
