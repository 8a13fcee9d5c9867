"""Every Eval Ever records (schemas 0.2.0, 0.2.2 and 0.3.0) as samples to import.

A source is a record file or a folder of them. Each aggregate record (`<uuid>.json`) says who
produced the answers (model, generation config, the library that ran the evaluation) and how
they were graded (one entry of `evaluation_results` per metric); its instance records
(`<uuid>_samples.jsonl`, named by `detailed_evaluation_results`) hold one graded answer per line.
An instance file is read only with its aggregate: without one (missing, or not readable) its rows
cannot say which library ran them, with what settings, nor how it counts epochs, so the file is
rejected (`no_aggregate`). Lines are read one at a time: memory does not grow with the file.
Records of other libraries are keyed by their benchmark: a dataset `<library>.<dataset name>`,
item ids qualified by it (`_model.qualified_id`).

Records that itemeval itself exported (`eval_library.name == "itemeval"`, or `0.2.0` records
whose metadata names itemeval's condition ids) keep their facets: model name, prompt, model
config, grader and rubric, and the condition slugs, so that a study exported and imported again
reads the same (the round trip, docs/importing.md).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from itemeval.ids import slugify
from itemeval.importing._model import (
    GenerateFacts,
    GradeFacts,
    Rejection,
    Sample,
    SourceFile,
    benchmark_dataset,
    qualified_id,
)

_loads = json.loads

TOOL = "every_eval_ever"
VERSIONS = ("0.1.0", "0.2.0", "0.2.1", "0.2.2", "0.3.0")
_PARAMS = ("temperature", "top_p", "max_tokens", "seed")


@dataclass
class EeeUnit:
    """One evaluation: an aggregate record and its instance file (either may be absent)."""

    aggregate: str | None
    samples: str | None

    @property
    def files(self) -> list[str]:
        return [p for p in (self.aggregate, self.samples) if p is not None]


def is_eee_aggregate(record: Any) -> bool:
    return isinstance(record, dict) and "evaluation_results" in record and "model_info" in record


def units(paths: list[str]) -> tuple[list[EeeUnit], list[Rejection]]:
    """Pair the aggregate records and instance files among `paths` (files already listed)."""
    aggregates: dict[str, EeeUnit] = {}
    rejected: list[Rejection] = []
    damaged: dict[str, str] = {}  # an aggregate that cannot be read -> why
    jsonl = [p for p in paths if p.endswith(".jsonl")]
    for path in sorted(p for p in paths if p.endswith(".json")):
        try:
            with open(path, "rb") as handle:
                record = _loads(handle.read())
        except (OSError, ValueError) as exc:
            rejected.append(Rejection("invalid_json", path, None, str(exc)[:200]))
            damaged[path] = "invalid_json"
            continue
        if not is_eee_aggregate(record):
            rejected.append(Rejection("not_a_record", path, None, "no evaluation_results"))
            continue
        try:
            read_aggregate_record(record)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            detail = f"{type(exc).__name__}: {exc}"[:160]
            rejected.append(Rejection("schema_violation", path, None, detail))
            damaged[path] = "schema_violation"
            continue
        aggregates[path] = EeeUnit(path, _samples_of(path, record))
    claimed = {u.samples for u in aggregates.values() if u.samples}
    found = list(aggregates.values())
    for path in sorted(jsonl):
        if path not in claimed:
            rejected.append(Rejection("no_aggregate", path, None, _orphan_detail(path, damaged)))
    return found, rejected


def _orphan_detail(path: str, damaged: dict[str, str]) -> str:
    """Why an instance file has no aggregate: the one beside it (`<uuid>.json` for
    `<uuid>_samples.jsonl`) is damaged, or none names it."""
    stem = path[: -len(".jsonl")]
    for candidate in (stem.removesuffix("_samples") + ".json", stem + ".json"):
        if candidate in damaged:
            return f"its aggregate {os.path.basename(candidate)} is rejected ({damaged[candidate]})"
    return "no aggregate record names it: import it with its aggregate"


def _samples_of(path: str, record: dict[str, Any]) -> str | None:
    folder = os.path.dirname(path)
    detailed = record.get("detailed_evaluation_results")
    names: list[str] = []
    if isinstance(detailed, dict) and isinstance(detailed.get("file_path"), str):
        names.append(os.path.basename(detailed["file_path"]))
    per_samples = record.get("detailed_evaluation_results_per_samples")
    if isinstance(per_samples, str):
        names.append(os.path.basename(per_samples))
    names.append(os.path.basename(path)[: -len(".json")] + "_samples.jsonl")
    for name in names:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class AggregateFacts:
    """What one aggregate record states, read once for all its instance lines."""

    schema_version: str
    library: str
    library_version: str | None
    model_id: str
    model_name: str
    #: evaluation_result_id (or "") -> (generate facts, grade facts)
    results: dict[str, tuple[GenerateFacts, GradeFacts]] = field(default_factory=dict)
    dataset: str | None = None
    scores: list[dict[str, Any]] = field(default_factory=list)  # the aggregate scores stated

    @property
    def itemeval(self) -> bool:
        return self.library == "itemeval"


def read_aggregate(path: str) -> AggregateFacts:
    with open(path, "rb") as handle:
        return read_aggregate_record(_loads(handle.read()))


def read_aggregate_record(record: dict[str, Any]) -> AggregateFacts:
    version = str(record.get("schema_version", ""))
    library = record.get("eval_library") or {}
    info = record["model_info"]
    details = info.get("additional_details") or {}
    if not isinstance(details, dict):
        details = {}
    source = record.get("source_metadata") or {}
    source_details = source.get("additional_details") or {}
    itemeval = library.get("name") == "itemeval" or (
        isinstance(source_details, dict) and source_details.get("tool") == "itemeval"
    )
    facts = AggregateFacts(
        schema_version=version,
        library="itemeval" if itemeval else str(library.get("name") or "unknown"),
        library_version=None if library.get("version") is None else str(library["version"]),
        model_id=str(info["id"]),
        model_name=str(details.get("itemeval_model_name") or info.get("name") or info["id"]),
    )
    if version == "0.1.0" and str(
        record.get("source_metadata", {}).get("source_name", "")
    ).startswith("itemeval study"):
        facts.library = "itemeval"
    for result in record["evaluation_results"]:
        result_id = str(result.get("evaluation_result_id") or "")
        gen = _generate_facts(facts, result)
        grade = _grade_facts(facts, result)
        facts.results.setdefault(result_id, (gen, grade))
        facts.results.setdefault("", (gen, grade))
        score = (result.get("score_details") or {}).get("score")
        facts.scores.append(
            {
                "evaluation_name": result.get("evaluation_name"),
                "metric": grade.metric,
                "score": score,
            }
        )
        data = result.get("source_data") or record.get("source_data") or {}
        if facts.dataset is None and isinstance(data, dict) and data.get("dataset_name"):
            facts.dataset = str(data["dataset_name"])
    return facts


def _generate_facts(facts: AggregateFacts, result: dict[str, Any]) -> GenerateFacts:
    config = result.get("generation_config") or {}
    args = config.get("generation_args") or {}
    details = config.get("additional_details") or {}
    if isinstance(details, str):  # 0.1.0 writes the details as a JSON string
        try:
            details = json.loads(details)
        except ValueError:
            details = {}
    params: dict[str, Any] = {}
    for name in _PARAMS:
        value = args.get(name)
        if value is None and facts.itemeval:
            value = details.get(name)
        if value is not None:
            params[name] = _number(value)
    if facts.itemeval:
        for name in ("reasoning_effort", "thinking_budget", "stop"):
            if details.get(name) is not None:
                value = details[name]
                if name == "stop" and isinstance(value, str):
                    value = json.loads(value)
                params[name] = _number(value) if name == "thinking_budget" else value
        if "top_k" in args:
            params["top_k"] = args["top_k"]
    elif args.get("top_k") is not None:
        params["top_k"] = args["top_k"]
    prompt = args.get("prompt_template")
    data = result.get("source_data") or {}
    task = None
    if not facts.itemeval:
        named = data.get("dataset_name") if isinstance(data, dict) else None
        task = str(named or result.get("evaluation_name") or "evaluation")
    slug = None
    gen_id = details.get("gen_condition_id") if facts.itemeval else None
    if isinstance(gen_id, str) and "--" in gen_id:
        slug = gen_id.rsplit("--", 1)[0]
    return GenerateFacts(
        tool=facts.library,
        model_id=facts.model_id,
        model_name=facts.model_name,
        params=tuple(
            sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items())
        ),
        prompt_name=str(details.get("prompt") or f"{facts.library}:prompt")
        if facts.itemeval
        else f"{facts.library}:prompt",
        prompt_text=prompt if isinstance(prompt, str) else None,
        config_name=str(details.get("model_config") or "imported")
        if facts.itemeval
        else "imported",
        slug=slug,
        task=task,
    )


def _number(value: Any) -> Any:
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() and "." not in value else number
    return value


def _grade_facts(facts: AggregateFacts, result: dict[str, Any]) -> GradeFacts:
    metric_config = result.get("metric_config") or {}
    details = (result.get("score_details") or {}).get("details") or {}
    if facts.itemeval and isinstance(details, dict) and details.get("grader"):
        kind = str(details.get("grader_kind") or "scorer")
        grade_id = str(details.get("grade_condition_id") or "")
        scoring = metric_config.get("llm_scoring") or {}
        scoring_details = scoring.get("additional_details") or {}
        return GradeFacts(
            tool="itemeval",
            metric=str(details["grader"]),
            kind=kind,
            grader_model=details.get("grader_model"),
            rubric_name=details.get("rubric"),
            rubric_text=scoring.get("input_prompt"),
            pass_score=_float(scoring_details.get("pass_score"), 1.0) if kind == "judge" else None,
            max_score=_float(scoring_details.get("max_score"), 1.0) if kind == "judge" else None,
            slug=grade_id.rsplit("--", 1)[0] if "--" in grade_id else None,
        )
    metric = (
        metric_config.get("metric_name")
        or metric_config.get("metric_id")
        or result.get("evaluation_result_id")
        or result.get("evaluation_name")
        or "score"
    )
    return GradeFacts(tool=facts.library, metric=str(metric))


def _float(value: Any, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def source_file(path: str, facts: AggregateFacts | None) -> SourceFile:
    version = None if facts is None else facts.schema_version
    return SourceFile(path=path, tool=TOOL, version=version, sha256=sha256_file(path))


def read_samples(path: str, facts: AggregateFacts | None) -> Iterator[Sample | Rejection]:
    """The instance records of `path`, line by line."""
    cache: dict[tuple[str, str, str], tuple[GenerateFacts, GradeFacts]] = {}
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            sample = line_sample(line, facts, path, number, cache)
            if sample is not None:
                yield sample


def line_sample(
    line: bytes,
    facts: AggregateFacts | None,
    path: str,
    number: int,
    cache: dict[tuple[str, str, str], tuple[GenerateFacts, GradeFacts]],
) -> Sample | Rejection | None:
    """Line `number` of `path` (an instance record) as a sample, or the rejection that names
    it; None for a blank line."""
    if not line.strip():
        return None
    try:
        row = _loads(line)
    except ValueError as exc:
        return Rejection("invalid_json", path, number, str(exc)[:120])
    try:
        return _sample(row, facts, path, number, cache)
    except _Reject as reject:
        return Rejection(reject.reason, path, number, reject.detail)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        return Rejection("schema_violation", path, number, f"{type(exc).__name__}: {exc}"[:160])


class _Reject(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail


def _sample(
    row: dict[str, Any],
    facts: AggregateFacts | None,
    path: str,
    number: int,
    cache: dict[tuple[str, str, str], tuple[GenerateFacts, GradeFacts]],
) -> Sample:
    version = row.get("schema_version")
    if version is not None and str(version) not in VERSIONS:
        raise _Reject("unknown_schema_version", str(version))
    sample_id = row.get("sample_id")
    if sample_id is None or str(sample_id) == "":
        raise _Reject("bad_sample_id")
    item = row["input"]
    raw = item.get("raw")
    if not isinstance(raw, str) or not raw.strip():
        raise _Reject("missing_input")
    reference = item.get("reference")
    if isinstance(reference, list):
        if not reference:
            raise _Reject("missing_reference")
        reference = str(reference[0]) if len(reference) == 1 else " | ".join(map(str, reference))
    elif reference is None:
        raise _Reject("missing_reference")
    evaluation = row["evaluation"]
    score = evaluation.get("score")
    if score is None:
        raise _Reject("missing_score")
    score = float(score)
    correct = evaluation.get("is_correct")
    correct = bool(correct) if correct is not None else score >= 1.0
    metadata = row.get("metadata") or {}
    result_id = str(row.get("evaluation_result_id") or "")
    model_id = str(row.get("model_id") or (facts.model_id if facts else ""))
    key = (result_id, model_id, str(row.get("evaluation_name") or ""))
    pair = cache.get(key)
    if pair is None:
        pair = cache[key] = _facts_for(row, facts, result_id, metadata)
    gen, grade = pair
    itemeval = (facts is not None and facts.itemeval) or "gen_condition_id" in metadata
    dataset = str(
        metadata.get("dataset")
        if itemeval and metadata.get("dataset")
        else (
            facts.dataset if facts and facts.dataset else row.get("evaluation_name") or "imported"
        )
    )
    epoch = 0
    if "epoch" in metadata:
        epoch = int(metadata["epoch"])
        if not itemeval and gen.tool == "inspect_ai":
            epoch -= 1  # inspect counts epochs from 1
    item_id = str(sample_id)
    extras: dict[str, Any] = {}
    if itemeval:
        dataset = slugify(dataset)
    else:  # keyed by its benchmark
        dataset = benchmark_dataset(gen.tool, dataset)
        item_id, extras = qualified_id(dataset, item_id), {"sourceId": item_id}
    sample = Sample(
        gen=gen,
        grade=grade,
        dataset=dataset,
        item_id=item_id,
        item_extras=extras,
        epoch=max(epoch, 0),
        input=raw,
        reference=str(reference),
        answer=_answer(row),
        score=score,
        correct=correct,
        record_id=f"{os.path.basename(path)}:{number}",
        choices=_choices(item.get("choices")),
        finish_reason=metadata.get("finish_reason") or metadata.get("stop_reason"),
    )
    usage = row.get("token_usage")
    if usage:
        sample.input_tokens = int(usage.get("input_tokens") or 0)
        sample.output_tokens = int(usage.get("output_tokens") or 0)
        sample.reasoning_tokens = int(usage.get("reasoning_tokens") or 0)
        sample.cached_input_tokens = int(usage.get("input_tokens_cache_read") or 0)
    performance = row.get("performance")
    if performance and performance.get("latency_ms") is not None:
        sample.latency_ms = float(performance["latency_ms"])
    attribution = row.get("answer_attribution") or []
    if attribution and isinstance(attribution[-1], dict):
        value = attribution[-1].get("extracted_value")
        sample.extracted = None if value is None else str(value)
    if itemeval:
        _itemeval_fields(sample, metadata)
    return sample


def _itemeval_fields(sample: Sample, metadata: dict[str, Any]) -> None:
    sample.modality = metadata.get("modality")
    if metadata.get("difficulty") is not None:
        sample.difficulty = float(metadata["difficulty"])
    sample.reasoning = metadata.get("judge_reasoning")
    if metadata.get("solution_usd") is not None:
        sample.usd = float(metadata["solution_usd"])
    extras = metadata.get("item_metadata")
    if isinstance(extras, str):
        try:
            parsed = json.loads(extras)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            sample.item_extras = parsed


def _facts_for(
    row: dict[str, Any], facts: AggregateFacts | None, result_id: str, metadata: dict[str, Any]
) -> tuple[GenerateFacts, GradeFacts]:
    if facts is not None:
        pair = facts.results.get(result_id) or facts.results.get("")
        if pair is not None:
            return pair
    model_id = str(row["model_id"])
    name = str(row.get("evaluation_name") or "score")
    gen = GenerateFacts(
        tool=TOOL,
        model_id=model_id,
        model_name=model_id,
        params=(),
        prompt_name=f"{TOOL}:prompt",
        prompt_text=None,
    )
    return gen, GradeFacts(tool=TOOL, metric=result_id or name)


def _answer(row: dict[str, Any]) -> str:
    output = row.get("output")
    if isinstance(output, dict):
        raw = output.get("raw")
        if isinstance(raw, list):
            return "\n".join(str(r) for r in raw if r is not None)
        if raw is not None:
            return str(raw)
    for message in reversed(row.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "assistant":
            return str(message.get("content") or "")
    return ""


def _choices(value: Any) -> list[str] | None:
    if isinstance(value, list) and value:
        return [str(v) if not isinstance(v, (list, tuple)) else str(v[-1]) for v in value]
    return None
