"""The study file: strict pydantic models, loading with precise errors, and path resolution.

A study YAML is the user's whole interface to an experiment, so it is strict: an unknown or
misspelled key is an error that names the field path, the line, and the nearest valid name.
Input paths (datasets, local templates, a pricing file) resolve relative to the study file;
outputs (the store, the cache) resolve relative to the working directory.

Cross-references (a model's endpoint, a facet's grader, templates that must exist, duplicate
names) are checked here too, so that `load_study` either returns a study that can be planned or
raises `ConfigError` listing every problem, before anything is written.
"""

from __future__ import annotations

import difflib
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from itemeval.adapters import DatasetSource
from itemeval.errors import ConfigError, Problem
from itemeval.ids import sha256_hex, slugify
from itemeval.providers.settings import EndpointSettings
from itemeval.providers.types import SamplingParams
from itemeval.scoring import SCORERS
from itemeval.templates import Template, load_template


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Sampling(StrictModel):
    """Sampling parameters (all optional: unset means the provider's default)."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, gt=0)
    seed: int | None = None
    stop: list[str] | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    thinking_budget: int | None = Field(default=None, ge=0)

    def values(self) -> dict[str, Any]:
        return {
            name: getattr(self, name)
            for name in Sampling.model_fields
            if getattr(self, name) is not None
        }


def resolve_sampling(*layers: Sampling) -> SamplingParams:
    """Later layers override earlier ones, field by field."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer.values())
    if "stop" in merged:
        merged["stop"] = tuple(merged["stop"])
    return SamplingParams(**merged)


class ModelEntry(StrictModel):
    """A solver model: the id the endpoint knows, which endpoint, a readable name, params."""

    id: str = Field(min_length=1)
    endpoint: str
    name: str | None = None
    params: Sampling = Sampling()

    @property
    def label(self) -> str:
        return self.name or self.id


class ModelConfig(Sampling):
    """One entry of the `model_config` facet: a named set of sampling parameters."""

    name: str = Field(min_length=1)


class Facets(StrictModel):
    prompt: list[str] = Field(default_factory=lambda: ["builtin:direct"], min_length=1)
    model_configs: list[ModelConfig] = Field(
        default_factory=lambda: [ModelConfig(name="default")], alias="model_config", min_length=1
    )
    grader: list[str] = Field(default_factory=list)
    rubric: list[str] | None = None  # None: builtin:correctness when there are graders
    scorer: list[str] | None = None  # None: ["auto"]; []: no verifiable condition
    replications: int = Field(default=1, ge=1, le=1000)


class Grader(StrictModel):
    """An LLM judge. Judges always run at temperature 0 (a contract), so it is not settable."""

    model: str = Field(min_length=1)
    endpoint: str
    max_tokens: int = Field(default=1024, gt=0)
    seed: int | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    thinking_budget: int | None = Field(default=None, ge=0)

    def params(self) -> SamplingParams:
        return SamplingParams(
            temperature=0.0,
            max_tokens=self.max_tokens,
            seed=self.seed,
            reasoning_effort=self.reasoning_effort,
            thinking_budget=self.thinking_budget,
        )


class Budget(StrictModel):
    policy: Literal["dev", "full"] = "full"
    dev_items: int = Field(default=20, ge=1)
    confirm_above_usd: float | None = Field(default=None, ge=0)
    max_usd: float | None = Field(default=None, ge=0)


class Cache(StrictModel):
    enabled: bool = True
    location: str | None = None  # default: the user cache directory (see itemeval.store.cache)


class Runtime(StrictModel):
    """Execution knobs: how the work is cut and spread. They never change a result or an id."""

    shard_size: int = Field(default=256, ge=1, le=100_000)
    workers: int | None = Field(default=None, ge=1)  # default: one per CPU of the cluster
    shards_in_flight: int | None = Field(default=None, ge=1)  # default: 2 per worker


class Study(StrictModel):
    """A whole study file."""

    study: str = Field(min_length=1, description="the study's name")
    description: str | None = None
    store: str | None = None
    storage_options: dict[str, Any] = Field(default_factory=dict)
    datasets: list[DatasetSource] = Field(min_length=1)
    endpoints: dict[str, EndpointSettings] = Field(min_length=1)
    models: list[ModelEntry] = Field(min_length=1)
    sampling: Sampling = Sampling()
    facets: Facets = Facets()
    graders: dict[str, Grader] = Field(default_factory=dict)
    budget: Budget = Budget()
    cache: Cache = Cache()
    pricing: str | None = None
    prompts_dir: str = "prompts"
    rubrics_dir: str = "rubrics"
    runtime: Runtime = Runtime()

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _path: Path | None = PrivateAttr(default=None)
    _content_hash: str = PrivateAttr(default="")

    @field_validator("study")
    @classmethod
    def _name_is_sluggable(cls, value: str) -> str:
        if slugify(value) != value.lower():
            raise ValueError(
                f"use letters, digits, '.', '_' and '-' only (for example {slugify(value)!r})"
            )
        return value

    # -- where things are ----------------------------------------------------------------
    @property
    def base_dir(self) -> Path:
        """The folder of the study file: input paths resolve against it."""
        return self._base_dir

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def content_hash(self) -> str:
        """sha256 of the study file's bytes (recorded in manifests)."""
        return self._content_hash

    @property
    def store_url(self) -> str:
        """The store root URL: as given (relative to the working directory) or the default."""
        return _output_url(self.store or f"./studies/{self.study}")

    @property
    def cache_url(self) -> str | None:
        if not self.cache.enabled:
            return None
        return _output_url(self.cache.location) if self.cache.location else None

    @property
    def pricing_path(self) -> Path | None:
        return self.base_dir / self.pricing if self.pricing else None

    def input_path(self, path: str) -> str:
        """An input path or URL resolved against the study file's folder."""
        if "://" in path or os.path.isabs(path):
            return path
        return str((self.base_dir / path).resolve())

    # -- templates -----------------------------------------------------------------------
    def prompt_template(self, name: str, field: str = "facets.prompt") -> Template:
        return load_template(name, "prompt", self.base_dir / self.prompts_dir, field=field)

    def rubric_template(self, name: str, field: str = "facets.rubric") -> Template:
        return load_template(name, "rubric", self.base_dir / self.rubrics_dir, field=field)

    @property
    def rubrics(self) -> list[str]:
        if self.facets.rubric is not None:
            return self.facets.rubric
        return ["builtin:correctness"] if self.facets.grader else []

    @property
    def scorers(self) -> list[str]:
        return ["auto"] if self.facets.scorer is None else self.facets.scorer

    def used_endpoints(self) -> dict[str, EndpointSettings]:
        names = {m.endpoint for m in self.models}
        names |= {self.graders[g].endpoint for g in self.facets.grader if g in self.graders}
        return {name: self.endpoints[name] for name in sorted(names) if name in self.endpoints}


def _output_url(path: str) -> str:
    if "://" in path:
        return path
    return str(Path(path).expanduser().resolve())


def check_keys(study: Study, endpoints: set[str] | None = None) -> None:
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
                        hint=f"export {variable}=... in the shell (or the Ray runtime_env) "
                        "that runs itemeval; keys are never read from files",
                    )
                )
    if problems:
        raise ConfigError(problems)


# -- loading ---------------------------------------------------------------------------------


def load_study(path: str | os.PathLike[str]) -> Study:
    """Read, validate and cross-check a study file; raise `ConfigError` listing every problem."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(
            Problem("study file not found", file=str(file), hint="`itemeval init` writes one")
        )
    raw = file.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            Problem(f"not UTF-8 text (byte {exc.start})", file=str(file), hint="save it as UTF-8")
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            Problem(
                f"invalid YAML: {getattr(exc, 'problem', exc)}",
                file=str(file),
                line=mark.line + 1 if mark else None,
            )
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(Problem("a study file must be a YAML mapping", file=str(file)))
    lines = _LineIndex(text)
    try:
        study = Study.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_problems_from(exc, str(file), lines)) from None
    study._base_dir = file.resolve().parent
    study._path = file.resolve()
    study._content_hash = sha256_hex(raw)
    problems = cross_check(study)
    for problem in problems:
        object.__setattr__(problem, "line", problem.line or lines.line_of(problem.field))
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise ConfigError([_with_file(p, str(file)) for p in errors])
    return study


def _with_file(problem: Problem, file: str) -> Problem:
    if problem.file:
        return problem
    return Problem(
        problem.message,
        file=file,
        line=problem.line,
        item=problem.item,
        field=problem.field,
        hint=problem.hint,
        severity=problem.severity,
    )


def cross_check(study: Study) -> list[Problem]:
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
    for index, name in enumerate(study.facets.grader):
        if name not in study.graders:
            unknown("grader", name, sorted(study.graders), f"facets.grader[{index}]")
    if study.facets.rubric and not study.facets.grader:
        problems.append(
            Problem(
                "rubrics are set but no grader uses them",
                field="facets.rubric",
                hint="add a judge under `graders:` and name it in `facets.grader`",
            )
        )
    for index, scorer in enumerate(study.scorers):
        if scorer not in SCORERS:
            unknown("scorer", scorer, sorted(SCORERS), f"facets.scorer[{index}]")
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


def _check_unique(names: list[str], kind: str, field: str, problems: list[Problem]) -> None:
    seen: set[str] = set()
    for index, name in enumerate(names):
        key = name.casefold()
        if key in seen:
            problems.append(Problem(f"duplicate {kind} {name!r}", field=field.format(index)))
        seen.add(key)


# -- error reporting -------------------------------------------------------------------------


def _loc_to_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + str(part)
    return path


def _problems_from(exc: ValidationError, file: str, lines: _LineIndex) -> list[Problem]:
    problems = []
    for error in exc.errors():
        loc = tuple(p for p in error["loc"] if not _is_union_tag(p))
        field = _loc_to_path(loc)
        hint = None
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            siblings = _field_names_at(Study, loc[:-1])
            close = difflib.get_close_matches(str(loc[-1]), siblings, n=1, cutoff=0.5)
            message = "unknown key"
            hint = f"did you mean {close[0]!r}?" if close else None
            if not hint and siblings:
                hint = "valid keys here: " + ", ".join(sorted(siblings))
        elif error["type"] == "missing":
            message = "required key is missing"
        elif error["type"] == "value_error":
            message = message.removeprefix("Value error, ")  # our validators' own words
        problems.append(
            Problem(message, file=file, line=lines.line_of(field), field=field, hint=hint)
        )
    return problems


def _is_union_tag(part: Any) -> bool:
    # pydantic adds the union member or literal tag to locations (e.g. "function-after[...]")
    return isinstance(part, str) and ("[" in part or part in {"str", "int", "float"})


def _field_names_at(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The valid key names of the model found by walking `loc` down from `model`."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = _find_field(current, str(part))
            if field is None:
                return []
            current = field.annotation
        else:
            origin = typing.get_origin(current)
            args = typing.get_args(current)
            if origin in (list, tuple) or origin is dict:
                current = args[-1] if args else Any
            else:
                return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or name for name, f in current.model_fields.items()]
    return []


def _find_field(model: type[BaseModel], key: str) -> Any:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field
    return None


def _unwrap(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        return models[0] if models else (members[0] if members else annotation)
    return annotation


class _LineIndex:
    """Maps a field path (`facets.prompt[1]`) to its line in the YAML text, when it exists."""

    def __init__(self, text: str):
        try:
            self._root = yaml.compose(text)
        except yaml.YAMLError:
            self._root = None

    def line_of(self, field: str | None) -> int | None:
        if not field or self._root is None:
            return None
        node = self._root
        line = None
        for part in _split_path(field):
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                match = next((kv for kv in node.value if kv[0].value == part), None)
                if match is None:
                    break
                line = match[0].start_mark.line + 1
                node = match[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                if part >= len(node.value):
                    break
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                break
        return line


def _split_path(field: str) -> list[str | int]:
    parts: list[str | int] = []
    for chunk in field.replace("]", "").split("."):
        name, *indices = chunk.split("[")
        if name:
            parts.append(name)
        parts.extend(int(i) for i in indices)
    return parts
