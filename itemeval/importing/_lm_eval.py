"""lm-eval results as samples to import: a `results_<date>.json` and, per task,
`samples_<task>_<date>.jsonl` beside it; one sample per line and per metric the line holds
(`doc_id` the sample id, `target` the reference, the first filtered response the answer;
multiple-choice lines answer with the choice of highest log-likelihood). The fields are those the
Every Eval Ever converter takes (docs/importing.md)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from itemeval.ids import slugify
from itemeval.importing._eee import sha256_file
from itemeval.importing._model import (
    GenerateFacts,
    GradeFacts,
    Rejection,
    Sample,
    SourceFile,
    stated_params,
)


@dataclass
class LmEvalRun:
    """An lm-eval results file and the samples files of its tasks."""

    results: str
    study: str | None = None
    _files: list[SourceFile] | None = None
    _data: dict[str, Any] | None = None

    def data(self) -> dict[str, Any]:
        if self._data is None:
            with open(self.results, encoding="utf-8") as handle:
                self._data = json.load(handle)
        return self._data

    def samples_files(self) -> dict[str, str]:
        folder = os.path.dirname(self.results)
        stamp = os.path.basename(self.results)[len("results_") : -len(".json")]
        out = {}
        for task in self.data().get("results", {}):
            path = os.path.join(folder, f"samples_{task}_{stamp}.jsonl")
            if os.path.isfile(path):
                out[task] = path
        return out

    def source_files(self) -> list[SourceFile]:
        if self._files is None:
            version = str(self.data().get("lm_eval_version") or "") or None
            paths = [self.results, *self.samples_files().values()]
            self._files = [SourceFile(p, "lm_eval", version, sha256_file(p)) for p in paths]
        return self._files

    def _facts(self, task: str) -> GenerateFacts:
        data = self.data()
        config = data.get("config") or {}
        args = str(config.get("model_args") or "")
        found = re.search(r"pretrained=([^,]+)", args)
        model = found.group(1) if found else str(data.get("model_name") or "unknown")
        task_config = (data.get("configs") or {}).get(task) or {}
        kwargs = task_config.get("generation_kwargs") or {}
        params = {
            "temperature": kwargs.get("temperature"),
            "top_p": kwargs.get("top_p"),
            "top_k": kwargs.get("top_k"),
            "max_tokens": kwargs.get("max_gen_toks"),
            "stop": kwargs.get("until"),
        }
        shots = (data.get("n-shot") or {}).get(task)
        prompt = task_config.get("doc_to_text")
        return GenerateFacts(
            tool="lm_eval",
            model_id=model,
            model_name=model,
            params=stated_params(params | {"num_fewshot": shots}),
            prompt_name=f"lm_eval:{task}",
            prompt_text=prompt if isinstance(prompt, str) else None,
        )

    def samples(self) -> Iterator[Sample | Rejection]:
        for task, path in self.samples_files().items():
            gen = self._facts(task)
            grades: dict[str, GradeFacts] = {}
            with open(path, "rb") as handle:
                for number, line in enumerate(handle, start=1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except ValueError as exc:
                        yield Rejection("invalid_json", path, number, str(exc)[:120])
                        continue
                    yield from _lm_eval_samples(row, task, gen, grades, path, number)

    def aggregate_only(self) -> list[dict[str, Any]]:
        with_samples = set(self.samples_files())
        out = []
        for task, metrics in (self.data().get("results") or {}).items():
            if task in with_samples:
                continue
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and "_stderr" not in key:
                    out.append(
                        {
                            "file": self.results,
                            "evaluation_name": task,
                            "metric": key,
                            "score": value,
                        }
                    )
        return out


def _lm_eval_samples(
    row: dict[str, Any],
    task: str,
    gen: GenerateFacts,
    grades: dict[str, GradeFacts],
    path: str,
    number: int,
) -> Iterator[Sample | Rejection]:
    if "doc_id" not in row:
        yield Rejection("schema_violation", path, number, "no doc_id")
        return
    if row.get("target") is None:
        yield Rejection("missing_reference", path, number)
        return
    arguments = row.get("arguments") or {}
    requests = [arguments[k] for k in sorted(arguments)] if isinstance(arguments, dict) else []
    prompt = str(requests[0].get("arg_0", "")) if requests else ""
    if not prompt.strip():
        yield Rejection("missing_input", path, number)
        return
    choices = None
    responses = row.get("filtered_resps") or row.get("resps") or []
    continuations = [r.get("arg_1") for r in requests]
    if len(requests) > 1 and all(isinstance(c, str) for c in continuations):
        choices = [str(c).strip() for c in continuations]
        scores = [_loglikelihood(r) for r in responses]
        best = max(range(len(scores)), key=lambda i: scores[i]) if scores else 0
        answer = choices[best] if choices else ""
    else:
        first = responses[0] if responses else ""
        answer = str(first[0] if isinstance(first, list) and first else first)
    target = row["target"]
    if isinstance(target, int) and choices and 0 <= target < len(choices):
        reference = choices[target]
    else:
        reference = str(target)
    metrics = row.get("metrics") or [k for k in row if isinstance(row[k], (int, float))]
    filt = str(row.get("filter") or "none")
    produced = False
    for metric in metrics:
        value = row.get(metric)
        if isinstance(value, bool):
            value = float(value)
        if not isinstance(value, (int, float)):
            continue
        name = metric if filt == "none" else f"{metric},{filt}"
        grade = grades.get(name) or grades.setdefault(name, GradeFacts("lm_eval", name))
        produced = True
        yield Sample(
            gen=gen,
            grade=grade,
            dataset=slugify(task),
            item_id=str(row["doc_id"]),
            epoch=0,
            input=prompt,
            reference=reference,
            answer=answer,
            score=float(value),
            correct=float(value) >= 1.0,
            record_id=f"{os.path.basename(path)}:{number}",
            choices=choices,
            item_extras={"lm_eval_doc_hash": row.get("doc_hash")} if row.get("doc_hash") else {},
        )
    if not produced:
        yield Rejection("missing_score", path, number, "no numeric metric on the line")


def _loglikelihood(response: Any) -> float:
    value = response
    while isinstance(value, list) and value:
        value = value[0]
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("-inf")


def is_lm_eval_results(path: str) -> bool:
    return os.path.basename(path).startswith("results_") and path.endswith(".json")
