"""The study file as strict pydantic models (`StudyConfig` and its sections), and where paths go.

A study YAML is the user's whole interface to an experiment, so it is strict: every model
forbids unknown keys. Input paths (datasets, local templates, a pricing file) resolve relative
to the study file (or a given folder, for a study built from a mapping); outputs (the store, the
cache) resolve relative to the working directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from itemeval.datasets.adapters import DatasetSource
from itemeval.ids import slugify
from itemeval.providers import EndpointSettings
from itemeval.providers.types import SamplingParams
from itemeval.secrets import option_problems
from itemeval.storage import OptionsByUrl
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


class Adaptive(StrictModel):
    """`adaptive:` of a model entry: its conditions answer items shard by shard, chosen by
    `itemeval.irt`'s adaptive estimator on a bank calibrated on other conditions, until the
    predicted full-benchmark accuracy is precise enough or a share of the items is used
    (docs/irt.md)."""

    #: Where the calibrating answers are: `study` (this study's store, the other conditions)
    #: or the URL of another store on which `itemeval analyze irt` ran.
    calibration: str = Field(default="study", min_length=1)
    target_se: float = Field(default=0.03, gt=0, le=0.5)
    max_share: float = Field(default=0.2, gt=0, le=1)
    #: Items per shard (per round); 0: 5% of the items, at least 10.
    shard_size: int = Field(default=0, ge=0)
    seed: int = 0


class ModelEntry(StrictModel):
    """A solver model: the id the endpoint knows, which endpoint, a readable name, params."""

    id: str = Field(min_length=1)
    endpoint: str
    name: str | None = None
    params: Sampling = Sampling()
    #: Run this model's conditions adaptively (a share of the items; a predicted accuracy).
    adaptive: Adaptive | None = None

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
    #: Answer through the endpoint's structured output (a JSON schema: OpenAI-compatible
    #: `response_format`, Anthropic tool use, Gemini's response schema, the simulator) where it
    #: has one; false: a text reply read by the text parser and its guards.
    structured: bool = True
    #: `pairwise`: the judge compares each condition's answer with the `baseline` model's answer
    #: to the same item and epoch (same prompt and model config), both orders asked
    #: (`itemeval.judging._pairwise`); `judge`: it grades one answer against the rubric.
    kind: Literal["judge", "pairwise"] = "judge"
    #: the baseline of a pairwise judge: a model's `name` (or id) under `models:`
    baseline: str | None = None

    @property
    def thinks(self) -> bool:
        """Whether the judge asks for hidden reasoning (thinking)."""
        return bool(self.thinking_budget) or self.reasoning_effort not in (None, "minimal")

    def params(self) -> SamplingParams:
        return SamplingParams(
            temperature=0.0,
            max_tokens=self.max_tokens,
            seed=self.seed,
            reasoning_effort=self.reasoning_effort,
            thinking_budget=self.thinking_budget,
        )


class Panel(StrictModel):
    """Several judges' stored verdicts combined into one (`itemeval.judging._panels`): a grade
    condition of its own that makes no model call."""

    graders: list[str] = Field(min_length=2)  # judges by their name under `graders:`
    combine: Literal["majority", "mean", "median"] = "majority"
    #: How an even split goes (`majority` and `median` with an even number of judges; refused
    #: where no split can happen). Unset: `fail`.
    tie: Literal["fail", "pass"] | None = None
    #: `mean` and `median`: the combined score at or above which the panel passes (the
    #: rubric's scale). Unset: the rubric's pass score, which a rubric of pass/fail verdicts
    #: (pass only at its maximum) does not allow: its mean would pass only unanimous answers.
    threshold: float | None = None

    @property
    def tie_rule(self) -> Literal["fail", "pass"]:
        return self.tie or "fail"


class Gold(StrictModel):
    """What judges are calibrated against (`itemeval.judging`): a verifiable scorer of the study
    where items have a checkable answer, and/or a labels file of human verdicts (these win
    where both give one)."""

    scorer: str | None = None
    labels: str | None = None  # CSV or JSON Lines, relative to the study file
    sample: int | None = Field(default=None, ge=1)  # answers `plan --gold-sample` draws
    seed: int = 0


class Budget(StrictModel):
    policy: Literal["dev", "full"] = "full"
    dev_items: int = Field(default=20, ge=1)
    confirm_above_usd: float | None = Field(default=None, ge=0)
    max_usd: float | None = Field(default=None, ge=0)
    #: A cap on everything the study's store has recorded as spent, across invocations
    #: (`store.study_spent`); a run's allowance is the smaller of what this and max_usd leave.
    study_max_usd: float | None = Field(default=None, ge=0)


class Cache(StrictModel):
    enabled: bool = True
    location: str | None = None  # default: the user cache directory (see itemeval.store._cache)


class Runtime(StrictModel):
    """Execution knobs: how the work is cut and spread. They never change a result or an id."""

    #: 512: each shard writes three fragments (cache, solutions, grades) of about 4.5 ms of CPU
    #: each, nearly whatever their size; at 256 that was a quarter of a local run's CPU (1.6 of
    #: 6.5 s at 20,000 items, issue 14)
    shard_size: int = Field(default=512, ge=1, le=100_000)
    workers: int | None = Field(default=None, ge=1)  # default: one per CPU of the cluster
    shards_in_flight: int | None = Field(default=None, ge=1)  # default: 2 per worker
    #: A local run (no cluster address): its first shards run in its own process; Ray's
    #: workers join when they would help (`auto`: CPU-bound, more than 2 CPUs, long work),
    #: as soon as a shard waits for a place (`always`), or never (`never`, as `--no-ray`).
    #: Under `auto`, a process that has already called `ray.init` runs on that Ray. See
    #: docs/study.md#runtime.
    local_ray: Literal["auto", "always", "never"] = "auto"
    #: The run compacts the partitions it wrote (docs/store.md#compaction): at its end, and
    #: while it runs a partition to which it has written `compact_fragments` fragments (and as
    #: many rows as before) since that partition's last compaction, in a thread of the driver
    #: beside dispatch. false: fragments stay as written (`itemeval compact` merges them).
    compact: bool = True
    compact_fragments: int = Field(default=1000, ge=1, le=10_000_000)


class Analysis(StrictModel):
    """How results are compared (docs/statistics.md). Never changes a result or an id."""

    #: Items that are not independent (a shared passage, a source document): an item attribute
    #: (`difficulty`, `modality`, ...) or a metadata key. Every interval and test then resamples
    #: whole groups of items with the same value.
    cluster_by: str | None = Field(default=None, min_length=1)
    #: How the p-values of a family of comparisons are adjusted: Holm (family-wise error) or
    #: Benjamini-Hochberg (false discovery rate).
    adjust: Literal["holm", "bh"] = "holm"
    #: The level at which a difference counts as real, after the adjustment.
    alpha: float = Field(default=0.05, gt=0, lt=1)


class StudyConfig(StrictModel):
    """A whole study file (the `itemeval.Study` API object wraps one)."""

    study: str = Field(min_length=1, description="the study's name")
    description: str | None = None
    store: str | None = None
    #: fsspec options of the store, and of every other URL with the store's protocol.
    storage_options: dict[str, Any] = Field(default_factory=dict, repr=False)
    #: fsspec options of the URLs under a prefix (the longest matching prefix wins).
    storage_options_by_prefix: dict[str, dict[str, Any]] = Field(default_factory=dict, repr=False)
    datasets: list[DatasetSource] = Field(min_length=1)
    endpoints: dict[str, EndpointSettings] = Field(min_length=1)
    models: list[ModelEntry] = Field(min_length=1)
    sampling: Sampling = Sampling()
    facets: Facets = Facets()
    graders: dict[str, Grader] = Field(default_factory=dict)
    panels: dict[str, Panel] = Field(default_factory=dict)
    gold: Gold = Gold()
    budget: Budget = Budget()
    cache: Cache = Cache()
    pricing: str | None = None
    prompts_dir: str = "prompts"
    rubrics_dir: str = "rubrics"
    runtime: Runtime = Runtime()
    analysis: Analysis = Analysis()
    #: Imported generate conditions of the store to grade with this study's graders (ids,
    #: slugs, prefixes or globs, as `--condition`; docs/importing.md). Never generated again.
    imported: list[str] = Field(default_factory=list)

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

    @field_validator("storage_options")
    @classmethod
    def _no_credentials(cls, value: dict[str, Any]) -> dict[str, Any]:
        problems = option_problems(value, "storage_options")
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("storage_options_by_prefix")
    @classmethod
    def _prefixes_are_urls(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        problems = option_problems(value, "storage_options_by_prefix")
        if problems:
            raise ValueError("; ".join(problems))
        for prefix in value:
            if "://" not in prefix and not prefix.startswith("/"):
                raise ValueError(
                    f"{prefix!r} is not a URL prefix: use a URL such as 's3://bucket/' or "
                    "'gs://', or an absolute path"
                )
        return value

    # -- where things are ----------------------------------------------------------------
    @property
    def base_dir(self) -> Path:
        """The folder of the study file: input paths resolve against it."""
        return self._base_dir

    @property
    def path(self) -> Path | None:
        """The study file, or None for a study built from a mapping."""
        return self._path

    @property
    def content_hash(self) -> str:
        """sha256 of the study file's bytes, or of a mapping's canonical JSON (in manifests)."""
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

    def options_by_url(self, store_url: str | None = None) -> OptionsByUrl:
        """The fsspec options of every URL the study reads or writes (`storage.OptionsByUrl`):
        `storage_options` go to the store at `store_url` (default: the study's) and to every
        other URL with its protocol, unless a prefix in `storage_options_by_prefix` covers the
        URL."""
        return OptionsByUrl(
            default=dict(self.storage_options),
            default_url=store_url or self.store_url,
            by_prefix={k: dict(v) for k, v in self.storage_options_by_prefix.items()},
        )

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
