"""What a SOURCE of `itemeval import` is: its files, the kind of each, and the units to read.

A unit is what one reader turns into samples: an Every Eval Ever aggregate with its instance
file, an lm-eval results file with its samples files, an inspect_ai log, a HELM run folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from itemeval.importing import _eee as eee
from itemeval.importing import _eee_columns as eee_columns
from itemeval.importing import _helm as helm
from itemeval.importing import _inspect_log as inspect_log
from itemeval.importing import _lm_eval as lm_eval
from itemeval.importing._model import Rejection, Sample, SampleBatch, SourceFile


class Unit(Protocol):
    study: str | None

    def source_files(self) -> list[SourceFile]: ...

    def samples(self) -> Iterator[Sample | Rejection]: ...

    def aggregate_only(self) -> list[dict[str, Any]]: ...


@dataclass
class EeeSource:
    """An Every Eval Ever aggregate and its instance file."""

    unit: eee.EeeUnit
    study: str | None = None
    _facts: eee.AggregateFacts | None = None
    _files: list[SourceFile] | None = None

    def facts(self) -> eee.AggregateFacts | None:
        if self._facts is None and self.unit.aggregate is not None:
            self._facts = eee.read_aggregate(self.unit.aggregate)
        return self._facts

    def source_files(self) -> list[SourceFile]:
        if self._files is None:
            facts = self.facts()
            self._files = [eee.source_file(p, facts) for p in self.unit.files]
        return self._files

    def samples(self) -> Iterator[Sample | Rejection | SampleBatch]:
        if self.unit.samples is None:
            return
        facts = self.facts()
        if facts is not None and eee_columns.fast_path_applies(facts):
            sha = next(s.sha256 for s in self.source_files() if s.path == self.unit.samples)
            yield from eee_columns.read_batches(self.unit.samples, facts, sha)
        else:
            yield from eee.read_samples(self.unit.samples, facts)

    def aggregate_only(self) -> list[dict[str, Any]]:
        facts = self.facts()
        if self.unit.samples is not None or facts is None:
            return []
        return [
            {"file": self.unit.aggregate, "model": facts.model_id, **score}
            for score in facts.scores
        ]


@dataclass
class Found:
    units: list[Any] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


def discover(sources: list[str]) -> Found:
    """Every unit under `sources` (files or folders), in path order."""
    from itemeval.errors import InputError, Problem

    found = Found()
    paths: list[str] = []
    for source in sources:
        if not os.path.exists(source):
            raise InputError(Problem("no such file or folder", file=source))
        paths.extend(_with_aggregate(source) if os.path.isfile(source) else _walk(source))
    paths = list(dict.fromkeys(os.path.normpath(p) for p in paths))
    claimed: set[str] = set()
    for folder in helm.helm_folders(paths):
        found.units.append(helm.HelmRun(folder))
        claimed |= {p for p in paths if os.path.dirname(p) == folder}
    for path in sorted(p for p in paths if p not in claimed):
        if path.endswith(".eval"):
            found.units.append(inspect_log.InspectLog(path))
            claimed.add(path)
        elif lm_eval.is_lm_eval_results(path):
            run = lm_eval.LmEvalRun(path)
            try:
                samples = run.samples_files()
            except (OSError, ValueError) as exc:
                found.rejected.append(Rejection("invalid_json", path, None, str(exc)[:160]))
                claimed.add(path)
                continue
            found.units.append(run)
            claimed |= {path, *samples.values()}
    for path in paths:  # lm-eval samples files that no readable results file claimed
        if path not in claimed and lm_eval.samples_stamp(path) is not None:
            found.rejected.append(Rejection("no_aggregate", path, None, _lm_eval_orphan(path)))
            claimed.add(path)
        elif inspect_log.is_inspect_json(path):
            found.units.append(inspect_log.InspectLog(path))
            claimed.add(path)
    eee_paths = [p for p in paths if p not in claimed and p.endswith((".json", ".jsonl"))]
    for path in paths:
        if path not in claimed and path not in eee_paths:
            found.rejected.append(Rejection("not_a_record", path, None, "not a format read"))
    units, rejected = eee.units(sorted(eee_paths))
    found.rejected.extend(rejected)
    for unit in units:
        eee_source = EeeSource(unit)
        facts = eee_source.facts()
        if facts is not None and facts.itemeval:
            eee_source.study = _study_of(unit.aggregate)
        found.units.append(eee_source)
    return found


def _lm_eval_orphan(path: str) -> str:
    """Why an lm-eval samples file has no results file to be read with."""
    results = os.path.join(os.path.dirname(path), f"results_{lm_eval.samples_stamp(path)}.json")
    if not os.path.isfile(results):
        return f"no {os.path.basename(results)} beside it: import it with its results file"
    try:
        lm_eval.LmEvalRun(results).data()
    except (OSError, ValueError):
        return f"its results file {os.path.basename(results)} is rejected (invalid_json)"
    return f"{os.path.basename(results)} does not list its task"


def _with_aggregate(path: str) -> list[str]:
    """A file named alone; an Every Eval Ever instance file (`<name>_samples.jsonl`) with the
    aggregate beside it (`<name>.json`), which it is read with."""
    if path.endswith("_samples.jsonl"):
        aggregate = path[: -len("_samples.jsonl")] + ".json"
        if os.path.isfile(aggregate):
            return [aggregate, path]
    return [path]


def _walk(root: str) -> list[str]:
    out: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out.extend(os.path.join(folder, f) for f in sorted(files) if not f.startswith("."))
    return out


def _study_of(path: str | None) -> str | None:
    import json

    if path is None:
        return None
    with open(path, encoding="utf-8") as handle:
        record = json.load(handle)
    details = (record.get("source_metadata") or {}).get("additional_details") or {}
    name = details.get("study") if isinstance(details, dict) else None
    if name is None:
        source = str((record.get("source_metadata") or {}).get("source_name", ""))
        name = (
            source.removeprefix("itemeval study ") if source.startswith("itemeval study") else None
        )
    return name
