"""inspect_ai logs as samples to import: a `.json` log or a `.eval` archive (a zip of
`header.json` and `samples/*.json`, each member compressed with Zstandard by inspect_ai 0.3.2xx,
with Deflate by older versions); one sample per sample, epoch and scorer (`C`/`I`, booleans and
numbers are scores). The fields are those the Every Eval Ever converter takes
(docs/importing.md). Each task is a dataset of its own (`inspect_ai.<task>`).

A damaged archive, header or log is one rejection naming the file; a damaged member (a sample)
one naming the member: the rest of the log is read."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
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

TOOL = "inspect_ai"


def _zipfile() -> Any:
    """zipfile with Zstandard (method 93): the standard library's from Python 3.14, else
    backports.zstd's (the same module; docs/decisions/0041-zstandard-logs.md)."""
    if sys.version_info >= (3, 14):
        import zipfile
    else:
        from backports.zstd import zipfile
    return zipfile


def _member_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged member raises: a bad CRC or header, bad Deflate or Zstandard
    data, bad UTF-8, I/O."""
    import zlib

    if sys.version_info >= (3, 14):
        from compression.zstd import ZstdError
    else:
        from backports.zstd import ZstdError
    return (*_READ_ERRORS, _zipfile().BadZipFile, zlib.error, ZstdError)


#: What reading a damaged file or member raises (zip, Zstandard, Deflate, JSON, I/O).
_READ_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError, EOFError, KeyError)


def _what(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:160]


@dataclass
class InspectLog:
    """An inspect_ai log: a `.json` file or an `.eval` archive."""

    path: str
    study: str | None = None
    _files: list[SourceFile] | None = None
    _read_samples: bool = False
    _header_cache: dict[str, Any] | None = None
    _json_samples: list[Any] | None = None  # a `.json` log's samples, read with its header

    @property
    def archive(self) -> bool:
        return self.path.endswith(".eval")

    def _header(self) -> dict[str, Any]:
        """The log's header (`DamagedLog` when it cannot be read)."""
        if self._header_cache is not None:
            return self._header_cache
        zipfile = _zipfile()
        try:
            if self.archive:
                with zipfile.ZipFile(self.path) as archive:
                    header = json.loads(archive.read("header.json"))
            else:
                with open(self.path, encoding="utf-8") as handle:
                    header = json.load(handle)
                if isinstance(header, dict):
                    self._json_samples = header.pop("samples", None) or []
        except zipfile.BadZipFile as exc:
            raise DamagedLog(
                Rejection("unreadable", self.path, None, f"not a zip: {exc}")
            ) from None
        except json.JSONDecodeError as exc:
            where = "header.json: " if self.archive else ""
            raise DamagedLog(Rejection("invalid_json", self.path, None, where + str(exc))) from None
        except _member_errors() as exc:
            where = "member header.json: " if self.archive else ""
            raise DamagedLog(Rejection("unreadable", self.path, None, where + _what(exc))) from None
        if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
            raise DamagedLog(Rejection("schema_violation", self.path, None, "no eval header"))
        self._header_cache = header
        return header

    def _samples(self) -> Iterator[tuple[str, dict[str, Any]] | Rejection]:
        if self.archive:
            zipfile, errors = _zipfile(), _member_errors()
            with zipfile.ZipFile(self.path) as archive:
                for name in sorted(set(archive.namelist())):  # a member rewritten: once
                    if not (name.startswith("samples/") and name.endswith(".json")):
                        continue
                    try:
                        sample = json.loads(archive.read(name))
                    except json.JSONDecodeError as exc:
                        yield Rejection("invalid_json", self.path, None, f"member {name}: {exc}")
                        continue
                    except errors as exc:
                        where = f"member {name}: {_what(exc)}"
                        yield Rejection("unreadable", self.path, None, where)
                        continue
                    yield name, sample
            return
        samples, self._json_samples = self._json_samples or [], None  # read by `_header`
        for index, sample in enumerate(samples):
            yield f"samples[{index}]", sample

    def source_files(self) -> list[SourceFile]:
        if self._files is None:
            try:
                packages = (self._header().get("eval") or {}).get("packages") or {}
            except DamagedLog:
                packages = {}
            version = packages.get("inspect_ai") if isinstance(packages, dict) else None
            self._files = [SourceFile(self.path, TOOL, version, sha256_file(self.path))]
        return self._files

    def samples(self) -> Iterator[Sample | Rejection]:
        try:
            header = self._header()
        except DamagedLog as damaged:
            yield damaged.rejection
            return
        spec = header.get("eval") or {}
        model = str(spec.get("model") or "unknown")
        config = spec.get("model_generate_config") or {}
        task = str(spec.get("task") or "task")
        gen = GenerateFacts(
            tool=TOOL,
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
            prompt_name=f"inspect_ai:{task}",
            prompt_text=None,
            task=task,
        )
        dataset = benchmark_dataset(TOOL, task)
        grades: dict[str, GradeFacts] = {}
        for found in self._samples():
            if isinstance(found, Rejection):
                yield found
                continue
            where, sample = found
            self._read_samples = True
            try:
                produced = list(_inspect_samples(sample, gen, dataset, grades, self.path, where))
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                yield Rejection("schema_violation", self.path, None, f"{where}: {_what(exc)}")
                continue
            yield from produced

    def aggregate_only(self) -> list[dict[str, Any]]:
        """The scores of a log without samples (read after `samples`)."""
        if self._read_samples or self._header_cache is None:
            return []
        out = []
        for score in (self._header_cache.get("results") or {}).get("scores") or []:
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
    if not isinstance(sample, dict):
        yield Rejection("schema_violation", path, None, f"{where}: not an object")
        return
    if sample.get("id") is None or str(sample.get("id")) == "":
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
    try:
        epoch = max(int(sample.get("epoch") or 1) - 1, 0)  # inspect counts epochs from 1
    except (TypeError, ValueError):
        yield Rejection("schema_violation", path, None, f"{where}: epoch {sample.get('epoch')!r}")
        return
    if not isinstance(scores, dict) or not scores:
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
            item_id=qualified_id(dataset, str(sample["id"])),
            epoch=epoch,
            input=text,
            reference=str(target),
            answer=answer,
            score=value,
            correct=value >= 1.0,
            record_id=record,
            choices=[str(c) for c in sample_choices] if sample_choices else None,
            item_extras={"sourceId": str(sample["id"])},
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
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return (
        b'"eval"' in head
        and (b'"version"' in head or b'"status"' in head)
        and b'"evaluation_results"' not in head
    )
