"""One condition pair's files brought up to date (see `_study` for the whole export).

The pair's keys now (`_table.pairs`: its key index advanced by the fragments written since, or
the store's cells) are lined up with its key index (`_delta.compare`); rows new or changed are
fetched once from the store and handed to the long table's parts (`_parts`) and the Every Eval
Ever writer (`_eee.writer`); parts and samples files that held a changed or removed row are
replaced; the new key index is staged. A pair whose partitions hold the fragments they held at
the last export (and whose selection and options are the same) is not read at all.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.export._delta import (
    INDEX_SUFFIX,
    KEY_INDEX_SCHEMA,
    PairChanges,
    compare,
    encode_index,
    read_index,
)
from itemeval.export._eee.writer import EEE_INDEX_FIELDS, EEE_INDEX_SCHEMA, EeeWriter
from itemeval.export._manifest import (
    PART_ROWS,
    STATE_DIR,
    Commit,
    EvaluationRecord,
    PairCounts,
    PairRecord,
    PartRecord,
)
from itemeval.export._outputs import OutputDir
from itemeval.export._parts import PairParts
from itemeval.ids import canonical_json
from itemeval.planning import Plan
from itemeval.results import (
    LONG_TABLE_SCHEMA,
    STATE_SCHEMA,
    LongTableScan,
    Pair,
    PairRows,
    advance_state,
    content_digest,
    holding,
    key_strings,
    ordered_rows,
    read_state,
)
from itemeval.storage import unique_name
from itemeval.store import GRADES, SOLUTIONS
from itemeval.store.fragments import FragmentInfo

#: A pair's newest part smaller than this is filled up by the next export that adds rows.
SMALL_PART_ROWS = PART_ROWS // 20
#: A pair's state is advanced from its key index when the fragments written since weigh at
#: most this (else it is read from the store's cells: summaries and newer fragments).
ADVANCE_BYTES = 256 << 20
#: How the parts are cut and what their rows are (a change rewrites every part).
_LAYOUT = ["parts/1"]


def digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()[:32]


class PairUpdate:
    """What one export does to each pair (see the module doc), and what it counted."""

    def __init__(
        self,
        plan: Plan,
        out: OutputDir,
        commit: Commit,
        scan: LongTableScan,
        writer: EeeWriter | None,
        *,
        tables: list[str],
        include_ungraded: bool,
        now: str,
        listings: dict[tuple[str, str], list[FragmentInfo]],
        seen: dict[str, set[str]],
    ) -> None:
        self.plan = plan
        self.out = out
        self.commit = commit
        self.scan = scan
        self.writer = writer
        self.tables = tables
        self.eee = writer is not None
        self.include_ungraded = include_ungraded
        self.now = now
        self.listings = listings
        self.seen = seen
        self.selection = digest(
            [[d.name, d.fingerprint, d.selected] for d in plan.datasets] + [plan.design.epochs]
        )
        self.gen_ranges: dict[str, list[tuple[str, str]] | None] = {}
        self.rows_written = 0
        self.pairs_changed = 0
        self.advanced = 0  # pairs whose state was advanced from their key index

    def pair(
        self, pair: Pair, before: PairRecord | None, sources: dict[tuple[str, str], str]
    ) -> PairRecord:
        grade, generate = pair.grade.id, pair.generate.id
        source = digest(
            [sources[(GRADES.name, grade)], sources[(SOLUTIONS.name, generate)], self.selection]
        )
        table_signature = (
            digest(
                [
                    self.tables,
                    self.include_ungraded,
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
            include_ungraded=self.include_ungraded,
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
        datasets, old_datasets = changes.dataset, index.column("dataset")
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
            present = _names(datasets, row)
            rebuild = {
                d
                for d in present
                if d not in previous_evaluations
                or previous_evaluations[d].signature != self.writer.signatures(pair, d)[0]
            }
            touched_eee = changes.new | (row & _among(datasets, rebuild))
            rewrite = rebuild | _names(datasets, touched_eee)
            rewrite |= _names(old_datasets, removed) & present
            for dataset in rewrite:
                earlier = previous_evaluations.get(dataset)
                if dataset in rebuild or earlier is None:
                    begun[dataset] = self.now
                    continue
                begun[dataset] = earlier.begun
                if earlier.samples is not None:
                    lines = index.select(EEE_INDEX_SCHEMA.names).filter(
                        pa.array(_among(old_datasets, {dataset}) & ~removed & sample)
                    )
                    offsets = lines.column("offset").to_numpy()
                    if (offsets[1:] < offsets[:-1]).any():  # in file order (usually already)
                        lines = lines.sort_by("offset")
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
            for previous in previous_parts:
                if previous.id in dirty:
                    parts.copy(previous, drop)
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
                earlier_part = _at(index.select(["part"]), changes.earlier)["part"]
                earlier_part = pc.fill_null(earlier_part, -1)
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
            carried = _at(index.select(eee_columns), changes.earlier) if index.num_rows else None
            fresh = np.zeros(n, dtype=bool)
            if written.num_rows:
                where = pc.index_in(keys, value_set=key_strings(written))
                fresh = pc.is_valid(where).to_numpy(zero_copy_only=False) & row
                at = pc.fill_null(where, 0).to_numpy(zero_copy_only=False).astype(np.int64)
                # The writer's rows in the order of the keys they fill (`replace_with_mask`).
                from_writer = written.select(eee_columns).take(pa.array(at[fresh]))
            for name in eee_columns:
                field_type = KEY_INDEX_SCHEMA.field(name).type
                value = (
                    carried.column(name).combine_chunks()
                    if carried is not None
                    else pa.nulls(n, field_type)
                )
                value = pc.if_else(pa.array(matched & row), value, pa.scalar(None, field_type))
                if fresh.any():
                    value = pc.replace_with_mask(
                        value, pa.array(fresh), from_writer.column(name).combine_chunks()
                    )
                columns[name] = value
        else:
            for name in eee_columns:
                columns[name] = pa.nulls(n, KEY_INDEX_SCHEMA.field(name).type)
        new_index = pa.table(columns).select(KEY_INDEX_SCHEMA.names).cast(KEY_INDEX_SCHEMA)
        if self.writer is not None:
            kept = new_index.select(["dataset", *EEE_INDEX_SCHEMA.names])
            evaluations = self.writer.records(
                kept.filter(pa.array(row)), previous_evaluations, rewrite
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
            name = f"keys-{unique_name()}{INDEX_SUFFIX}"
            path = f"{STATE_DIR}/{pair.grade.id}/{pair.generate.id}/{name}"
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


def _names(values: pa.Array | pa.ChunkedArray, where: np.ndarray) -> set[str]:
    """The distinct strings of `values` where `where` (nulls left out)."""
    if not where.any():
        return set()
    found = pc.unique(values.filter(pa.array(where))).to_pylist()
    return {v for v in found if v is not None}


def _among(values: pa.Array | pa.ChunkedArray, names: set[str]) -> np.ndarray:
    """Whether each of `values` is one of `names` (null: no)."""
    if not names:
        return np.zeros(len(values), dtype=bool)
    found = pc.is_in(values, value_set=pa.array(sorted(names), pa.string()))
    return pc.fill_null(found, False).to_numpy(zero_copy_only=False)


def _at(table: pa.Table, earlier: np.ndarray) -> pa.Table:
    """Row `earlier[i]` of `table` for each key i (a row of nulls where `earlier[i] < 0`)."""
    m = table.num_rows
    if len(earlier) >= m and (earlier[:m] == np.arange(m)).all() and (earlier[m:] < 0).all():
        # The index's rows in their order, then new keys (a state advanced from it): no gather.
        pad = pa.table(
            {f.name: pa.nulls(len(earlier) - m, f.type) for f in table.schema}, schema=table.schema
        )
        return pa.concat_tables([table, pad]).combine_chunks()
    return table.take(pa.array(earlier, mask=earlier < 0))
