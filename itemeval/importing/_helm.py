"""HELM run folders as samples to import (`run_spec.json`, `scenario_state.json`,
`per_instance_stats.json`): one sample per request state and per core metric (`exact_match`,
`quasi_exact_match`, `prefix_exact_match`, `quasi_prefix_exact_match`, unperturbed) that the
instance's stats hold. The fields are those the Every Eval Ever converter takes
(docs/importing.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
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

    def _load(self, name: str) -> Any:
        with open(os.path.join(self.folder, name), encoding="utf-8") as handle:
            return json.load(handle)

    def source_files(self) -> list[SourceFile]:
        if self._files is None:
            names = (*HELM_FILES, *HELM_OPTIONAL)
            paths = [os.path.join(self.folder, n) for n in names]
            paths = [p for p in paths if os.path.isfile(p)]
            self._files = [SourceFile(p, "helm", None, sha256_file(p)) for p in paths]
        return self._files

    def samples(self) -> Iterator[Sample | Rejection]:
        spec = self._load("run_spec.json")
        adapter = spec.get("adapter_spec") or {}
        model = str(adapter.get("model") or "unknown")
        gen = GenerateFacts(
            tool="helm",
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
        )
        name = str(spec.get("name") or os.path.basename(self.folder))
        dataset = slugify(name.split(":", 1)[0] + "-" + _scenario_args(spec))
        states = self._load("scenario_state.json").get("request_states") or []
        stats = {
            (s.get("instance_id"), s.get("train_trial_index", 0)): s
            for s in self._load("per_instance_stats.json")
        }
        grades: dict[str, GradeFacts] = {}
        path = os.path.join(self.folder, "scenario_state.json")
        for index, state in enumerate(states):
            instance = state.get("instance") or {}
            where = f"request_states[{index}]"
            if instance.get("id") is None:
                yield Rejection("bad_sample_id", path, None, where)
                continue
            request = state.get("request") or {}
            prompt = str(request.get("prompt") or "")
            if not prompt.strip():
                yield Rejection("missing_input", path, None, where)
                continue
            references = [
                str((r.get("output") or {}).get("text", ""))
                for r in instance.get("references") or []
                if "correct" in (r.get("tags") or [])
            ]
            if not references:
                yield Rejection("missing_reference", path, None, where)
                continue
            mapping = state.get("output_mapping") or {}
            reference = references[0]
            letter = next((k for k, v in mapping.items() if v == reference), None)
            result = state.get("result") or {}
            completions = result.get("completions") or []
            answer = str(completions[0].get("text", "")) if completions else ""
            trial = int(state.get("train_trial_index") or 0)
            stat = stats.get((instance["id"], trial))
            if stat is None:
                yield Rejection("missing_score", path, None, f"{where}: no per-instance stats")
                continue
            split = instance.get("split") or "test"
            values = {
                s["name"]["name"]: s.get("mean")
                for s in stat.get("stats") or []
                if s.get("name", {}).get("name") in HELM_CORE
                and "perturbation" not in s.get("name", {})
                and s.get("name", {}).get("split", split) == split
            }
            choices = [mapping[k] for k in sorted(mapping)] if mapping else None
            tokens = {
                s["name"]["name"]: int(s.get("sum") or 0)
                for s in stat.get("stats") or []
                if s.get("name", {}).get("name") in ("num_prompt_tokens", "num_completion_tokens")
                and "perturbation" not in s.get("name", {})
            }
            for metric in HELM_CORE:
                value = values.get(metric)
                if value is None:
                    continue
                grade = grades.get(metric) or grades.setdefault(metric, GradeFacts("helm", metric))
                yield Sample(
                    gen=gen,
                    grade=grade,
                    dataset=dataset,
                    item_id=str(instance["id"]),
                    epoch=trial,
                    input=prompt,
                    reference=letter if letter and choices else reference,
                    answer=answer.strip(),
                    score=float(value),
                    correct=float(value) > 0,
                    record_id=f"scenario_state.json:{where}",
                    choices=choices,
                    input_tokens=tokens.get("num_prompt_tokens", 0),
                    output_tokens=tokens.get("num_completion_tokens", 0),
                    latency_ms=float(result.get("request_time") or 0.0) * 1000.0,
                    item_extras={"helm_split": split},
                )

    def aggregate_only(self) -> list[dict[str, Any]]:
        return []


def _scenario_args(spec: dict[str, Any]) -> str:
    args = (spec.get("scenario_spec") or {}).get("args") or {}
    return "-".join(str(v) for _, v in sorted(args.items())) or "all"


def helm_folders(paths: list[str]) -> list[str]:
    folders = {os.path.dirname(p) for p in paths if os.path.basename(p) == "run_spec.json"}
    return sorted(f for f in folders if all(os.path.isfile(os.path.join(f, n)) for n in HELM_FILES))
