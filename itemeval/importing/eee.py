"""Every Eval Ever records (schemas 0.2.0, 0.2.2 and 0.3.0) as samples to import.

A source is a record file or a folder of them. Each aggregate record (`<uuid>.json`) says who
produced the answers (model, generation config, the library that ran the evaluation) and how
they were graded (one entry of `evaluation_results` per metric); its instance records
(`<uuid>_samples.jsonl`, named by `detailed_evaluation_results`) hold one graded answer per line.
An instance file without an aggregate is read from its rows alone (model id and evaluation
name). Lines are read one at a time: memory does not grow with the file.

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

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from itemeval.ids import slugify
from itemeval.importing.model import (
    GenerateFacts,
    GradeFacts,
    Rejection,
    Sample,
    SampleBatch,
    SourceFile,
)

try:  # a third of the time per line where it is installed; the standard library otherwise
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - depends on the environment
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
    jsonl = [p for p in paths if p.endswith(".jsonl")]
    for path in sorted(p for p in paths if p.endswith(".json")):
        try:
            with open(path, "rb") as handle:
                record = _loads(handle.read())
        except (OSError, ValueError) as exc:
            rejected.append(Rejection("invalid_json", path, None, str(exc)[:200]))
            continue
        if not is_eee_aggregate(record):
            rejected.append(Rejection("not_a_record", path, None, "no evaluation_results"))
            continue
        aggregates[path] = EeeUnit(path, _samples_of(path, record))
    claimed = {u.samples for u in aggregates.values() if u.samples}
    found = list(aggregates.values())
    for path in sorted(jsonl):
        if path not in claimed:
            found.append(EeeUnit(None, path))
    return found, rejected


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
        record = _loads(handle.read())
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
            if not line.strip():
                continue
            try:
                row = _loads(line)
            except ValueError as exc:
                yield Rejection("invalid_json", path, number, str(exc)[:120])
                continue
            try:
                yield _sample(row, facts, path, number, cache)
            except _Reject as reject:
                yield Rejection(reject.reason, path, number, reject.detail)
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                yield Rejection(
                    "schema_violation", path, number, f"{type(exc).__name__}: {exc}"[:160]
                )


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
    sample = Sample(
        gen=gen,
        grade=grade,
        dataset=slugify(dataset),
        item_id=str(sample_id),
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


# -- the fast path ------------------------------------------------------------------------------

#: Bytes of a file parsed at a time by the fast path (whole lines).
CHUNK_BYTES = 16 << 20
_STRINGS = pa.list_(pa.string())


def _arrow_schema(lists: bool) -> pa.Schema:
    """What the fast path reads of an instance line (0.3.0/0.2.2 shape, or 0.2.0's strings)."""
    text = _STRINGS if lists else pa.string()
    return pa.schema(
        [
            ("schema_version", pa.string()),
            ("sample_id", pa.string()),
            ("evaluation_result_id", pa.string()),
            ("evaluation_name", pa.string()),
            (
                "input",
                pa.struct([("raw", pa.string()), ("reference", text), ("choices", _STRINGS)]),
            ),
            ("output", pa.struct([("raw", text)])),
            ("evaluation", pa.struct([("score", pa.float64()), ("is_correct", pa.bool_())])),
            (
                "token_usage",
                pa.struct(
                    [
                        ("input_tokens", pa.int64()),
                        ("output_tokens", pa.int64()),
                        ("reasoning_tokens", pa.int64()),
                        ("input_tokens_cache_read", pa.int64()),
                    ]
                ),
            ),
            ("performance", pa.struct([("latency_ms", pa.float64())])),
            (
                "metadata",
                pa.struct(
                    [
                        ("epoch", pa.string()),
                        ("stop_reason", pa.string()),
                        ("finish_reason", pa.string()),
                    ]
                ),
            ),
        ]
    )


BATCH_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("epoch", pa.int32()),
        ("input", pa.string()),
        ("reference", pa.string()),
        ("answer", pa.string()),
        ("score", pa.float64()),
        ("correct", pa.bool_()),
        ("finish_reason", pa.string()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("reasoning_tokens", pa.int64()),
        ("cached_input_tokens", pa.int64()),
        ("latency_ms", pa.float64()),
        ("record_id", pa.string()),
        ("choices", _STRINGS),
    ]
)


def fast_path_applies(facts: AggregateFacts | None) -> bool:
    """Records of other tools with an aggregate: the columns say everything the import keeps
    (itemeval's own records carry per-row facets in their metadata: the line path reads them)."""
    return facts is not None and not facts.itemeval


def read_batches(path: str, facts: AggregateFacts, file_sha256: str) -> Iterator[Any]:
    """The instance records of `path` as `SampleBatch`es, parsed by Arrow's JSON reader a
    chunk of whole lines at a time. A chunk with a line the reader or the checks refuse (bad
    JSON, a missing field, a blank line) is read line by line instead, so that each record
    still imports or is rejected with its reason and line."""
    name = os.path.basename(path)
    line_number = 1
    with open(path, "rb") as handle:
        rest = b""
        while True:
            block = handle.read(CHUNK_BYTES)
            data = rest + block
            if not data:
                break
            if block:
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    rest = data
                    continue
                chunk, rest = data[:cut], data[cut:]
            else:
                chunk, rest = data, b""
            lines = chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
            try:
                batches = _parse_chunk(chunk, lines, facts, name, line_number, file_sha256)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                batches = None  # e.g. an epoch that is not an integer: the lines say which
            if batches is None:
                yield from _lines_of(chunk, path, line_number, facts)
            else:
                yield from batches
            line_number += lines
            if not block:
                break


def _lines_of(
    chunk: bytes, path: str, first: int, facts: AggregateFacts
) -> Iterator[Sample | Rejection]:
    cache: dict[tuple[str, str, str], tuple[GenerateFacts, GradeFacts]] = {}
    for offset, line in enumerate(chunk.splitlines()):
        number = first + offset
        if not line.strip():
            continue
        try:
            row = _loads(line)
        except ValueError as exc:
            yield Rejection("invalid_json", path, number, str(exc)[:120])
            continue
        try:
            yield _sample(row, facts, path, number, cache)
        except _Reject as reject:
            yield Rejection(reject.reason, path, number, reject.detail)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            yield Rejection("schema_violation", path, number, f"{type(exc).__name__}: {exc}"[:160])


def _parse_chunk(
    chunk: bytes, lines: int, facts: AggregateFacts, name: str, first: int, file_sha256: str
) -> list[SampleBatch] | None:
    if b"\n\n" in chunk or chunk.startswith(b"\n") or b"\r" in chunk:
        return None
    table = None
    for lists in (True, False):
        try:
            table = pj.read_json(
                pa.BufferReader(chunk),
                read_options=pj.ReadOptions(block_size=len(chunk) + 1, use_threads=False),
                parse_options=pj.ParseOptions(
                    explicit_schema=_arrow_schema(lists), unexpected_field_behavior="ignore"
                ),
            )
            break
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            continue
    if table is None or table.num_rows != lines:
        return None
    table = table.combine_chunks()
    item = table.column("input").chunk(0) if table.num_rows else None
    if item is None:
        return []
    raw = pc.struct_field(item, "raw")
    reference = pc.struct_field(item, "reference")
    if pa.types.is_list(reference.type):
        has_reference = pc.greater(pc.fill_null(pc.list_value_length(reference), 0), 0)
        reference = pc.binary_join(reference, " | ")
    else:
        has_reference = pc.is_valid(reference)
    output = pc.struct_field(table.column("output").chunk(0), "raw")
    answer = pc.binary_join(output, "\n") if pa.types.is_list(output.type) else output
    evaluation = table.column("evaluation").chunk(0)
    score = pc.struct_field(evaluation, "score")
    sample_id = table.column("sample_id").chunk(0)
    version = table.column("schema_version").chunk(0)
    ok = pc.and_(pc.is_valid(sample_id), pc.not_equal(pc.fill_null(sample_id, ""), ""))
    ok = pc.and_(ok, pc.not_equal(pc.utf8_trim_whitespace(pc.fill_null(raw, "")), ""))
    ok = pc.and_(ok, has_reference)
    ok = pc.and_(ok, pc.is_valid(score))
    ok = pc.and_(ok, pc.or_(pc.is_null(version), pc.is_in(version, pa.array(VERSIONS))))
    if not pc.all(ok).as_py():
        return None
    metadata = table.column("metadata").chunk(0)
    epoch_text = pc.struct_field(metadata, "epoch")
    epochs = pc.cast(pc.fill_null(epoch_text, "0"), pa.int32())
    correct = pc.struct_field(evaluation, "is_correct")
    correct = pc.if_else(pc.is_valid(correct), correct, pc.greater_equal(score, 1.0))
    finish = pc.coalesce(
        pc.struct_field(metadata, "finish_reason"), pc.struct_field(metadata, "stop_reason")
    )
    usage = table.column("token_usage").chunk(0)
    performance = table.column("performance").chunk(0)

    def count(name: str) -> pa.Array:
        return pc.fill_null(pc.struct_field(usage, name), 0)

    numbers = pa.array(range(first, first + lines), pa.int64())
    record = pc.binary_join_element_wise(
        pa.repeat(pa.scalar(name), lines), pc.cast(numbers, pa.string()), ":"
    )
    result_ids = pc.fill_null(table.column("evaluation_result_id").chunk(0), "")
    names = table.column("evaluation_name").chunk(0)
    batches = []
    for result_id in pc.unique(result_ids).to_pylist():
        rows = pc.equal(result_ids, result_id)
        pair = facts.results.get(result_id) or facts.results.get("")
        if pair is None:
            return None
        gen, grade = pair
        epoch = epochs
        if gen.tool == "inspect_ai":
            epoch = pc.max_element_wise(pc.subtract(epochs, 1), 0)
        dataset = facts.dataset or (names.filter(rows)[0].as_py() if len(names) else None)
        columns = [
            sample_id,
            epoch,
            raw,
            reference,
            pc.fill_null(answer, ""),
            score,
            correct,
            finish,
            count("input_tokens"),
            count("output_tokens"),
            count("reasoning_tokens"),
            count("input_tokens_cache_read"),
            pc.fill_null(pc.struct_field(performance, "latency_ms"), 0.0),
            record,
            pc.struct_field(item, "choices"),
        ]
        batch = pa.Table.from_arrays(columns, schema=BATCH_SCHEMA).filter(rows)
        batches.append(
            SampleBatch(gen, grade, slugify(str(dataset or "imported")), file_sha256, batch)
        )
    return batches
