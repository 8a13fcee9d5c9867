"""Every Eval Ever aggregate records: one per evaluation (see `eee.records` for what an
evaluation is and `docs/results.md` for the field-by-field mapping)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from itemeval import __version__
from itemeval.export._eee.records import SCHEMAS, DatasetSourceInfo, Evaluation, strings
from itemeval.ids import canonical_json
from itemeval.statistics import Proportion


@dataclass(frozen=True, slots=True)
class EvaluationTotals:
    """What the samples of one evaluation add up to."""

    accuracy: Proportion
    samples: int
    sample_ids: list[str]
    excluded: dict[str, int]  # reason -> grades left out
    evaluated_at: str | None  # latest grade time, unix seconds as a string
    checksum: str
    samples_file_name: str
    cluster_by: str | None = None  # analysis.cluster_by: resampled clusters, not items
    items: int | None = None  # graded items (None: as many as the interval's clusters)


def build_aggregate(evaluation: Evaluation, totals: EvaluationTotals) -> dict[str, Any]:
    """The aggregate record of one evaluation (the version's schema decides the shape)."""
    context = evaluation.context
    v3 = context.version == "0.3.0"
    accuracy = totals.accuracy
    unit = (
        f"clusters of items sharing {totals.cluster_by!r} (analysis.cluster_by)"
        if totals.cluster_by
        else "items (epochs of an item kept together)"
    )
    interval = (
        f"percentile bootstrap over {unit}, {accuracy.resamples} resamples, seed {accuracy.seed}"
    )
    # The standard deviation of the per-answer scores (0 or 1): sqrt(p (1 - p)), n - 1 divisor.
    n = accuracy.trials
    sd = math.sqrt(accuracy.value * (1 - accuracy.value) * n / (n - 1)) if n > 1 else 0.0
    details = strings(
        {
            "ci_lower": accuracy.low,
            "ci_upper": accuracy.high,
            "confidence_level": accuracy.confidence,
            "ci_method": interval,
            "bootstrap_standard_error": accuracy.se,
            "correct": int(accuracy.successes),
            "graded_answers": int(accuracy.trials),
            "items": totals.items if totals.items is not None else accuracy.clusters,
            "clusters": accuracy.clusters if totals.cluster_by else None,
            "cluster_by": totals.cluster_by,
            "epochs": context.epochs,
            "grader_kind": evaluation.grade.kind,
            "grader": evaluation.grade.grader,
            "grader_model": evaluation.grade.grader_model,
            "rubric": evaluation.grade.rubric,
            "grade_condition_id": evaluation.grade.id,
            "gen_condition_id": evaluation.generate.id,
            **{f"excluded_{reason}": count for reason, count in totals.excluded.items()},
        }
    )
    score_details: dict[str, Any] = {"score": accuracy.value, "details": details}
    if v3:
        score_details["uncertainty"] = {
            "standard_error": {"value": accuracy.se, "method": "bootstrap"},
            "confidence_interval": {
                "lower": accuracy.low,
                "upper": accuracy.high,
                "confidence_level": accuracy.confidence,
                "method": interval,
            },
            "standard_deviation": sd,
            "num_samples": int(accuracy.trials),
            "num_bootstrap_samples": accuracy.resamples,
        }
    result: dict[str, Any] = {}
    if v3:
        result["evaluation_result_id"] = evaluation.result_id
    result["evaluation_name"] = evaluation.evaluation_name
    if v3:
        result["source_data"] = _source_data_v3(evaluation.dataset, totals.sample_ids)
    if totals.evaluated_at:
        result["evaluation_timestamp"] = totals.evaluated_at
    result["metric_config"] = _metric_config(evaluation, v3)
    result["score_details"] = score_details
    result["generation_config"] = _generation_config(evaluation, v3)
    if not v3:
        result["detailed_evaluation_results_url"] = totals.samples_file_name

    record: dict[str, Any] = {
        "schema_version": SCHEMAS[("aggregate", context.version)][1],
        "evaluation_id": evaluation.evaluation_id,
    }
    if v3 and totals.evaluated_at:
        record["evaluation_timestamp"] = totals.evaluated_at
    record["retrieved_timestamp"] = context.retrieved
    if not v3:
        record["source_data"] = _source_data_v1(evaluation.dataset, totals.sample_ids)
    source_metadata: dict[str, Any] = {
        "source_name": f"itemeval study {context.study}",
        "source_type": "evaluation_run",
        "source_organization_name": context.organization,
        "evaluator_relationship": context.relationship,
    }
    if v3:
        source_metadata["additional_details"] = {"study": context.study, "tool": "itemeval"}
    record["source_metadata"] = source_metadata
    if v3:
        record["eval_library"] = {"name": "itemeval", "version": __version__}
    record["model_info"] = _model_info(
        evaluation.generate.model, evaluation.generate.model_name, evaluation.endpoint_kind, v3
    )
    record["evaluation_results"] = [result]
    if v3:
        record["detailed_evaluation_results"] = {
            "format": "jsonl",
            "file_path": evaluation.samples_path,
            "hash_algorithm": "sha256",
            "checksum": totals.checksum,
            "total_rows": totals.samples,
        }
    else:
        record["detailed_evaluation_results_per_samples"] = totals.samples_file_name
    return record


def _model_info(model_id: str, name: str, endpoint_kind: str | None, v3: bool) -> dict[str, Any]:
    info: dict[str, Any] = {"name": name, "id": model_id}
    if "/" in model_id:
        info["developer"] = model_id.split("/", 1)[0]
    if endpoint_kind:
        info["inference_platform"] = endpoint_kind
    details = {"itemeval_model_name": name}
    if v3:
        # Never inferred (as the Every Eval Ever converters do): a study does not say.
        details = {"deployment_type": "unknown", "model_availability": "unknown", **details}
    info["additional_details"] = details
    return info


def _metric_config(evaluation: Evaluation, v3: bool) -> dict[str, Any]:
    grade = evaluation.grade
    description = f"share of correct answers on {evaluation.dataset.name}, graded by {grade.label}"
    if grade.kind == "judge":
        description += f" (correct: judge score >= {grade.pass_score:g} of {grade.max_score:g})"
    config: dict[str, Any] = {"evaluation_description": description}
    if v3:
        config |= {
            "metric_id": "accuracy",
            "metric_name": "Accuracy",
            "metric_kind": "accuracy",
            "metric_unit": "proportion",
        }
    config |= {
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": 0.0,
        "max_score": 1.0,
    }
    if v3 and grade.kind == "judge":
        config["llm_scoring"] = {
            "judges": [
                {
                    "model_info": _model_info(str(grade.grader_model), grade.grader, None, v3=True),
                    "temperature": 0.0,
                }
            ],
            "input_prompt": evaluation.rubric_text or "",
            "additional_details": strings(
                {
                    "rubric": grade.rubric,
                    "pass_score": grade.pass_score,
                    "max_score": grade.max_score,
                }
            ),
        }
    return config


def _generation_config(evaluation: Evaluation, v3: bool) -> dict[str, Any]:
    params = evaluation.generate.params_dict
    args: dict[str, Any] = {}
    for key in ("temperature", "top_p"):
        if params.get(key) is not None:
            args[key] = params[key]
    if params.get("max_tokens"):
        args["max_tokens"] = int(params["max_tokens"])  # type: ignore[call-overload]
    args["reasoning"] = bool(params.get("reasoning_effort") or params.get("thinking_budget"))
    args["prompt_template"] = evaluation.prompt_text
    details = strings(
        {
            "prompt": evaluation.generate.prompt,
            "model_config": evaluation.generate.model_config,
            "gen_condition_id": evaluation.generate.id,
            "epochs": evaluation.context.epochs,
            **{k: v for k, v in params.items() if k not in ("temperature", "top_p", "max_tokens")},
        }
    )
    # 0.1.0 declares additional_details as a string; 0.3.0 as a map of strings.
    return {
        "generation_args": args,
        "additional_details": details if v3 else canonical_json(details),
    }


def _source_details(dataset: DatasetSourceInfo) -> dict[str, str]:
    return strings(
        {
            "path": dataset.path,
            "format": dataset.format,
            "fingerprint": dataset.fingerprint,
            "revision": dataset.revision,
        }
    )


def _source_data_v1(dataset: DatasetSourceInfo, sample_ids: list[str]) -> dict[str, Any]:
    data: dict[str, Any] = {"dataset_name": dataset.name}
    if dataset.format == "hf":
        data["hf_repo"] = dataset.path
        if dataset.split:
            data["hf_split"] = dataset.split
    data["samples_number"] = dataset.items
    if sample_ids:
        data["sample_ids"] = sample_ids
    data["additional_details"] = _source_details(dataset)
    return data


def _source_data_v3(dataset: DatasetSourceInfo, sample_ids: list[str]) -> dict[str, Any]:
    details = _source_details(dataset)
    if dataset.format == "hf":
        data: dict[str, Any] = {
            "dataset_name": dataset.name,
            "source_type": "hf_dataset",
            "hf_repo": dataset.path,
        }
        if dataset.split:
            data["hf_split"] = dataset.split
        data["samples_number"] = dataset.items
        if sample_ids:
            data["sample_ids"] = sample_ids
        data["additional_details"] = details
        return data
    if dataset.path.startswith(("http://", "https://")):
        return {
            "dataset_name": dataset.name,
            "source_type": "url",
            "url": [dataset.path],
            "additional_details": details | {"samples_number": str(dataset.items)},
        }
    return {
        "dataset_name": dataset.name,
        "source_type": "other",
        "additional_details": details | {"samples_number": str(dataset.items)},
    }
