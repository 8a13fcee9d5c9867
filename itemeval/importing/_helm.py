"""HELM run folders as samples to import (`run_spec.json`, `scenario_state.json`,
`per_instance_stats.json`): one sample per request state and per core metric (`exact_match`,
`quasi_exact_match`, `prefix_exact_match`, `quasi_prefix_exact_match`, unperturbed) that the
instance's stats hold. The fields are those the Every Eval Ever converter takes
(docs/importing.md).

Splits stay splits: each split of a scenario is a dataset of its own (`helm.<scenario>.<split>`),
so a split's imported score is HELM's own (`stats.json`, per split). Trials are epochs: a
request state's `train_trial_index` is its epoch, and its item is the instance itself (its
input, its references), not the prompt, whose in-context examples change with the trial.
Perturbed instances are left out."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from itemeval.errors import DamagedLog
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

TOOL = "helm"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
HELM_CORE = ("exact_match", "quasi_exact_match", "prefix_exact_match", "quasi_prefix_exact_match")
HELM_FILES = ("run_spec.json", "scenario_state.json", "per_instance_stats.json")
HELM_OPTIONAL = ("scenario.json", "stats.json")  # read for provenance only


@dataclass
class HelmRun:
    """A HELM run folder."""

    folder: str
    study: str | None = None
    _files: list[SourceFile] | None = None
    _spec: dict[str, Any] = field(default_factory=dict)

    def _load(self, name: str, kind: type) -> Any:
        path = os.path.join(self.folder, name)
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except json.JSONDecodeError as exc:
            raise DamagedLog(Rejection("invalid_json", path, None, str(exc)[:160])) from None
        except (OSError, ValueError) as exc:
            detail = f"{type(exc).__name__}: {exc}"[:160]
            raise DamagedLog(Rejection("unreadable", path, None, detail)) from None
        if not isinstance(data, kind):
            detail = f"not a JSON {'object' if kind is dict else 'list'}"
            raise DamagedLog(Rejection("schema_violation", path, None, detail))
        return data

    def source_files(self) -> list[SourceFile]:
        if self._files is None:
            names = (*HELM_FILES, *HELM_OPTIONAL)
            paths = [os.path.join(self.folder, n) for n in names]
            paths = [p for p in paths if os.path.isfile(p)]
            self._files = [SourceFile(p, TOOL, None, sha256_file(p)) for p in paths]
        return self._files

    def samples(self) -> Iterator[Sample | Rejection]:
        try:
            spec = self._load("run_spec.json", dict)
            states = self._load("scenario_state.json", dict).get("request_states") or []
            per_instance = self._load("per_instance_stats.json", list)
        except DamagedLog as damaged:
            yield damaged.rejection
            return
        adapter = spec.get("adapter_spec") or {}
        model = str(adapter.get("model") or "unknown")
        name = str(spec.get("name") or os.path.basename(self.folder))
        args = _scenario_args(spec)
        task = name.split(":", 1)[0] + (f"-{args}" if args else "")
        gen = GenerateFacts(
            tool=TOOL,
            model_id=model,
            model_name=model,
            params=stated_params(
                {
                    "temperature": adapter.get("temperature"),
                    "max_tokens": adapter.get("max_tokens") or None,
                    "stop": adapter.get("stop_sequences") or None,
                }
            ),
            prompt_name=f"helm:{adapter.get('method') or 'prompt'}",
            prompt_text=str(adapter.get("instructions") or "") or None,
            task=task,
        )
        stats = {
            (s.get("instance_id"), s.get("train_trial_index", 0)): s
            for s in per_instance
            if isinstance(s, dict)
        }
        grades: dict[str, GradeFacts] = {}
        path = os.path.join(self.folder, "scenario_state.json")
        for index, state in enumerate(states):
            where = f"request_states[{index}]"
            try:
                found = list(_state_samples(state, gen, task, stats, grades, path, where))
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                detail = f"{where}: {type(exc).__name__}: {exc}"[:160]
                found = [Rejection("schema_violation", path, None, detail)]
            yield from found

    def aggregate_only(self) -> list[dict[str, Any]]:
        return []


def _state_samples(
    state: dict[str, Any],
    gen: GenerateFacts,
    task: str,
    stats: dict[tuple[Any, Any], dict[str, Any]],
    grades: dict[str, GradeFacts],
    path: str,
    where: str,
) -> Iterator[Sample | Rejection]:
    instance = state.get("instance") or {}
    if instance.get("perturbation"):  # a perturbed copy of an instance: left out
        return
    if instance.get("id") is None:
        yield Rejection("bad_sample_id", path, None, where)
        return
    text = str((instance.get("input") or {}).get("text") or "")
    if not text.strip():
        yield Rejection("missing_input", path, None, where)
        return
    stated = instance.get("references") or []
    references = [str((r.get("output") or {}).get("text", "")) for r in stated]
    correct = [i for i, r in enumerate(stated) if "correct" in (r.get("tags") or [])]
    if not correct:
        yield Rejection("missing_reference", path, None, where)
        return
    mapping = state.get("output_mapping") or {}
    choices = references if mapping and 2 <= len(references) <= len(LETTERS) else None
    reference = LETTERS[correct[0]] if choices else references[correct[0]]
    result = state.get("result") or {}
    completions = result.get("completions") or []
    answer = str(completions[0].get("text", "")) if completions else ""
    trial = int(state.get("train_trial_index") or 0)
    stat = stats.get((instance["id"], trial))
    if stat is None:
        yield Rejection("missing_score", path, None, f"{where}: no per-instance stats")
        return
    split = str(instance.get("split") or "test")
    named = [s for s in stat.get("stats") or [] if "perturbation" not in (s.get("name") or {})]
    values = {
        s["name"]["name"]: s.get("mean")
        for s in named
        if s["name"].get("name") in HELM_CORE and s["name"].get("split", split) == split
    }
    tokens = {
        s["name"]["name"]: int(s.get("sum") or 0)
        for s in named
        if s["name"].get("name") in ("num_prompt_tokens", "num_completion_tokens")
    }
    dataset = benchmark_dataset(TOOL, task, split)
    for metric in HELM_CORE:
        value = values.get(metric)
        if value is None:
            continue
        grade = grades.get(metric) or grades.setdefault(metric, GradeFacts(TOOL, metric))
        yield Sample(
            gen=gen,
            grade=grade,
            dataset=dataset,
            item_id=qualified_id(dataset, str(instance["id"])),
            epoch=trial,
            input=text,
            reference=reference,
            answer=answer.strip(),
            score=float(value),
            correct=float(value) > 0,
            record_id=f"scenario_state.json:{where}",
            choices=choices,
            input_tokens=tokens.get("num_prompt_tokens", 0),
            output_tokens=tokens.get("num_completion_tokens", 0),
            latency_ms=float(result.get("request_time") or 0.0) * 1000.0,
            item_extras={"sourceId": str(instance["id"]), "helm_split": split},
        )


def _scenario_args(spec: dict[str, Any]) -> str:
    args = (spec.get("scenario_spec") or {}).get("args") or {}
    return "-".join(str(v) for _, v in sorted(args.items()))


def helm_folders(paths: list[str]) -> list[str]:
    folders = {os.path.dirname(p) for p in paths if os.path.basename(p) == "run_spec.json"}
    return sorted(f for f in folders if all(os.path.isfile(os.path.join(f, n)) for n in HELM_FILES))
