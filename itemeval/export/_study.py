"""`itemeval export`: the long table (parquet, CSV) and Every Eval Ever records, in one pass.

One scan of the store (`table.scan`) feeds every requested format: the parquet and CSV
writers append each batch as it comes (`pq.ParquetWriter`, `pyarrow.csv.CSVWriter`), the Every
Eval Ever writer streams samples and writes aggregates per condition pair. Nothing holds the
table: memory stays bounded by one batch plus the located keys of the partitions being read.

Files (under `--out`, default `<store>/exports/`):

    long_table.parquet   long_table.csv   eee/data/<dataset>/<developer>/<model>/<uuid>.json ...
    comparisons.parquet  comparisons.csv  (and rankings.*, variance_components.*): the paired
                         comparisons of `itemeval.statistics`, in each table format asked for
    export.json          what was exported: counts, options, files

Each file is written wholly or not at all (`export.outputs`); a failed export leaves the
previous files as they were.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from itemeval import __version__
from itemeval.errors import InputError, Problem
from itemeval.export._eee.records import EEE_VERSIONS, RELATIONSHIPS, RecordContext
from itemeval.export._eee.writer import EeeWriter
from itemeval.export._outputs import OutputDir, OutputFile
from itemeval.export._report.judges import study_judges
from itemeval.export._report.pairwise import study_pairwise
from itemeval.export._stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from itemeval.export._table.columns import LONG_TABLE_SCHEMA
from itemeval.export._table.scan import DEFAULT_BATCH_ROWS, LongTableScan, Pair, ScanCounts
from itemeval.planning import Plan

FORMATS = ("parquet", "csv", "eee")
PAIRWISE_FILE = "pairwise.json"  # pairwise judges against their baseline, when there are some
JUDGES_FILE = "judges.json"  # every judge and panel against gold, when the study has judges
PARQUET_FILE = "long_table.parquet"
CSV_FILE = "long_table.csv"
SUMMARY_FILE = "export.json"
#: Rows per parquet row group (batches are buffered up to this).
ROW_GROUP_ROWS = 64 * 1024


@dataclass(frozen=True)
class ExportOptions:
    out: str | None = None  # default: <store>/exports
    formats: tuple[str, ...] = FORMATS
    eee_version: str = "0.2.0"
    include_ungraded: bool = False
    batch_rows: int = DEFAULT_BATCH_ROWS
    organization: str = "unknown"  # Every Eval Ever `source_organization_name`
    relationship: str = "third_party"  # Every Eval Ever `evaluator_relationship`
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED

    def check(self) -> None:
        problems = []
        unknown = [f for f in self.formats if f not in FORMATS]
        if unknown or not self.formats:
            problems.append(
                Problem(
                    f"unknown format(s) {', '.join(unknown) or '(none given)'}",
                    field="--format",
                    hint=f"a comma-separated list of {', '.join(FORMATS)}",
                )
            )
        for value, known, what, option in (
            (self.eee_version, EEE_VERSIONS, "Every Eval Ever version", "--eee-version"),
            (
                self.relationship,
                RELATIONSHIPS,
                "evaluator relationship",
                "--evaluator-relationship",
            ),
        ):
            if value not in known:
                problems.append(
                    Problem(
                        f"unknown {what} {value!r}", field=option, hint=f"one of {', '.join(known)}"
                    )
                )
        if self.batch_rows < 1:
            problems.append(Problem("must be at least 1", field="batch_rows"))
        if problems:
            raise InputError(problems)


@dataclass
class ExportResult:
    study: str
    store: str
    out: str
    formats: tuple[str, ...]
    rows: int
    counts: ScanCounts
    files: dict[str, str] = field(default_factory=dict)
    eee_version: str | None = None
    eee_evaluations: int = 0
    eee_samples: int = 0
    eee_excluded: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        counts = asdict(self.counts)
        counts["pairs"] = [
            {"grade_condition_id": g, "gen_condition_id": c, "rows": n}
            for (g, c), n in self.counts.pairs.items()
        ]
        return {
            "study": self.study,
            "store": self.store,
            "out": self.out,
            "formats": list(self.formats),
            "rows": self.rows,
            "counts": counts,
            "files": self.files,
            "eee": {
                "version": self.eee_version,
                "evaluations": self.eee_evaluations,
                "samples": self.eee_samples,
                "excluded": self.eee_excluded,
            }
            if self.eee_version
            else None,
            "seconds": round(self.seconds, 3),
            "itemeval": __version__,
        }


class Sink(Protocol):
    def begin_pair(self, pair: Pair) -> None: ...

    def write(self, batch: pa.RecordBatch) -> None: ...

    def end_pair(self) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


class ParquetSink:
    """The long table as one parquet file (zstd), row groups of `ROW_GROUP_ROWS`."""

    def __init__(self, file: OutputFile):
        self.file = file
        self.writer = pq.ParquetWriter(file.handle, LONG_TABLE_SCHEMA, compression="zstd")
        self._pending: list[pa.RecordBatch] = []
        self._rows = 0

    def begin_pair(self, pair: Pair) -> None:
        return None

    def write(self, batch: pa.RecordBatch) -> None:
        self._pending.append(batch)
        self._rows += batch.num_rows
        if self._rows >= ROW_GROUP_ROWS:
            self._flush()

    def end_pair(self) -> None:
        return None

    def _flush(self) -> None:
        if self._pending:
            table = pa.Table.from_batches(self._pending, schema=LONG_TABLE_SCHEMA)
            self.writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self._pending, self._rows = [], 0

    def close(self) -> None:
        self._flush()
        self.writer.close()
        self.file.commit()

    def abort(self) -> None:
        self._pending = []
        try:
            self.writer.close()
        finally:
            self.file.discard()


class CsvSink:
    """The long table as one CSV file (header row; nulls as empty fields; UTF-8)."""

    def __init__(self, file: OutputFile):
        self.file = file
        self.writer = pacsv.CSVWriter(file.handle, LONG_TABLE_SCHEMA)

    def begin_pair(self, pair: Pair) -> None:
        return None

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)

    def end_pair(self) -> None:
        return None

    def close(self) -> None:
        self.writer.close()
        self.file.commit()

    def abort(self) -> None:
        try:
            self.writer.close()
        finally:
            self.file.discard()


def parse_formats(text: str | Sequence[str]) -> tuple[str, ...]:
    """`"parquet,csv"` -> ("parquet", "csv") (order kept, duplicates dropped)."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    return tuple(dict.fromkeys(p.strip().lower() for p in parts if p.strip()))


def _write_statistics(
    plan: Plan, out: OutputDir, formats: list[str], options: ExportOptions
) -> dict[str, str]:
    """The comparisons, rankings and variance components tables (`itemeval.statistics`)."""
    from itemeval.statistics import (
        analysis_options,
        comparisons_table,
        components_table,
        plan_statistics,
        rankings_table,
    )

    stats = plan_statistics(plan, analysis_options(plan, options.resamples, options.seed))
    files = {}
    for name, table in (
        ("comparisons", comparisons_table(stats)),
        ("rankings", rankings_table(stats)),
        ("variance_components", components_table(stats)),
    ):
        for fmt in formats:
            sink = pa.BufferOutputStream()
            if fmt == "parquet":
                pq.write_table(table, sink)
            else:
                pacsv.write_csv(table, sink)
            key = name if fmt == "parquet" else f"{name}_csv"
            files[key] = out.write_bytes(f"{name}.{fmt}", sink.getvalue().to_pybytes())
    return files


def export_study(plan: Plan, options: ExportOptions | None = None) -> ExportResult:
    """Write the long table and/or Every Eval Ever records of `plan`'s store (see module doc)."""
    options = options or ExportOptions()
    options.check()
    started = time.monotonic()
    out = OutputDir.for_plan(plan, options.out)
    scan = LongTableScan(
        plan, include_ungraded=options.include_ungraded, batch_rows=options.batch_rows
    )
    result = ExportResult(
        study=plan.study.study,
        store=plan.store.root.url,
        out=out.url,
        formats=options.formats,
        rows=0,
        counts=scan.counts,
    )
    sinks: list[Sink] = []
    eee: EeeWriter | None = None
    try:
        if "parquet" in options.formats:
            sinks.append(ParquetSink(out.open(PARQUET_FILE)))
            result.files["parquet"] = out.location(PARQUET_FILE).url
        if "csv" in options.formats:
            sinks.append(CsvSink(out.open(CSV_FILE)))
            result.files["csv"] = out.location(CSV_FILE).url
        if "eee" in options.formats:
            context = RecordContext(
                study=plan.study.study,
                version=options.eee_version,
                retrieved=str(round(time.time(), 6)),
                organization=options.organization,
                relationship=options.relationship,
                epochs=plan.design.epochs,
            )
            eee = EeeWriter(out, plan, context, resamples=options.resamples, seed=options.seed)
            sinks.append(eee)
            result.files["eee"] = out.location("eee").url
            result.eee_version = options.eee_version
        current: Pair | None = None
        for pair, batch in scan:
            if pair != current:
                if current is not None:
                    for sink in sinks:
                        sink.end_pair()
                for sink in sinks:
                    sink.begin_pair(pair)
                current = pair
            for sink in sinks:
                sink.write(batch)
        if current is not None:
            for sink in sinks:
                sink.end_pair()
        for sink in sinks:
            sink.close()
    except BaseException:
        for sink in sinks:
            with contextlib.suppress(Exception):  # the original error is what matters
                sink.abort()
        raise
    result.rows = scan.counts.rows
    tables = [f for f in ("parquet", "csv") if f in options.formats]
    if tables:
        result.files |= _write_statistics(plan, out, tables, options)
    judges = study_judges(plan, resamples=options.resamples, seed=options.seed)
    if judges is not None:  # judges and panels against gold (itemeval.judging)
        result.files["judges"] = out.write_bytes(
            JUDGES_FILE, (json.dumps(judges.as_dict(), indent=2) + "\n").encode("utf-8")
        )
    pairwise = study_pairwise(plan)
    if pairwise:  # pairwise judges against their baseline (itemeval.judging._pairwise)
        body = json.dumps([p.to_dict() for p in pairwise], indent=2) + "\n"
        result.files["pairwise"] = out.write_bytes(PAIRWISE_FILE, body.encode("utf-8"))
    if eee is not None:
        result.eee_evaluations = eee.totals.evaluations
        result.eee_samples = eee.totals.samples
        result.eee_excluded = dict(sorted(eee.totals.excluded.items()))
    result.seconds = time.monotonic() - started
    summary = result.as_dict() | {"written_at": datetime.now(UTC).isoformat()}
    summary["options"] = {
        "formats": list(options.formats),
        "eee_version": options.eee_version,
        "include_ungraded": options.include_ungraded,
        "organization": options.organization,
        "evaluator_relationship": options.relationship,
        "bootstrap_resamples": options.resamples,
        "seed": options.seed,
    }
    result.files["summary"] = out.write_bytes(
        SUMMARY_FILE, (json.dumps(summary, indent=2) + "\n").encode("utf-8")
    )
    return result
