"""lm-eval results as samples to import: a `results_<date>.json` and, per task,
`samples_<task>_<date>.jsonl` beside it; one sample per line and per metric the line holds
(`doc_id` the sample id, `target` the reference, the first filtered response the answer). A
multiple-choice line is a `choiceofN` item: its continuations are the choices, the target's
letter the reference, the letter of the choice of highest log-likelihood the answer. Each task
is a dataset of its own (`lm_eval.<task>`). The fields are those the Every Eval Ever converter
takes (docs/importing.md).

A samples file is read only with its results file (which names the model and the task's
settings): beside a results file that is missing or damaged it is rejected (`no_aggregate`)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from itemeval.importing._eee import sha256_file
from itemeval.importing._model import (
    GenerateFacts,
    GradeFacts,
    Rejection,
    Sample,
    SourceFile,
    benchmark_dataset,
    qualified_id,
    stated_params,
)

TOOL = "lm_eval"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: `samples_<task>_<date>.jsonl`, the date as lm-eval writes it (also in `results_<date>.json`)
SAMPLES_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<stamp>\d{4}-\d{2}-\d{2}T[\d.-]+)\.jsonl$")


@dataclass
class LmEvalRun:
    """An lm-eval results file and the samples files of its tasks."""

    results: str
    study: str | None = None
    _files: list[SourceFile] | None = None
    _data: dict[str, Any] | None = None

    def data(self) -> dict[str, Any]:
        """The results file (OSError or ValueError when it cannot be read as one)."""
        if self._data is None:
            with open(self.results, encoding="utf-8") as handle:
                data = json.load(handle)
            if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
                raise ValueError("no `results` object")
            self._data = data
        return self._data

    @property
    def stamp(self) -> str:
        return os.path.basename(self.results)[len("results_") : -len(".json")]

    def samples_files(self) -> dict[str, str]:
        folder = os.path.dirname(self.results)
        out = {}
        for task in self.data().get("results", {}):
            path = os.path.join(folder, f"samples_{task}_{self.stamp}.jsonl")
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
        model = _model(data)
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
            task=task,
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
                    if not isinstance(row, dict):
                        yield Rejection("schema_violation", path, number, "not an object")
                        continue
                    try:
                        found = list(_lm_eval_samples(row, task, gen, grades, path, number))
                    except (KeyError, TypeError, AttributeError, ValueError) as exc:
                        detail = f"{type(exc).__name__}: {exc}"[:160]
                        yield Rejection("schema_violation", path, number, detail)
                        continue
                    yield from found

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
    responses = row.get("filtered_resps") or row.get("resps") or []
    continuations = [r.get("arg_1") for r in requests]
    choices = None
    if len(requests) > 1 and all(isinstance(c, str) for c in continuations):
        choices = [str(c).strip() for c in continuations]
        scores = [_loglikelihood(r) for r in responses]
        best = max(range(len(scores)), key=lambda i: scores[i]) if scores else None
        target = _choice_index(row["target"], choices)
        if target is None:
            yield Rejection("missing_reference", path, number, f"target {row['target']!r}")
            return
        lettered = len(choices) <= len(LETTERS)
        reference = LETTERS[target] if lettered else choices[target]
        answer = "" if best is None else (LETTERS[best] if lettered else choices[best])
    else:
        first = responses[0] if responses else ""
        answer = str(first[0] if isinstance(first, list) and first else first)
        reference = str(row["target"])
    dataset = benchmark_dataset(TOOL, task)
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
            dataset=dataset,
            item_id=qualified_id(dataset, str(row["doc_id"])),
            epoch=0,
            input=prompt,
            reference=reference,
            answer=answer,
            score=float(value),
            correct=float(value) >= 1.0,
            record_id=f"{os.path.basename(path)}:{number}",
            choices=choices,
            item_extras={"sourceId": str(row["doc_id"])}
            | ({"lm_eval_doc_hash": row["doc_hash"]} if row.get("doc_hash") else {}),
        )
    if not produced:
        yield Rejection("missing_score", path, number, "no numeric metric on the line")


def _model(data: dict[str, Any]) -> str:
    """The model a results file names: `pretrained=` (or `model=`, `engine=`) of its model
    arguments (a string or, from 0.4.10, a mapping), else the model type (`dummy`, `hf`);
    `model_name` is not read: without `pretrained` lm-eval fills it with a random name."""
    config = data.get("config") or {}
    args = config.get("model_args")
    if isinstance(args, dict):
        for key in ("pretrained", "model", "engine"):
            if args.get(key):
                return str(args[key])
    elif isinstance(args, str):
        found = re.search(r"(?:^|,)\s*(?:pretrained|model|engine)=([^,]+)", args)
        if found:
            return found.group(1).strip()
    return str(config.get("model") or "unknown")


def _choice_index(target: Any, choices: list[str]) -> int | None:
    """The index of the right choice: lm-eval writes it as a number or its digits, or (for
    tasks whose target is the text) the choice itself."""
    if isinstance(target, bool):
        return None
    if isinstance(target, int) or (isinstance(target, str) and target.strip().isdigit()):
        index = int(target)
        return index if 0 <= index < len(choices) else None
    if isinstance(target, list) and len(target) == 1:
        return _choice_index(target[0], choices)
    text = str(target).strip()
    return choices.index(text) if text in choices else None


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


def samples_stamp(path: str) -> str | None:
    """The date of an lm-eval samples file (`samples_<task>_<date>.jsonl`), else None."""
    found = SAMPLES_NAME.match(os.path.basename(path))
    return found.group("stamp") if found else None
