"""`itemeval export`: the long table (parquet, CSV) and Every Eval Ever records, written from
what changed since the last export into the same folder.

Files (under `--out`, default `<store>/exports/`):

    long_table/grade_condition_id=<G>/gen_condition_id=<C>/part-*.parquet   the long table
    long_table_csv/grade_condition_id=<G>/gen_condition_id=<C>/part-*.csv   the same rows
    eee/data/<dataset>/<developer>/<model>/<uuid>.json, <uuid>_samples.jsonl
    comparisons.parquet  comparisons.csv  (and rankings.*, variance_components.*)
    judges.json  pairwise.json
    export.json          what was exported (counts, options, files) and the manifest
    _export/             the key index of each condition pair

Pair by pair (grade condition x generate condition), the export compares what the store holds
now with what the manifest says the folder was made from (`_manifest`):

* the store's partitions and the selection unchanged (the same fragment names): the pair is
  not read at all;
* otherwise its rows are located from the store's cells (`_table.pairs`, no text read) and
  compared with the pair's key index by fingerprint (`_delta`); only new and changed rows are
  fetched from the store, appended as new parts (`_parts`) and as new lines of their
  evaluations' samples files (`_eee.writer`); parts and samples files that held a changed or
  removed row are replaced by a copy without it.

The comparisons, rankings, variance components, judges and pairwise files are computed again
when a pair's content changed (or the study file, or the options: `study_source`, a digest of
them in the manifest), from one read of the study's cells (the store's summaries and the
fragments newer than them). An export of an unchanged store reads no cells and writes nothing.
Every file is staged and published by the manifest (`_manifest.Commit`): a failed or killed
export leaves the previous one readable, and the next export finishes or removes what it left.

Memory: one pair's cells and key index (about 150 bytes a row), a few row groups and one batch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from itemeval import __version__
from itemeval.errors import InputError, Problem
from itemeval.export._eee.records import EEE_VERSIONS, RELATIONSHIPS, RecordContext
from itemeval.export._eee.writer import EeeTotals, EeeWriter
from itemeval.export._manifest import (
    CSV_DIR,
    EEE_DIR,
    MANIFEST_FILE,
    TABLE_DIR,
    Commit,
    Manifest,
    PairRecord,
    damaged,
    encode,
    list_owned,
    pair_name,
    read_manifest,
    recover,
    repair_appended,
    unnamed,
)
from itemeval.export._outputs import OutputDir
from itemeval.export._pair_update import PairUpdate, digest
from itemeval.export._parts import TABLE_FORMATS
from itemeval.judging import judge_analysis, study_cells, study_pairwise
from itemeval.planning import Plan
from itemeval.results import (
    DEFAULT_BATCH_ROWS,
    LongTableScan,
    ScanCounts,
    StudyCells,
    study_clusters,
)
from itemeval.statistics import DEFAULT_RESAMPLES, DEFAULT_SEED
from itemeval.store import GRADES, SOLUTIONS
from itemeval.store.fragments import FragmentInfo, list_fragments

FORMATS = ("parquet", "csv", "eee")
PAIRWISE_FILE = "pairwise.json"  # pairwise judges against their baseline, when there are some
JUDGES_FILE = "judges.json"  # every judge and panel against gold, when the study has judges
SUMMARY_FILE = MANIFEST_FILE


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
    #: What this export did: pairs whose files changed, rows fetched from the store, files
    #: written; `unchanged`: nothing was written (the store had not changed).
    pairs_changed: int = 0
    pairs_advanced: int = 0  # pairs read from their key index and the fragments written since
    rows_written: int = 0
    files_written: int = 0
    statistics_seconds: float = 0.0  # of `seconds`: the comparisons, judges, pairwise files
    unchanged: bool = False

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
            "written": {
                "pairs_changed": self.pairs_changed,
                "pairs_advanced": self.pairs_advanced,
                "rows_written": self.rows_written,
                "files_written": self.files_written,
                "statistics_seconds": round(self.statistics_seconds, 3),
                "unchanged": self.unchanged,
            },
            "itemeval": __version__,
        }


def parse_formats(text: str | Sequence[str]) -> tuple[str, ...]:
    """`"parquet,csv"` -> ("parquet", "csv") (order kept, duplicates dropped)."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    return tuple(dict.fromkeys(p.strip().lower() for p in parts if p.strip()))


def export_study(plan: Plan, options: ExportOptions | None = None) -> ExportResult:
    """Write the long table and/or Every Eval Ever records of `plan`'s store, from what changed
    since the last export into the same folder (see the module doc)."""
    options = options or ExportOptions()
    options.check()
    started = time.monotonic()
    return _Export(plan, options, OutputDir.for_plan(plan, options.out)).run(started)


_digest = digest


class _Export:
    def __init__(self, plan: Plan, options: ExportOptions, out: OutputDir) -> None:
        self.plan = plan
        self.options = options
        self.out = out
        self.tables = [f for f in TABLE_FORMATS if f in options.formats]
        self.eee = "eee" in options.formats
        self.scan = LongTableScan(
            plan, include_ungraded=options.include_ungraded, batch_rows=options.batch_rows
        )
        self.commit = Commit(out)
        self.writer: EeeWriter | None = None
        self.now = str(round(time.time(), 6))
        self.listings: dict[tuple[str, str], list[FragmentInfo]] = {}
        self.pairs: PairUpdate | None = None

    # -- the whole export ----------------------------------------------------------------------
    def run(self, started: float) -> ExportResult:
        plan, out = self.plan, self.out
        before, document = read_manifest(out)
        recover(out, before, document)
        listed = list_owned(out, before.study_files.values() if before else ())
        staged, stray = unnamed(before, listed)
        for path in staged:  # what a failed export left
            out.location(path).delete()
        broken: set[str] = set()
        if before is not None:
            for path in stray:  # not the export's own: nothing names it
                out.location(path).delete()
            repair_appended(out, before, listed)
            broken = damaged(before, listed)
        else:
            self.commit.delete(stray)  # an earlier layout's files, once this export is published
        if self.eee:
            context = RecordContext(
                study=plan.study.study,
                version=self.options.eee_version,
                retrieved=self.now,
                organization=self.options.organization,
                relationship=self.options.relationship,
                epochs=plan.design.epochs,
            )
            self.writer = EeeWriter(
                out,
                self.commit,
                plan,
                context,
                resamples=self.options.resamples,
                seed=self.options.seed,
            )
        sources = self._sources()
        seen = {k: set(v) for k, v in before.partitions.items()} if before is not None else {}
        update = self.pairs = PairUpdate(
            plan,
            out,
            self.commit,
            self.scan,
            self.writer,
            tables=self.tables,
            include_ungraded=self.options.include_ungraded,
            now=self.now,
            listings=self.listings,
            seen=seen,
        )
        try:
            pairs: dict[str, PairRecord] = {}
            for pair in self.scan.pairs():
                name = pair_name(pair.grade.id, pair.generate.id)
                previous = before.pairs.get(name) if before is not None else None
                if previous is not None and broken & set(previous.paths()):
                    previous = None  # a file of it is missing or damaged: made again
                pairs[name] = update.pair(pair, previous, sources)
            statistics_started = time.monotonic()
            study_source, study_files = self._study_files(before, broken, pairs, sources)
            statistics_seconds = time.monotonic() - statistics_started
            manifest = Manifest(
                options=_digest([self.tables, self.eee]),
                study_source=study_source,
                study_files=study_files,
                pairs=pairs,
                partitions={
                    f"{stage}/{condition}": [f.name for f in self.listings[(stage, condition)]]
                    for stage, condition in sorted(
                        {(GRADES.name, r.grade) for r in pairs.values()}
                        | {(SOLUTIONS.name, r.generate) for r in pairs.values()}
                    )
                },
            )
            named = set(study_files.values())
            for record in pairs.values():
                named.update(record.paths())
            old_sizes = before.sizes if before is not None else {}
            manifest.sizes = {
                p: self.commit.sizes.get(p, old_sizes.get(p, 0)) for p in sorted(named)
            }
            self.commit.delete(p for p in old_sizes if p not in named)
            result = self._result(manifest)
            result.statistics_seconds = statistics_seconds
            unchanged = self.commit.empty and before is not None and manifest == before
            if unchanged:
                assert document is not None
                result.seconds = time.monotonic() - started
                result.unchanged = True
                return result
            result.files_written = len(self.commit.sizes)
            result.seconds = time.monotonic() - started
            document = self._document(result)
            if self.commit.empty:  # only what the manifest says changed (a compaction)
                out.location(MANIFEST_FILE).write_atomic(encode(document, manifest))
            else:
                self.commit.finish(document, manifest)
            return result
        except BaseException:
            if self.writer is not None:
                self.writer.abort()
            self.commit.discard()
            raise

    def plan_selection(self) -> str:
        assert self.pairs is not None
        return self.pairs.selection

    def _sources(self) -> dict[tuple[str, str], str]:
        """A digest of the fragment names of every partition the export reads: fragments are
        immutable, so the same names are the same rows."""
        design = self.plan.design
        partitions = [(SOLUTIONS, c.id) for c in design.generate]
        partitions += [(GRADES, c.id) for c in design.grade]
        partitions += [(GRADES, c.id) for c in design.pairwise]
        out = {}
        for stage, condition in partitions:
            listed = list_fragments(self.plan.store.partition(stage, condition))
            self.listings[(stage.name, condition)] = listed
            out[(stage.name, condition)] = _digest([f.name for f in listed])
        return out

    # -- the study's files ---------------------------------------------------------------------
    def _study_files(
        self,
        before: Manifest | None,
        broken: set[str],
        pairs: dict[str, PairRecord],
        sources: dict[tuple[str, str], str],
    ) -> tuple[str, dict[str, str]]:
        plan, options = self.plan, self.options
        pairwise = [sources[(GRADES.name, c.id)] for c in plan.design.pairwise]
        study_source = _digest(
            [
                [p.content for p in pairs.values()],
                pairwise,
                self.tables,
                options.resamples,
                options.seed,
                plan.study.model_dump(mode="json"),
                self.plan_selection(),
            ]
        )
        if (
            before is not None
            and before.study_source == study_source
            and not broken & set(before.study_files.values())
        ):
            return study_source, before.study_files
        files: dict[str, str] = {}
        # The cells read once for both (`plan_statistics` and `study_judges` read the same).
        judged = [c for c in plan.design.judges if c.pairwise is None]
        cells = study_cells(plan) if self.tables or judged else None
        if self.tables:
            assert cells is not None
            files |= self._statistics(cells)
        judges = None
        if judged:
            assert cells is not None
            clusters = study_clusters(plan, cells)  # every interval over clusters, as the report's
            judges = judge_analysis(
                cells,
                plan,
                resamples=options.resamples,
                seed=options.seed,
                clusters=clusters.codes if clusters is not None else None,
            )
        if judges is not None:  # judges and panels against gold (itemeval.judging)
            body = json.dumps(judges.as_dict(), indent=2) + "\n"
            self.commit.stage_bytes(JUDGES_FILE, body.encode("utf-8"))
            files["judges"] = JUDGES_FILE
        analyses = study_pairwise(plan)
        if analyses:  # pairwise judges against their baseline (itemeval.judging._pairwise)
            body = json.dumps([p.to_dict() for p in analyses], indent=2) + "\n"
            self.commit.stage_bytes(PAIRWISE_FILE, body.encode("utf-8"))
            files["pairwise"] = PAIRWISE_FILE
        return study_source, files

    def _statistics(self, cells: StudyCells) -> dict[str, str]:
        """The comparisons, rankings and variance components tables (`itemeval.statistics`)."""
        from itemeval.statistics import (
            analysis_options,
            comparisons_table,
            components_table,
            plan_statistics,
            rankings_table,
        )

        plan, options = self.plan, self.options
        stats = plan_statistics(
            plan, analysis_options(plan, options.resamples, options.seed), cells=cells
        )
        files = {}
        for name, table in (
            ("comparisons", comparisons_table(stats)),
            ("rankings", rankings_table(stats)),
            ("variance_components", components_table(stats)),
        ):
            for fmt in self.tables:
                sink = pa.BufferOutputStream()
                if fmt == "parquet":
                    pq.write_table(table, sink)
                else:
                    pacsv.write_csv(table, sink)
                key = name if fmt == "parquet" else f"{name}_csv"
                path = f"{name}.{fmt}"
                self.commit.stage_bytes(path, sink.getvalue().to_pybytes())
                files[key] = path
        return files

    # -- what the export says ------------------------------------------------------------------
    def _result(self, manifest: Manifest) -> ExportResult:
        plan, out = self.plan, self.out
        counts = self.scan.counts
        counts.rows = counts.graded = counts.ungraded = counts.stale = 0
        counts.outside_selection = 0
        totals = EeeTotals()
        excluded: dict[str, int] = {}
        for record in manifest.pairs.values():
            c = record.counts
            counts.rows += c.rows
            counts.graded += c.graded
            counts.ungraded += c.rows - c.graded
            counts.stale += c.stale
            counts.outside_selection += c.outside_selection
            for evaluation in record.evaluations.values():
                totals.evaluations += evaluation.aggregate is not None
                totals.samples += evaluation.samples_rows
                for reason, k in evaluation.excluded.items():
                    excluded[reason] = excluded.get(reason, 0) + k
        result = ExportResult(
            study=plan.study.study,
            store=plan.store.root.url,
            out=out.url,
            formats=self.options.formats,
            rows=counts.rows,
            counts=counts,
            pairs_changed=self.pairs.pairs_changed if self.pairs else 0,
            pairs_advanced=self.pairs.advanced if self.pairs else 0,
            rows_written=self.pairs.rows_written if self.pairs else 0,
        )
        if "parquet" in self.tables:
            result.files["parquet"] = out.location(TABLE_DIR).url
        if "csv" in self.tables:
            result.files["csv"] = out.location(CSV_DIR).url
        if self.eee:
            result.files["eee"] = out.location(EEE_DIR).url
            result.eee_version = self.options.eee_version
            result.eee_evaluations = totals.evaluations
            result.eee_samples = totals.samples
            result.eee_excluded = dict(sorted(excluded.items()))
        for key, path in manifest.study_files.items():
            result.files[key] = out.location(path).url
        result.files["summary"] = out.location(MANIFEST_FILE).url
        return result

    def _document(self, result: ExportResult) -> dict[str, Any]:
        options = self.options
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
        return summary
