"""`import_sources`: read other tools' results and commit them to a store as one import.

Steps: list the sources' files and what kind each is (`_sources.py`); skip files whose sha256 an
earlier import of this store recorded (importing the same file twice writes nothing new); stream
every sample through the `ImportWriter`, counting rejections by reason (`strict`: the first
rejection refuses the import); then write the datasets, their snapshots and pins, and last the
import record. Any failure before the record removes the fragments written: an import is
committed whole or not at all.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from itemeval.errors import ImportRefused, Problem
from itemeval.ids import new_sortable_id
from itemeval.importing._catalog import (
    ImportRecord,
    file_record,
    generate_record,
    grade_record,
    read_imports,
    write_import,
)
from itemeval.importing._model import Rejection, Sample, SampleBatch
from itemeval.importing._sources import discover
from itemeval.importing._writer import ImportWriter
from itemeval.store import StudyStore

#: Rejections kept per reason to show (all are counted).
EXAMPLES_PER_REASON = 3
#: Reasons that, without a line, reject a whole file (listed in `rejected_files`).
WHOLE_FILE = ("not_a_record", "invalid_json", "no_aggregate", "unreadable")
#: What a reader's own checks did not foresee in a damaged file: never a traceback.
_READ_FAILURES = (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError)


def _what(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:160]


def _unit_path(unit: Any) -> str:
    return str(
        getattr(unit, "path", None)
        or getattr(unit, "results", None)
        or getattr(unit, "folder", None)
        or getattr(getattr(unit, "unit", None), "aggregate", None)
        or "?"
    )


def _guarded(unit: Any, files: list[Any]) -> Iterator[Sample | SampleBatch | Rejection]:
    """The unit's samples; a failure its reader did not name (a damaged file it met half way)
    ends the unit with a rejection naming its file instead of a traceback."""
    samples = iter(unit.samples())
    while True:
        try:
            sample = next(samples)
        except StopIteration:
            return
        except _READ_FAILURES as exc:
            path = files[0].path if files else _unit_path(unit)
            yield Rejection("unreadable", path, None, f"{_what(exc)}; the rest of it is not read")
            return
        yield sample


@dataclass
class ImportResult:
    """What one `import_sources` did."""

    store: str
    import_id: str | None  # None when nothing new was written
    files: list[dict[str, Any]] = field(default_factory=list)  # path, tool, version, state
    skipped: list[str] = field(default_factory=list)  # files imported before
    samples: int = 0
    solutions: int = 0
    grades: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    rejected_files: list[str] = field(default_factory=list)  # whole files not read, and why
    generate: list[dict[str, Any]] = field(default_factory=list)
    grade: list[dict[str, Any]] = field(default_factory=list)
    datasets: dict[str, str] = field(default_factory=dict)
    aggregates: list[dict[str, Any]] = field(default_factory=list)
    assumed_modality: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def import_sources(
    store_url: str,
    sources: Sequence[str],
    *,
    strict: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> ImportResult:
    """Import every file under `sources` into the store at `store_url` (see the module doc)."""
    started = time.perf_counter()
    store = StudyStore.open(store_url, storage_options)
    found = discover(list(sources))
    result = ImportResult(store=store.root.url, import_id=None)
    rejected: Counter[str] = Counter()
    examples: Counter[str] = Counter()

    def reject(rejection: Rejection) -> None:
        if strict:
            raise ImportRefused(
                Problem(
                    f"record rejected ({rejection.reason}): {rejection.detail}".rstrip(": "),
                    file=rejection.file,
                    line=rejection.line,
                    hint="fix or remove the record, or import without --strict to skip it; "
                    "nothing was written",
                )
            )
        rejected[rejection.reason] += 1
        if rejection.line is None and rejection.reason in WHOLE_FILE:
            result.rejected_files.append(rejection.describe())
        if examples[rejection.reason] < EXAMPLES_PER_REASON:
            examples[rejection.reason] += 1
            result.examples.append(rejection.describe())

    for rejection in found.rejected:
        reject(rejection)
    known = {f.sha256 for record in read_imports(store) for f in record.files}
    units = []
    for unit in found.units:
        try:
            sources_of = unit.source_files()
        except OSError as exc:
            reject(Rejection("unreadable", _unit_path(unit), None, _what(exc)))
            continue
        if sources_of and all(s.sha256 in known for s in sources_of):
            result.skipped.extend(s.path for s in sources_of)
            continue
        units.append((unit, sources_of))
    if not units:
        result.rejected = dict(rejected)
        result.seconds = time.perf_counter() - started
        return result

    import_id = "import-" + new_sortable_id()
    writer = ImportWriter(store, import_id)
    now = datetime.now(UTC)
    study_names: set[str] = set()
    try:
        files = []
        for unit, sources_of in units:
            paths = {os.path.basename(s.path): s.path for s in sources_of}
            writer.file_hashes = {os.path.basename(s.path): s.sha256 for s in sources_of}

            def located(problem: Rejection, paths: dict[str, str] = paths) -> Rejection:
                """The writer knows a record by its file's name: give the whole path."""
                path = paths.get(problem.file)
                return problem if path is None else replace(problem, file=path)

            before = writer.samples
            for sample in _guarded(unit, sources_of):
                if isinstance(sample, Sample):
                    problem = writer.add(sample)
                    if problem is not None:
                        reject(located(problem))
                elif isinstance(sample, SampleBatch):
                    for problem in writer.add_batch(sample):
                        reject(located(problem))
                else:
                    reject(sample)
            aggregates = unit.aggregate_only()
            result.aggregates.extend(aggregates)
            if writer.samples == before and not aggregates:
                continue  # nothing read from it (rejected whole): not recorded as imported
            files.extend(sources_of)
            if unit.study:
                study_names.add(unit.study)
            result.files.extend(
                {"path": s.path, "tool": s.tool, "version": s.version} for s in sources_of
            )
        if writer.samples == 0 and not result.aggregates:
            writer.abort()
            result.rejected = dict(rejected)
            result.seconds = time.perf_counter() - started
            return result
        writer.flush()
        datasets = writer.write_datasets(store.root)
        record = ImportRecord(
            import_id=import_id,
            started_at=now,
            sources=[str(s) for s in sources],
            study=study_names.pop() if len(study_names) == 1 else None,
            files=[file_record(s) for s in files],
            generate=[generate_record(f) for f in writer.generate.values()],
            grade=[grade_record(f) for f in writer.grade.values()],
            datasets=datasets,
            epochs=writer.epochs,
            samples=writer.samples,
            solutions=writer.solutions,
            grades=writer.grades,
            rejected=dict(sorted(rejected.items())),
            aggregates=result.aggregates,
        )
        write_import(store, record)
    except BaseException:
        writer.abort()
        raise
    writer.close()
    result.import_id = import_id
    result.samples, result.solutions, result.grades = (
        writer.samples,
        writer.solutions,
        writer.grades,
    )
    result.rejected = dict(sorted(rejected.items()))
    result.generate = [g.model_dump() for g in record.generate]
    result.grade = [g.model_dump() for g in record.grade]
    result.datasets = datasets
    result.assumed_modality = writer.assumed_modality
    result.seconds = time.perf_counter() - started
    return result
