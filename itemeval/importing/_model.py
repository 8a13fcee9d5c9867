"""What an import reads from another tool's results, before it is written to a store.

Every reader (Every Eval Ever records, lm-eval, inspect_ai, HELM) turns its source into the same
three things: `Sample`s (one graded answer: the item, the answer, the grade), `Rejection`s (a
record that cannot be imported, with a named reason) and, per source file, a `SourceFile`
(provenance: tool, version, path, sha256).

A sample's `GenerateFacts` and `GradeFacts` say what the source states about how the answer was
produced and graded; the imported conditions' ids are derived from exactly that content
(`generate_payload`, `grade_payload`), marked as imported so that they never equal a native
condition's id (a native run never silently reuses an import: docs/importing.md).

Items of other tools are keyed by their benchmark as well as their id: each benchmark (tool,
task or scenario, split) is a dataset of its own (`benchmark_dataset`), and an item's stored id
is its source id qualified by that dataset (`qualified_id`). Row keys hold an item id only, so
two tasks whose samples are both numbered 1..10 would otherwise share their rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from itemeval.ids import condition_id, sha256_hex, slugify

#: Every reason a record can be rejected for (docs/importing.md lists what each means).
REASONS: dict[str, str] = {
    "invalid_json": "the line or file is not JSON",
    "schema_violation": "a required field is missing or has the wrong type",
    "unknown_schema_version": "schema_version is not one of 0.2.0, 0.2.2, 0.3.0",
    "missing_reference": "the record states no reference answer",
    "missing_input": "the record states no input",
    "missing_score": "the record states no score",
    "bad_sample_id": "the sample id is empty",
    "duplicate_sample_id": "a second record for the same sample, epoch and metric",
    "conflicting_item": "the same item id with another input or reference",
    "conflicting_answer": "the same sample and epoch with another answer text",
    "invalid_item": "the item cannot be written in the item format (id, prompt, reference)",
    "no_aggregate": "an instance file without its aggregate record",
    "not_a_record": "a JSON file that is none of the formats read",
    "unreadable": "the file or an archive member cannot be read (damaged, truncated)",
}

#: Between an imported item's dataset and its id in the item id (never in a dataset name).
ID_SEPARATOR = "~"


def benchmark_dataset(tool: str, task: str, split: str | None = None) -> str:
    """The dataset of one source benchmark: `<tool>.<task>` (`.<split>` where a run holds
    several splits), slugified."""
    parts = [tool, task] + ([split] if split else [])
    return ".".join(slugify(p) for p in parts)


def qualified_id(dataset: str, sample_id: str) -> str:
    """The stored id of an imported item: `<dataset>~<source id>`, unique across the store's
    datasets (a dataset name never holds `~`)."""
    return f"{dataset}{ID_SEPARATOR}{sample_id}"


@dataclass(frozen=True, slots=True)
class SourceFile:
    """Provenance of one file read."""

    path: str
    tool: str  # every_eval_ever | lm_eval | inspect_ai | helm
    version: str | None
    sha256: str


@dataclass(frozen=True, slots=True)
class GenerateFacts:
    """What the source states about how its answers were produced."""

    tool: str
    model_id: str
    model_name: str
    params: tuple[tuple[str, Any], ...]  # sampling parameters stated, sorted by name
    prompt_name: str
    prompt_text: str | None
    config_name: str = "imported"
    slug: str | None = None  # a slug the source states (itemeval's own records)
    task: str | None = None  # the task or scenario run (part of the condition's name and id)

    @property
    def params_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.params}

    @property
    def prompt_sha256(self) -> str | None:
        return None if self.prompt_text is None else sha256_hex(self.prompt_text)

    def native_payload(self) -> dict[str, Any]:
        """The payload a native condition with this content would have (for matching)."""
        return {
            "stage": "generate",
            "model": self.model_id,
            "params": self.params_dict,
            "prompt": {"name": self.prompt_name, "sha256": self.prompt_sha256},
        }

    def payload(self) -> dict[str, Any]:
        imported: dict[str, Any] = {"tool": self.tool}
        if self.task is not None:
            imported["task"] = self.task
        return self.native_payload() | {"imported": imported}

    @property
    def default_slug(self) -> str:
        """`<model>_<task>_<tool>`: what status, the report and the viewer show."""
        parts = [self.model_name] + ([self.task] if self.task else []) + [self.tool]
        return slugify("_".join(parts))

    @property
    def id(self) -> str:
        return condition_id(self.slug or self.default_slug, self.payload())


@dataclass(frozen=True, slots=True)
class GradeFacts:
    """What the source states about how its answers were graded: its metric is the grader."""

    tool: str
    metric: str
    kind: str = "scorer"  # "scorer" | "judge" (a source's LLM judge, e.g. itemeval's)
    grader_model: str | None = None
    rubric_name: str | None = None
    rubric_text: str | None = None
    pass_score: float | None = None
    max_score: float | None = None
    slug: str | None = None

    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "stage": "grade",
            "imported": {"tool": self.tool, "metric": self.metric, "kind": self.kind},
        }
        if self.kind == "judge":
            payload["grader"] = {"model": self.grader_model}
            payload["rubric"] = {
                "name": self.rubric_name,
                "sha256": None if self.rubric_text is None else sha256_hex(self.rubric_text),
            }
        return payload

    @property
    def id(self) -> str:
        return condition_id(self.slug or slugify(f"{self.tool}_{self.metric}"), self.payload())


@dataclass(slots=True)
class Sample:
    """One graded answer as the source states it."""

    gen: GenerateFacts
    grade: GradeFacts
    dataset: str
    item_id: str
    epoch: int
    input: str
    reference: str
    answer: str
    score: float
    correct: bool
    record_id: str  # where in the source: `<file>:<line>` or the source's own id
    choices: list[str] | None = None
    modality: str | None = None
    difficulty: float | None = None
    task_prompt: str | None = None
    grading_scheme: str | None = None
    item_extras: dict[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0
    latency_ms: float = 0.0
    usd: float = 0.0
    extracted: str | None = None
    reasoning: str | None = None  # a judge's explanation


@dataclass(slots=True)
class SampleBatch:
    """Samples of one evaluation as columns (`BATCH_SCHEMA`): the fast path of large files."""

    gen: GenerateFacts
    grade: GradeFacts
    dataset: str
    file_sha256: str
    table: Any  # pa.Table with BATCH_SCHEMA


@dataclass(frozen=True, slots=True)
class Rejection:
    """A record that is not imported, and why."""

    reason: str  # a key of REASONS
    file: str
    line: int | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        assert self.reason in REASONS, self.reason

    def describe(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


def stated_params(values: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Stated parameters, hashable (lists as tuples), sorted by name."""
    return tuple(
        sorted(
            (k, tuple(v) if isinstance(v, list) else v) for k, v in values.items() if v is not None
        )
    )
