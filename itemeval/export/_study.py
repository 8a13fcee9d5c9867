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
when a pair's content changed (or the study file, or the options). An export of an unchanged
store writes nothing. Every file is staged and published by the manifest (`_manifest.Commit`):
a failed or killed export leaves the previous one readable, and the next export finishes or
removes what it left.

Memory: one pair's cells and key index (about 150 bytes a row), a few row groups and one batch.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from itemeval import __version__
from itemeval.errors import InputError, Problem
from itemeval.export._delta import (
    KEY_INDEX_SCHEMA,
    PairChanges,
    compare,
    encode_index,
    read_index,
)
from itemeval.export._eee.records import EEE_VERSIONS, RELATIONSHIPS, RecordContext
from itemeval.export._eee.writer import EEE_INDEX_FIELDS, EEE_INDEX_SCHEMA, EeeTotals, EeeWriter
from itemeval.export._manifest import (
    CSV_DIR,
    EEE_DIR,
    MANIFEST_FILE,
    PART_ROWS,
    STATE_DIR,
    TABLE_DIR,
    Commit,
    EvaluationRecord,
    Manifest,
    PairCounts,
    PairRecord,
    PartRecord,
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
from itemeval.export._parts import TABLE_FORMATS, PairParts
from itemeval.export._report.judges import study_judges
from itemeval.export._report.pairwise import study_pairwise
from itemeval.export._stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from itemeval.export._table.columns import LONG_TABLE_SCHEMA
from itemeval.export._table.pairs import (
    STATE_SCHEMA,
    PairRows,
    advance_state,
    content_digest,
    holding,
    key_strings,
    ordered_rows,
    read_state,
)
from itemeval.export._table.scan import DEFAULT_BATCH_ROWS, LongTableScan, Pair, ScanCounts
from itemeval.ids import canonical_json
from itemeval.planning import Plan
from itemeval.storage import unique_name
from itemeval.store import GRADES, SOLUTIONS
from itemeval.store.fragments import FragmentInfo, list_fragments

FORMATS = ("parquet", "csv", "eee")
PAIRWISE_FILE = "pairwise.json"  # pairwise judges against their baseline, when there are some
JUDGES_FILE = "judges.json"  # every judge and panel against gold, when the study has judges
SUMMARY_FILE = MANIFEST_FILE
#: A pair's newest part smaller than this is filled up by the next export that adds rows.
SMALL_PART_ROWS = PART_ROWS // 20
#: A pair's state is advanced from its key index when the fragments written since weigh at
#: most this (else it is read from the store's cells: summaries and newer fragments).
ADVANCE_BYTES = 256 << 20
#: How the parts are cut and what their rows are (a change rewrites every part).
_LAYOUT = ["parts/1"]


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


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()[:32]


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
        self.rows_written = 0
        self.pairs_changed = 0
        self.advanced = 0  # pairs whose state was advanced from their key index
        self.selection = _digest(
            [[d.name, d.fingerprint, d.selected] for d in plan.datasets] + [plan.design.epochs]
        )
        self.listings: dict[tuple[str, str], list[FragmentInfo]] = {}
        self.seen: dict[str, set[str]] = {}
        self.gen_ranges: dict[str, list[tuple[str, str]] | None] = {}

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
        if before is not None:
            self.seen = {k: set(v) for k, v in before.partitions.items()}
        try:
            pairs: dict[str, PairRecord] = {}
            for pair in self.scan.pairs():
                name = pair_name(pair.grade.id, pair.generate.id)
                previous = before.pairs.get(name) if before is not None else None
                if previous is not None and broken & set(previous.paths()):
                    previous = None  # a file of it is missing or damaged: made again
                pairs[name] = self._pair(pair, previous, sources)
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
            result.files_written = len(self.commit.moves)
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

    # -- one pair -------------------------------------------------------------------------------
    def _pair(
        self, pair: Pair, before: PairRecord | None, sources: dict[tuple[str, str], str]
    ) -> PairRecord:
        grade, generate = pair.grade.id, pair.generate.id
        source = _digest(
            [sources[(GRADES.name, grade)], sources[(SOLUTIONS.name, generate)], self.selection]
        )
        table_signature = (
            _digest(
                [
                    self.tables,
                    self.options.include_ungraded,
                    _LAYOUT,
                    (LONG_TABLE_SCHEMA.metadata or {}).get(b"itemeval.schema", b"").decode(),
                    list(asdict(pair.grade).values()),
                    list(asdict(pair.generate).values()),
                ]
            )
            if self.tables
            else None
        )
        if (
            before is not None
            and before.source == source
            and before.table_signature == table_signature
            and self._eee_same(pair, before)
        ):
            self.scan.counts.pairs[(grade, generate)] = before.counts.rows
            return before
        index = None
        if before is not None:
            index = read_index(self.out, before.keys)
            if index is None:  # unreadable: the pair is made again
                before = None
        state, earlier, touched = self._state(pair, before, index)
        moved = touched is None or bool(touched.any())  # the index's state is not current
        if touched is not None and before is not None and before.selection != self.selection:
            touched = None  # another selection: every key's dataset is looked up again
        changes = compare(
            state,
            index,
            self.scan.selection,
            include_ungraded=self.options.include_ungraded,
            earlier=earlier,
            touched=touched,
        )
        return self._update(pair, before, index, changes, moved, source, table_signature)

    def _state(
        self, pair: Pair, before: PairRecord | None, index: pa.Table | None
    ) -> tuple[pa.Table, np.ndarray | None, np.ndarray | None]:
        """The pair's state: the index's advanced by the fragments written since it was made,
        when that is little to read; else the store's cells. With each key's row in the index
        and which keys moved, when advanced."""
        grade, generate = pair.grade.id, pair.generate.id
        store = self.plan.store
        grades_now = self.listings[(GRADES.name, grade)]
        solutions_now = self.listings[(SOLUTIONS.name, generate)]
        seen_grades = self.seen.get(f"{GRADES.name}/{grade}")
        seen_solutions = self.seen.get(f"{SOLUTIONS.name}/{generate}")
        if index is not None and seen_grades is not None and seen_solutions is not None:
            new_grades = [f for f in grades_now if f.name not in seen_grades]
            new_solutions = [f for f in solutions_now if f.name not in seen_solutions]
            new_grades = holding(
                store.partition(GRADES, grade), new_grades, generate, self.gen_ranges
            )
            new_bytes = sum(f.size or ADVANCE_BYTES for f in (*new_grades, *new_solutions))
            if new_bytes <= ADVANCE_BYTES:
                state, touched = advance_state(
                    store,
                    grade,
                    generate,
                    index.select(STATE_SCHEMA.names),
                    new_grades,
                    new_solutions,
                    {f.name for f in grades_now},
                    {f.name for f in solutions_now},
                )
                m = index.num_rows
                earlier = np.concatenate(
                    [np.arange(m, dtype=np.int64), np.full(state.num_rows - m, -1, np.int64)]
                )
                self.advanced += 1
                return state, earlier, touched
        return read_state(store, grade, generate), None, None

    def _eee_same(self, pair: Pair, before: PairRecord) -> bool:
        if not self.eee:
            return not before.evaluations and not before.eee
        if not before.eee:
            return False
        assert self.writer is not None
        for dataset, record in before.evaluations.items():
            if not self.writer.knows(dataset):  # a dataset that left the study
                return False
            if (record.signature, record.aggregate_signature) != self.writer.signatures(
                pair, dataset
            ):
                return False
        return True

    def _update(
        self,
        pair: Pair,
        before: PairRecord | None,
        index: pa.Table | None,
        changes: PairChanges,
        moved: bool,
        source: str,
        table_signature: str | None,
    ) -> PairRecord:
        state = changes.state
        n = state.num_rows
        if index is None:
            index = KEY_INDEX_SCHEMA.empty_table()
        removed = changes.removed
        row = changes.row
        datasets = changes.dataset.to_numpy(zero_copy_only=False)
        old_datasets = index.column("dataset").to_numpy(zero_copy_only=False)
        keys = key_strings(state)

        # The long table: which rows to write, which earlier parts to replace.
        table_rebuild = bool(self.tables) and (
            before is None or before.table_signature != table_signature
        )
        touched_table = np.zeros(n, dtype=bool)
        previous_parts = []
        dirty: set[int] = set()
        if self.tables:
            touched_table = row.copy() if table_rebuild else changes.new.copy()
            if not table_rebuild and before is not None:
                previous_parts = before.parts
                parts_of = index.column("part").to_numpy(zero_copy_only=False)
                dirty = {int(p) for p in parts_of[removed] if p == p and p is not None}
                if touched_table.any() and previous_parts:
                    newest = max(previous_parts, key=lambda p: p.id)
                    if newest.rows < SMALL_PART_ROWS:
                        dirty.add(newest.id)  # filled up rather than followed by another

        # Every Eval Ever: which evaluations to make again, which to add lines to.
        touched_eee = np.zeros(n, dtype=bool)
        rewrite: set[str] = set()
        begun: dict[str, str] = {}
        copies: dict[str, tuple[str, pa.Table, int]] = {}
        previous_evaluations: dict[str, EvaluationRecord] = {}
        sample = pc.fill_null(index.column("sample"), False).to_numpy(zero_copy_only=False)
        if self.writer is not None:
            if before is not None and before.eee:
                previous_evaluations = before.evaluations
            present = set(np.unique(datasets[row]).tolist()) if row.any() else set()
            rebuild = {
                d
                for d in present
                if d not in previous_evaluations
                or previous_evaluations[d].signature != self.writer.signatures(pair, d)[0]
            }
            touched_eee = changes.new | (row & np.isin(datasets, list(rebuild)))
            rewrite = rebuild | set(np.unique(datasets[touched_eee]).tolist())
            rewrite |= {d for d in set(old_datasets[removed].tolist()) if d is not None} & present
            for dataset in rewrite:
                earlier = previous_evaluations.get(dataset)
                if dataset in rebuild or earlier is None:
                    begun[dataset] = self.now
                    continue
                begun[dataset] = earlier.begun
                if earlier.samples is not None:
                    lines = index.filter(pa.array((old_datasets == dataset) & ~removed & sample))
                    lines = lines.sort_by("offset").select(EEE_INDEX_SCHEMA.names)
                    copies[dataset] = (earlier.samples, lines, earlier.samples_bytes)
            self.writer.begin_pair(pair, begun, copies)

        # Fetch what changed, once, for both.
        parts = None
        if self.tables and (touched_table.any() or dirty):
            parts = PairParts(
                self.out,
                self.commit,
                pair.grade.id,
                pair.generate.id,
                self.tables,
                before.next_part if before is not None else 0,
            )
            drop = key_strings(index).filter(pa.array(removed))
            for part in previous_parts:
                if part.id in dirty:
                    parts.copy(part, drop)
        fetch = touched_table | touched_eee
        if fetch.any():
            wanted = ordered_rows(
                state,
                fetch,
                changes.dataset,
                changes.stale,
                changes.fp,
                {"to_table": touched_table, "to_eee": touched_eee},
            )
            store = self.plan.store
            located = PairRows(
                wanted,
                store.partition(GRADES, pair.grade.id),
                store.partition(SOLUTIONS, pair.generate.id),
                0,
            )
            to_table = wanted.column("to_table").to_numpy(zero_copy_only=False)
            to_eee = wanted.column("to_eee").to_numpy(zero_copy_only=False)
            offset = 0
            for batch in self.scan.batches(pair, located):
                k = batch.num_rows
                table = pa.Table.from_batches([batch])
                if parts is not None:
                    mask = to_table[offset : offset + k]
                    if mask.any():
                        parts.write(table if mask.all() else table.filter(pa.array(mask)))
                if self.writer is not None:
                    mask = to_eee[offset : offset + k]
                    if mask.any():
                        self.writer.write(table if mask.all() else table.filter(pa.array(mask)))
                offset += k
            self.rows_written += int(fetch.sum())
        placed = parts.close() if parts is not None else None

        # The new key index: the state, what each key is now, where its row went.
        earlier_rows = pa.array(np.where(changes.earlier >= 0, changes.earlier, 0))
        matched = changes.earlier >= 0
        columns: dict[str, Any] = {name: state.column(name) for name in STATE_SCHEMA.names}
        columns["dataset"] = changes.dataset
        columns["dataset_word"] = pa.array(changes.dataset_word, pa.uint64())
        columns["fp"] = pa.array(changes.fp, pa.uint64(), mask=~row)
        new_parts: list[PartRecord] = []
        part = np.full(n, -1, dtype=np.int64)
        if self.tables:
            keep = row & ~changes.new & matched & (not table_rebuild)
            if index.num_rows:
                earlier_part = pc.fill_null(index.column("part").take(earlier_rows), -1)
                earlier_part = earlier_part.to_numpy(zero_copy_only=False).astype(np.int64)
                keep &= ~np.isin(earlier_part, list(dirty)) & (earlier_part >= 0)
                part[keep] = earlier_part[keep]
            if placed is not None and placed.num_rows:
                where = pc.index_in(keys, value_set=key_strings(placed))
                found = pc.is_valid(where).to_numpy(zero_copy_only=False) & row
                at = pc.fill_null(where, 0).to_numpy(zero_copy_only=False).astype(np.int64)
                part[found] = placed.column("part").to_numpy()[at[found]]
            new_parts = [p for p in previous_parts if p.id not in dirty]
            new_parts += parts.records if parts is not None else []
        columns["part"] = pa.array(part, pa.int32(), mask=part < 0)
        evaluations: dict[str, EvaluationRecord] = {}
        eee_columns = [f.name for f in EEE_INDEX_FIELDS]
        if self.writer is not None:
            written = self.writer.end_pair()
            carried = index.select(eee_columns).take(earlier_rows) if index.num_rows else None
            fresh = np.zeros(n, dtype=bool)
            if written.num_rows:
                where = pc.index_in(keys, value_set=key_strings(written))
                fresh = pc.is_valid(where).to_numpy(zero_copy_only=False) & row
                at = pc.fill_null(where, 0).to_numpy(zero_copy_only=False).astype(np.int64)
                from_writer = written.select(eee_columns).take(pa.array(at))
            for name in eee_columns:
                field_type = KEY_INDEX_SCHEMA.field(name).type
                value = (
                    carried.column(name).combine_chunks()
                    if carried is not None
                    else pa.nulls(n, field_type)
                )
                value = pc.if_else(pa.array(matched & row), value, pa.scalar(None, field_type))
                if fresh.any():
                    value = pc.if_else(pa.array(fresh), from_writer.column(name), value)
                columns[name] = value
        else:
            for name in eee_columns:
                columns[name] = pa.nulls(n, KEY_INDEX_SCHEMA.field(name).type)
        new_index = pa.table(columns).select(KEY_INDEX_SCHEMA.names).cast(KEY_INDEX_SCHEMA)
        if self.writer is not None:
            evaluations = self.writer.records(
                new_index.filter(pa.array(row)), previous_evaluations, rewrite
            )

        selected = pc.is_valid(changes.dataset).to_numpy(zero_copy_only=False)
        rows_changed = (
            changes.any
            or table_rebuild
            or bool(dirty)
            or bool(rewrite)
            or before is None
            or evaluations != previous_evaluations
        )
        self.pairs_changed += rows_changed
        if rows_changed or moved:  # the index says where rows are: kept current
            path = f"{STATE_DIR}/{pair.grade.id}/{pair.generate.id}/keys-{unique_name()}.parquet"
            self.commit.stage_bytes(path, encode_index(new_index))
        else:
            assert before is not None
            path = before.keys
        self.scan.counts.pairs[(pair.grade.id, pair.generate.id)] = int(row.sum())
        graded = changes.graded
        return PairRecord(
            grade=pair.grade.id,
            generate=pair.generate.id,
            source=source,
            selection=self.selection,
            content=content_digest(state, row, selected, changes.fp, changes.dataset_word),
            table_signature=table_signature,
            eee=self.eee,
            keys=path,
            parts=new_parts,
            next_part=parts.next_part if parts is not None else (before.next_part if before else 0),
            counts=PairCounts(
                rows=int(row.sum()),
                graded=int((row & graded).sum()),
                stale=int((row & changes.stale).sum()),
                outside_selection=int((graded & ~selected).sum()),
            ),
            evaluations=evaluations,
        )

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
                self.selection,
            ]
        )
        if (
            before is not None
            and before.study_source == study_source
            and not broken & set(before.study_files.values())
        ):
            return study_source, before.study_files
        files: dict[str, str] = {}
        if self.tables:
            files |= self._statistics()
        judges = study_judges(plan, resamples=options.resamples, seed=options.seed)
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

    def _statistics(self) -> dict[str, str]:
        """The comparisons, rankings and variance components tables (`itemeval.statistics`)."""
        from itemeval.statistics import (
            analysis_options,
            comparisons_table,
            components_table,
            plan_statistics,
            rankings_table,
        )

        plan, options = self.plan, self.options
        stats = plan_statistics(plan, analysis_options(plan, options.resamples, options.seed))
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
            pairs_changed=self.pairs_changed,
            pairs_advanced=self.advanced,
            rows_written=self.rows_written,
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


def _has_eee(record: PairRecord) -> bool:
    return record.eee
