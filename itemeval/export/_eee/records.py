"""Every Eval Ever records: what each of our fields becomes, in the seed format and in 0.3.0.

One *evaluation* is one generate condition (a model with a prompt and a model config) on one
dataset, graded by one grade condition. Each evaluation gets

* an aggregate record (`aggregate_eval_0.1.0` by default, `eval.schema.json` 0.3.0 with
  `--eee-version 0.3.0`): model info, source data, the metric (accuracy), the score with its 95%
  bootstrap interval, and the generation config;
* a samples file (`instance_level_eval_0.2.0` / 0.3.0), one JSON line per graded answer
  (item x epoch), linked to the aggregate by `evaluation_id` (and `evaluation_result_id`).

Files follow the Every Eval Ever datastore layout under `<out>/eee/`:
`data/<dataset>/<developer>/<model>/<uuid>.json` and `<uuid>_samples.jsonl`, with a uuid derived
from the study and the evaluation (a re-export overwrites the same files).

What counts: a sample is an answer with a final grade (grade `ok`, judge output parsed, grade
given to the current solution text). Failed judge calls, judge parse failures and stale grades
are left out of the samples and the score, and counted in the aggregate's details. Absent
optional keys are left out, never written as null (the published schemas reject nulls where
the Python models of the Every Eval Ever repository would accept them).

This module has what both record kinds share and the instance records; `aggregate` builds the
aggregates; both are pure (row dicts in, record dicts out); `writer` streams them.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from itemeval.ids import canonical_json
from itemeval.results import ITEM_FIELDS, GenerateFacets, GradeFacets

EeeVersion = Literal["0.2.0", "0.3.0"]
EEE_VERSIONS: tuple[str, ...] = ("0.2.0", "0.3.0")
#: (record kind, --eee-version) -> (schema file, `schema_version` written in records)
SCHEMAS: dict[tuple[str, str], tuple[str, str]] = {
    ("instance", "0.2.0"): ("instance_level_eval_0.2.0.schema.json", "0.2.0"),
    ("aggregate", "0.2.0"): ("aggregate_eval_0.1.0.schema.json", "0.1.0"),
    ("instance", "0.3.0"): ("instance_level_eval_0.3.0.schema.json", "0.3.0"),
    ("aggregate", "0.3.0"): ("aggregate_eval_0.3.0.schema.json", "0.3.0"),
}
#: Aggregates list the graded sample ids only up to this many (the record stays readable).
MAX_SAMPLE_IDS = 10_000
RELATIONSHIPS = ("first_party", "third_party", "collaborative", "other")
_PATH_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@cache
def eee_schema(kind: Literal["instance", "aggregate"], version: str) -> dict[str, Any]:
    """The packaged JSON Schema of a record kind for an `--eee-version`."""
    name, _ = SCHEMAS[(kind, version)]
    text = resources.files("itemeval.export._eee").joinpath("schemas", name).read_text("utf-8")
    return dict(json.loads(text))


@dataclass(frozen=True, slots=True)
class DatasetSourceInfo:
    """What the records say about a dataset's origin."""

    name: str
    items: int  # selected items (the study's sample)
    fingerprint: str
    path: str  # as written in the study file
    format: str | None
    split: str | None = None
    revision: str | None = None


@dataclass(frozen=True, slots=True)
class RecordContext:
    """What every record of one export shares."""

    study: str
    version: str
    retrieved: str  # unix seconds, as a string (the schema's convention)
    organization: str
    relationship: str
    epochs: int


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One evaluation: names, ids and paths of its two files."""

    context: RecordContext
    generate: GenerateFacets
    grade: GradeFacets
    dataset: DatasetSourceInfo
    endpoint_kind: str
    prompt_text: str
    rubric_text: str | None
    begun: str | None = None  # when its samples file was begun (default: `context.retrieved`)

    @property
    def uuid(self) -> str:
        key = "\x1f".join((self.context.study, self.generate.id, self.dataset.name, self.grade.id))
        return str(uuid.UUID(bytes=hashlib.sha256(key.encode()).digest()[:16], version=4))

    @property
    def developer(self) -> str | None:
        model = self.generate.model
        return model.split("/", 1)[0] if "/" in model else None

    @property
    def folder(self) -> str:
        """`data/<dataset>/<developer>/<model>` (the datastore layout)."""
        model = self.generate.model
        name = model.split("/", 1)[1] if "/" in model else model
        parts = [self.dataset.name, self.developer or "unknown", name]
        return "data/" + "/".join(_PATH_UNSAFE.sub("_", p).strip(".") or "x" for p in parts)

    @property
    def aggregate_path(self) -> str:
        return f"{self.folder}/{self.uuid}.json"

    @property
    def samples_path(self) -> str:
        return f"{self.folder}/{self.uuid}_samples.jsonl"

    @property
    def evaluation_id(self) -> str:
        model = self.generate.model.replace("/", "_")
        return (
            f"{self.dataset.name}/{model}/{self.generate.id}/{self.grade.id}/"
            f"{self.begun or self.context.retrieved}"
        )

    @property
    def evaluation_name(self) -> str:
        return f"{self.dataset.name}, {self.grade.label}"

    @property
    def result_id(self) -> str:
        return f"{self.dataset.name}/accuracy/{self.grade.slug}"


# -- instance records -------------------------------------------------------------------------


#: Long-table columns an instance record is built from.
SAMPLE_COLUMNS: list[str] = [
    "gen_condition_id",
    "grade_condition_id",
    "model",
    "prompt",
    "model_config",
    "grader_kind",
    "grader",
    "grader_model",
    "rubric",
    "item_id",
    "dataset",
    "epoch",
    *ITEM_FIELDS,
    "solution_text",
    "finish_reason",
    "solution_input_tokens",
    "solution_output_tokens",
    "solution_reasoning_tokens",
    "solution_cached_input_tokens",
    "solution_usd",
    "solution_latency_ms",
    "solution_cached",
    "extracted",
    "score",
    "correct",
    "judge_reasoning",
    "grade_usd",
    "graded_at",
]


def sample_mask(table: pa.Table) -> pa.ChunkedArray:
    """Which long-table rows are samples: a final grade of the current answer (module doc)."""

    def true(name: str) -> pa.ChunkedArray:
        return pc.fill_null(table.column(name), False)

    mask = pc.and_(true("graded"), pc.equal(pc.fill_null(table.column("grade_status"), ""), "ok"))
    mask = pc.and_(mask, true("parse_ok"))
    mask = pc.and_(
        mask, pc.and_(pc.is_valid(table.column("score")), pc.is_valid(table.column("correct")))
    )
    return pc.and_(mask, pc.invert(true("grade_stale")))


def sample_hash(raw: str, reference: str) -> str:
    """sha256 of the canonical JSON of {raw, reference} (keys sorted, no spaces, UTF-8): the
    same item gives the same hash in any export."""
    # Spelled out: two json.dumps of strings are much cheaper than canonical_json of a dict,
    # and give exactly the same text.
    text = '{"raw":' + _dump(raw) + ',"reference":' + _dump(reference) + "}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_dump = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def build_instance(
    evaluation: Evaluation,
    row: dict[str, Any],
    formatted: str | None = None,
    choices: list[str] | None = None,
) -> dict[str, Any]:
    """One instance record from one long-table row (a row `sample_mask` selects; `row` needs
    the `SAMPLE_COLUMNS`)."""
    v3 = evaluation.context.version == "0.3.0"
    text = row["solution_text"] or ""
    target = row["target"] or ""
    raw_input = row["input"] or ""
    item_input: dict[str, Any] = {"raw": raw_input, "reference": [target] if v3 else target}
    if formatted:
        item_input["formatted"] = formatted
    if choices:
        item_input["choices"] = choices
    record: dict[str, Any] = {
        "schema_version": SCHEMAS[("instance", evaluation.context.version)][1],
        "evaluation_id": evaluation.evaluation_id,
        "model_id": row["model"],
        "evaluation_name": evaluation.evaluation_name,
    }
    if v3:
        record["evaluation_result_id"] = evaluation.result_id
    record |= {
        "sample_id": str(row["item_id"]),
        "sample_hash": sample_hash(raw_input, target),
        "interaction_type": "single_turn",
        "input": item_input,
        "output": {"raw": [text] if v3 else text},
        "answer_attribution": _attribution(row),
        "evaluation": {"score": float(row["score"]), "is_correct": bool(row["correct"])},
    }
    if row["solution_input_tokens"] is not None:
        usage = {
            "input_tokens": int(row["solution_input_tokens"]),
            "output_tokens": int(row["solution_output_tokens"] or 0),
        }
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        usage["input_tokens_cache_read"] = int(row["solution_cached_input_tokens"] or 0)
        usage["reasoning_tokens"] = int(row["solution_reasoning_tokens"] or 0)
        record["token_usage"] = usage
    if row["solution_latency_ms"] is not None:
        record["performance"] = {"latency_ms": max(0.0, float(row["solution_latency_ms"]))}
    record["metadata"] = strings(
        {
            "epoch": row["epoch"],
            "dataset": row["dataset"],
            "modality": row["modality"],
            "difficulty": row["difficulty"],
            "prompt": row["prompt"],
            "model_config": row["model_config"],
            "gen_condition_id": row["gen_condition_id"],
            "grade_condition_id": row["grade_condition_id"],
            "grader_kind": row["grader_kind"],
            "grader": row["grader"],
            "grader_model": row["grader_model"],
            "rubric": row["rubric"],
            "judge_reasoning": row["judge_reasoning"],
            "finish_reason": row["finish_reason"],
            "solution_cached": row["solution_cached"],
            "solution_usd": row["solution_usd"],
            "grade_usd": row["grade_usd"],
            "item_metadata": row["metadata"] if row["metadata"] not in (None, "{}") else None,
        }
    )
    return record


def _attribution(row: dict[str, Any]) -> list[dict[str, Any]]:
    if row["grader_kind"] != "scorer" or row["extracted"] is None:
        return []  # a judge reads the whole answer; it extracts nothing
    return [
        {
            "turn_idx": 0,
            "source": "output.raw",
            "extracted_value": str(row["extracted"]),
            "extraction_method": f"itemeval scorer {row['grader']}",
            "is_terminal": True,
        }
    ]


def item_choices(metadata: dict[str, Any]) -> list[str] | None:
    """The item's answer options, when its metadata lists them as strings (`choices`)."""
    value = metadata.get("choices")
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value
    return None


def strings(values: dict[str, Any]) -> dict[str, str]:
    """A details map: string values only (Every Eval Ever's rule), absent values left out."""
    out: dict[str, str] = {}
    for key, value in values.items():
        kind = type(value)
        if kind is str:
            out[key] = value
        elif value is None:
            continue
        elif kind is bool:
            out[key] = "true" if value else "false"
        elif kind is int or kind is float:
            out[key] = repr(value)
        else:
            out[key] = canonical_json(value)
    return out
