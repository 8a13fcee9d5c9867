"""inspect_ai logs as samples to import: a `.json` log or a `.eval` archive (a zip of
`header.json` and `samples/*.json`); one sample per sample, epoch and scorer (`C`/`I`, booleans
and numbers are scores). The fields are those the Every Eval Ever converter takes
(docs/importing.md)."""

from __future__ import annotations

import json
import os
import zipfile
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
class InspectLog:
    """An inspect_ai log: a `.json` file or an `.eval` archive."""

    path: str
    study: str | None = None
    _files: list[SourceFile] | None = None

    def _header(self) -> dict[str, Any]:
        if self.path.endswith(".eval"):
            with zipfile.ZipFile(self.path) as archive:
                return dict(json.loads(archive.read("header.json")))
        with open(self.path, encoding="utf-8") as handle:
            return dict(json.load(handle))

    def _samples(self) -> Iterator[tuple[str, dict[str, Any]]]:
        if self.path.endswith(".eval"):
            with zipfile.ZipFile(self.path) as archive:
                for name in sorted(archive.namelist()):
                    if name.startswith("samples/") and name.endswith(".json"):
                        yield name, json.loads(archive.read(name))
            return
        with open(self.path, encoding="utf-8") as handle:
            data = json.load(handle)
        for index, sample in enumerate(data.get("samples") or []):
            yield f"samples[{index}]", sample

    def source_files(self) -> list[SourceFile]:
        if self._files is None:
            header = self._header()
            packages = (header.get("eval") or {}).get("packages") or {}
            version = packages.get("inspect_ai")
            self._files = [SourceFile(self.path, "inspect_ai", version, sha256_file(self.path))]
        return self._files

    def samples(self) -> Iterator[Sample | Rejection]:
        header = self._header()
        spec = header.get("eval") or {}
        model = str(spec.get("model") or "unknown")
        config = spec.get("model_generate_config") or {}
        gen = GenerateFacts(
            tool="inspect_ai",
            model_id=model,
            model_name=model,
            params=stated_params(
                {
                    "temperature": config.get("temperature"),
                    "top_p": config.get("top_p"),
                    "top_k": config.get("top_k"),
                    "max_tokens": config.get("max_tokens"),
                    "seed": config.get("seed"),
                    "reasoning_effort": config.get("reasoning_effort"),
                }
            ),
            prompt_name=f"inspect_ai:{spec.get('task') or 'task'}",
            prompt_text=None,
        )
        dataset = slugify(str(spec.get("task_display_name") or spec.get("task") or "inspect"))
        grades: dict[str, GradeFacts] = {}
        for where, sample in self._samples():
            yield from _inspect_samples(sample, gen, dataset, grades, self.path, where)

    def aggregate_only(self) -> list[dict[str, Any]]:
        header = self._header()
        if any(True for _ in self._samples()):
            return []
        out = []
        for score in (header.get("results") or {}).get("scores") or []:
            for name, metric in (score.get("metrics") or {}).items():
                out.append(
                    {
                        "file": self.path,
                        "evaluation_name": score.get("name"),
                        "metric": name,
                        "score": metric.get("value"),
                    }
                )
        return out


def _inspect_samples(
    sample: dict[str, Any],
    gen: GenerateFacts,
    dataset: str,
    grades: dict[str, GradeFacts],
    path: str,
    where: str,
) -> Iterator[Sample | Rejection]:
    record = f"{os.path.basename(path)}:{where}"
    if sample.get("id") is None:
        yield Rejection("bad_sample_id", path, None, where)
        return
    text = _inspect_input(sample.get("input"))
    if not text.strip():
        yield Rejection("missing_input", path, None, where)
        return
    target = sample.get("target")
    if isinstance(target, list):
        target = target[0] if len(target) == 1 else " | ".join(map(str, target))
    if target is None:
        yield Rejection("missing_reference", path, None, where)
        return
    output = sample.get("output") or {}
    choices = output.get("choices") or []
    message = (choices[0].get("message") if choices else None) or {}
    answer = _content(message.get("content"))
    stop = choices[0].get("stop_reason") if choices else None
    usage = output.get("usage") or {}
    scores = sample.get("scores") or {}
    if not scores:
        yield Rejection("missing_score", path, None, where)
        return
    for scorer, score in scores.items():
        value = _inspect_value(score.get("value") if isinstance(score, dict) else score)
        if value is None:
            yield Rejection("missing_score", path, None, f"{where} scorer {scorer}")
            continue
        grade = grades.get(scorer) or grades.setdefault(scorer, GradeFacts("inspect_ai", scorer))
        sample_choices = sample.get("choices")
        yield Sample(
            gen=gen,
            grade=grade,
            dataset=dataset,
            item_id=str(sample["id"]),
            epoch=max(int(sample.get("epoch") or 1) - 1, 0),
            input=text,
            reference=str(target),
            answer=answer,
            score=value,
            correct=value >= 1.0,
            record_id=record,
            choices=[str(c) for c in sample_choices] if sample_choices else None,
            finish_reason=stop,
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            reasoning_tokens=int(usage.get("reasoning_tokens") or 0),
            cached_input_tokens=int(usage.get("input_tokens_cache_read") or 0),
            latency_ms=float(sample.get("total_time") or 0.0) * 1000.0,
            extracted=None if not isinstance(score, dict) else _str(score.get("answer")),
            reasoning=None if not isinstance(score, dict) else _str(score.get("explanation")),
        )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _inspect_input(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n\n".join(
            _content(m.get("content"))
            for m in value
            if isinstance(m, dict) and m.get("role") == "user"
        )
    return ""


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            str(part.get("text", ""))
            for part in value
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _inspect_value(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip().upper()
        if text in ("C", "CORRECT", "TRUE", "YES"):
            return 1.0
        if text in ("I", "INCORRECT", "FALSE", "NO"):
            return 0.0
        if text == "P":
            return 0.5
        try:
            return float(text)
        except ValueError:
            return None
    return None


def is_inspect_json(path: str) -> bool:
    if not path.endswith(".json"):
        return False
    with open(path, "rb") as handle:
        head = handle.read(4096)
    return (
        b'"eval"' in head
        and (b'"version"' in head or b'"status"' in head)
        and b'"evaluation_results"' not in head
    )
