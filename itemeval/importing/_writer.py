"""The writer of an import: samples in, solution and grade fragments, items and a lock out.

Rows are buffered per condition, column by column, and written as a fragment every
`FLUSH_ROWS` rows (memory: one buffer per condition, never the file). Each sample is checked
against what came before: a second record of the same cell and metric is a
`duplicate_sample_id`, the same cell with another answer a `conflicting_answer`, the same item
id with another input or reference a `conflicting_item`; what was seen is kept as 64-bit hashes.
Items are spooled to a temporary file and written, at the end, as a dataset in the item format
(`imported/datasets/<name>/`), pinned in `dataset_locks.json` and snapshot like any dataset of a
study. `abort` removes every fragment written so far.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from itemeval.importing._items import ImportedItems, content_key, item_reference
from itemeval.importing._keys import KeySet
from itemeval.importing._model import (
    ID_SEPARATOR,
    GenerateFacts,
    GradeFacts,
    Rejection,
    Sample,
    SampleBatch,
)
from itemeval.storage import Location
from itemeval.store import GRADE_SCHEMA, SOLUTION_SCHEMA, TIMESTAMP, StudyStore

FLUSH_ROWS = 50_000


@dataclass
class _Buffer:
    columns: dict[str, list[Any]]
    rows: int = 0


def _const(n: int, value: Any, type_: pa.DataType) -> pa.Array:
    """`value` (None: null) repeated `n` times."""
    return pa.nulls(n, type_) if value is None else pa.repeat(pa.scalar(value, type_), n)


def _new_buffer(schema: pa.Schema) -> _Buffer:
    return _Buffer({name: [] for name in schema.names})


class ImportWriter:
    """Write the samples of one import into `store` (see the module doc)."""

    def __init__(self, store: StudyStore, import_id: str, *, flush_rows: int = FLUSH_ROWS):
        self.store = store
        self.import_id = import_id
        self.flush_rows = flush_rows
        self.written: list[Location] = []
        self.generate: dict[str, GenerateFacts] = {}
        self.grade: dict[str, GradeFacts] = {}
        self.rejected: Counter[str] = Counter()
        self.samples = 0
        self.solutions = 0
        self.grades = 0
        self.epochs = 1
        self.now = datetime.now(UTC)
        self._gen_ids: dict[GenerateFacts, str] = {}
        self._grade_ids: dict[GradeFacts, str] = {}
        self._grade_keys = KeySet()  # (grade, gen, item, epoch): one grade a cell and metric
        self._cells = KeySet()  # (gen, item, epoch): the cells with a solution
        self._answers = KeySet()  # (gen, item, epoch, answer): their answers
        self._tables: dict[tuple[str, str], list[pa.Table]] = {}  # batches not yet written
        self.file_hashes: dict[str, str] = {}  # file name -> sha256 (the rows' request_hash)
        self._solutions: dict[str, _Buffer] = {}
        self._grades: dict[str, _Buffer] = {}
        self._spool_dir = tempfile.mkdtemp(prefix="itemeval-import-")
        self.items = ImportedItems(store, self._spool_dir)

    # -- samples ---------------------------------------------------------------------------
    def add(self, sample: Sample) -> Rejection | None:
        """Buffer one sample; a rejection if it conflicts with one already added."""
        gen_id, grade_id = self._ids(sample.gen, sample.grade)
        problem = self._item(sample)
        if problem is not None:
            return problem
        cell = (gen_id, sample.item_id, sample.epoch)
        grade_key = hash((grade_id, *cell))
        if grade_key in self._grade_keys:
            return self._reject(sample, "duplicate_sample_id", f"sample {sample.item_id}")
        new_cell = hash(cell) not in self._cells
        text_hash = hashlib.sha256(sample.answer.encode("utf-8")).hexdigest()[:16]
        answer_key = hash((*cell, text_hash))
        if not new_cell and answer_key not in self._answers:
            return self._reject(sample, "conflicting_answer", f"sample {sample.item_id}")
        self._grade_keys.add(grade_key)
        provenance = self._provenance(sample.record_id)
        if new_cell:
            self._cells.add(hash(cell))
            self._answers.add(answer_key)
            self._solution_row(gen_id, sample, text_hash, provenance)
        self._grade_row(grade_id, gen_id, sample, text_hash)
        self.samples += 1
        self.epochs = max(self.epochs, sample.epoch + 1)
        return None

    def _ids(self, gen: GenerateFacts, grade: GradeFacts) -> tuple[str, str]:
        gen_id = self._gen_ids.get(gen)
        if gen_id is None:
            gen_id = self._gen_ids[gen] = gen.id
            self.generate[gen_id] = gen
        grade_id = self._grade_ids.get(grade)
        if grade_id is None:
            grade_id = self._grade_ids[grade] = grade.id
            self.grade[grade_id] = grade
        return gen_id, grade_id

    def _provenance(self, record_id: str) -> str:
        """`request_hash` of an imported solution: the sha256 of the file its record is in
        (`request_id` holds the record's place: `<file>:<line>`)."""
        return self.file_hashes.get(record_id.rpartition(":")[0], "")

    def add_batch(self, batch: SampleBatch) -> list[Rejection]:
        """Buffer a batch of samples of one evaluation (the fast path of Every Eval Ever
        files); the rows that conflict with earlier ones are returned as rejections."""
        gen_id, grade_id = self._ids(batch.gen, batch.grade)
        table = batch.table
        n = table.num_rows
        ids = table.column("item_id").to_pylist()
        epochs = table.column("epoch").to_pylist()
        answers = table.column("answer").to_pylist()
        records = table.column("record_id").to_pylist()
        keep = np.ones(n, dtype=bool)
        rejected: list[Rejection] = []
        self._items_of_batch(batch, ids, keep, rejected)
        grade_keys = np.fromiter(
            (hash((grade_id, gen_id, i, e)) for i, e in zip(ids, epochs, strict=True)),
            dtype=np.int64,
            count=n,
        )
        cell_keys = np.fromiter(
            (hash((gen_id, i, e)) for i, e in zip(ids, epochs, strict=True)),
            dtype=np.int64,
            count=n,
        )
        hashes = [hashlib.sha256(a.encode("utf-8")).hexdigest()[:16] for a in answers]
        answer_keys = np.fromiter(
            (hash((gen_id, i, e, h)) for i, e, h in zip(ids, epochs, hashes, strict=True)),
            dtype=np.int64,
            count=n,
        )
        candidates = np.flatnonzero(keep)
        new_grade = self._grade_keys.add_many(grade_keys[candidates])
        for index in candidates[~new_grade]:
            rejected.append(_rejection(records[index], "duplicate_sample_id", ids[index]))
        keep[candidates[~new_grade]] = False
        candidates = np.flatnonzero(keep)
        new_cell = self._cells.add_many(cell_keys[candidates])
        new_answer = self._answers.add_many(answer_keys[candidates])
        conflict = ~new_cell & new_answer
        for index in candidates[conflict]:
            rejected.append(_rejection(records[index], "conflicting_answer", ids[index]))
        keep[candidates[conflict]] = False
        solution_rows = candidates[new_cell]
        grade_rows = np.flatnonzero(keep)
        text_hash = pa.array(hashes, pa.string())
        self._add_solutions(gen_id, batch, table.take(solution_rows), text_hash.take(solution_rows))
        self._add_grades(
            grade_id, gen_id, batch, table.take(grade_rows), text_hash.take(grade_rows)
        )
        self.samples += len(grade_rows)
        if len(grade_rows):
            self.epochs = max(self.epochs, int(np.max(np.asarray(epochs)[grade_rows])) + 1)
        return rejected

    def _items_of_batch(
        self, batch: SampleBatch, ids: list[str], keep: np.ndarray, rejected: list[Rejection]
    ) -> None:
        """Check each row's item against those seen (new items go to the spool)."""
        spool = self.items.spool(batch.dataset)
        inputs = batch.table.column("input").to_pylist()
        references = batch.table.column("reference").to_pylist()
        choices = batch.table.column("choices").to_pylist()
        known_items = spool.items
        for index, item_id in enumerate(ids):
            key = hash(item_id.casefold())
            content = content_key(inputs[index], item_reference(references[index], choices[index]))
            known = known_items.get(key)
            if known == content:
                continue
            if known is not None:
                record = batch.table.column("record_id")[index].as_py()
                rejected.append(_rejection(record, "conflicting_item", item_id))
                keep[index] = False
                continue
            row = batch.table.slice(index, 1).to_pylist()[0]
            sample = Sample(
                gen=batch.gen,
                grade=batch.grade,
                dataset=batch.dataset,
                item_id=item_id,
                epoch=0,
                input=inputs[index],
                reference=references[index],
                answer="",
                score=0.0,
                correct=False,
                record_id=row["record_id"],
                choices=row.get("choices"),
                item_extras={"sourceId": item_id.partition(ID_SEPARATOR)[2]},
            )
            problem = self._item(sample)
            if problem is not None:
                rejected.append(problem)
                keep[index] = False

    def _add_solutions(
        self, gen_id: str, batch: SampleBatch, t: pa.Table, text_hash: pa.Array
    ) -> None:
        n = t.num_rows
        if n == 0:
            return
        self.solutions += n

        const = partial(_const, n)

        columns = {
            "item_id": t.column("item_id"),
            "epoch": t.column("epoch"),
            "status": const("ok", pa.string()),
            "error_code": const(None, pa.string()),
            "error_message": const(None, pa.string()),
            "text": t.column("answer"),
            "text_hash": text_hash,
            "finish_reason": t.column("finish_reason"),
            "input_tokens": t.column("input_tokens"),
            "output_tokens": t.column("output_tokens"),
            "cached_input_tokens": t.column("cached_input_tokens"),
            "reasoning_tokens": t.column("reasoning_tokens"),
            "usd": const(0.0, pa.float64()),
            "latency_ms": t.column("latency_ms"),
            "model": const(batch.gen.model_id, pa.string()),
            **self._imported_call(t, batch.file_sha256),
        }
        self._queue("solutions", gen_id, columns, SOLUTION_SCHEMA)

    def _add_grades(
        self, grade_id: str, gen_id: str, batch: SampleBatch, t: pa.Table, text_hash: pa.Array
    ) -> None:
        n = t.num_rows
        if n == 0:
            return
        self.grades += n

        const = partial(_const, n)

        columns = {
            "gen_condition_id": const(gen_id, pa.string()),
            "item_id": t.column("item_id"),
            "epoch": t.column("epoch"),
            "status": const("ok", pa.string()),
            "score": t.column("score"),
            "correct": t.column("correct"),
            "extracted": const(None, pa.string()),
            "parse_ok": const(True, pa.bool_()),
            "parse_code": const(None, pa.string()),
            "reasoning": const(None, pa.string()),
            "judge_text": const(None, pa.string()),
            "solution_hash": text_hash,
            "error_code": const(None, pa.string()),
            "error_message": const(None, pa.string()),
            "input_tokens": const(0, pa.int64()),
            "output_tokens": const(0, pa.int64()),
            "cached_input_tokens": const(0, pa.int64()),
            "reasoning_tokens": const(0, pa.int64()),
            "usd": const(0.0, pa.float64()),
            "latency_ms": const(0.0, pa.float64()),
            "grader": const(batch.grade.metric, pa.string()),
            **self._imported_call(t, None),
        }
        self._queue("grades", grade_id, columns, GRADE_SCHEMA)

    def _imported_call(self, t: pa.Table, request_hash: str | None) -> dict[str, pa.Array]:
        """The call columns of imported rows (no call was made here): each row's record id as
        its request id, this import as its run."""
        const = partial(_const, t.num_rows)
        return {
            "request_id": t.column("record_id"),
            "attempts": const(0, pa.int32()),
            "cached": const(False, pa.bool_()),
            "tier": const("live", pa.string()),
            "request_hash": const(request_hash, pa.string()),
            "run_id": const(self.import_id, pa.string()),
            "written_at": const(self.now, TIMESTAMP),
        }

    def _queue(
        self, stage: str, condition: str, columns: dict[str, Any], schema: pa.Schema
    ) -> None:
        arrays = [columns[f.name] for f in schema]
        table = pa.Table.from_arrays(
            [
                a.cast(f.type) if a.type != f.type else a
                for a, f in zip(arrays, schema, strict=True)
            ],
            schema=schema,
        )
        queued = self._tables.setdefault((stage, condition), [])
        queued.append(table)
        if sum(t.num_rows for t in queued) >= self.flush_rows:
            self._write(stage, condition, schema)

    def _write(self, stage: str, condition: str, schema: pa.Schema) -> None:
        queued = self._tables.pop((stage, condition), [])
        if not queued:
            return
        table = pa.concat_tables(queued).combine_chunks()
        name = self.store.write(stage, condition, table)
        if name is not None:
            self.written.append(self.store.partition(stage, condition).join(name))

    def _reject(self, sample: Sample, reason: str, detail: str) -> Rejection:
        file, _, line = sample.record_id.rpartition(":")
        return Rejection(
            reason, file or sample.record_id, int(line) if line.isdigit() else None, detail
        )

    def _solution_row(self, gen_id: str, s: Sample, text_hash: str, provenance: str) -> None:
        row = {
            "item_id": s.item_id,
            "epoch": s.epoch,
            "status": "ok",
            "error_code": None,
            "error_message": None,
            "text": s.answer,
            "text_hash": text_hash,
            "finish_reason": s.finish_reason,
            "input_tokens": s.input_tokens,
            "output_tokens": s.output_tokens,
            "cached_input_tokens": s.cached_input_tokens,
            "reasoning_tokens": s.reasoning_tokens,
            "usd": s.usd,
            "latency_ms": s.latency_ms,
            "model": s.gen.model_id,
        }
        self.solutions += 1
        self._append("solutions", gen_id, self._solutions, SOLUTION_SCHEMA, row, s, provenance)

    def _grade_row(self, grade_id: str, gen_id: str, s: Sample, text_hash: str) -> None:
        row = {
            "gen_condition_id": gen_id,
            "item_id": s.item_id,
            "epoch": s.epoch,
            "status": "ok",
            "score": s.score,
            "correct": s.correct,
            "extracted": s.extracted,
            "parse_ok": True,
            "parse_code": None,
            "reasoning": s.reasoning,
            "judge_text": None,
            "solution_hash": text_hash,
            "error_code": None,
            "error_message": None,
            "input_tokens": 0,
            "output_tokens": 0,
            "cached_input_tokens": 0,
            "reasoning_tokens": 0,
            "usd": 0.0,
            "latency_ms": 0.0,
            "grader": s.grade.metric,
        }
        self.grades += 1
        self._append("grades", grade_id, self._grades, GRADE_SCHEMA, row, s, None)

    def _append(
        self,
        stage: str,
        condition: str,
        buffers: dict[str, _Buffer],
        schema: pa.Schema,
        row: dict[str, Any],
        s: Sample,
        request_hash: str | None,
    ) -> None:
        """One imported row into its condition's buffer, with the call fields every imported
        row has (no call was made here), flushed once the buffer holds `flush_rows`."""
        buffer = buffers.get(condition) or buffers.setdefault(condition, _new_buffer(schema))
        c = buffer.columns
        for name, value in row.items():
            c[name].append(value)
        c["request_id"].append(s.record_id)
        c["attempts"].append(0)
        c["cached"].append(False)
        c["tier"].append("live")
        c["request_hash"].append(request_hash)
        c["run_id"].append(self.import_id)
        c["written_at"].append(self.now)
        buffer.rows += 1
        if buffer.rows >= self.flush_rows:
            self._flush(stage, condition, buffer, schema)

    def _flush(self, stage: str, condition: str, buffer: _Buffer, schema: pa.Schema) -> None:
        if buffer.rows == 0:
            return
        arrays = [pa.array(buffer.columns[f.name], f.type) for f in schema]
        self._tables.setdefault((stage, condition), []).append(
            pa.Table.from_arrays(arrays, schema=schema)
        )
        self._write(stage, condition, schema)
        for values in buffer.columns.values():
            values.clear()
        buffer.rows = 0

    def flush(self) -> None:
        for condition, buffer in self._solutions.items():
            self._flush("solutions", condition, buffer, SOLUTION_SCHEMA)
        for condition, buffer in self._grades.items():
            self._flush("grades", condition, buffer, GRADE_SCHEMA)
        for stage, condition in list(self._tables):
            self._write(stage, condition, SOLUTION_SCHEMA if stage == "solutions" else GRADE_SCHEMA)

    # -- items -----------------------------------------------------------------------------
    def _item(self, s: Sample) -> Rejection | None:
        return self.items.check(s, self._reject)

    def write_datasets(self, study_root: Location) -> dict[str, str]:
        return self.items.write(study_root)

    @property
    def assumed_modality(self) -> int:
        return self.items.assumed

    def abort(self) -> None:
        for location in self.written:
            location.delete()
        self.written = []
        self.close()

    def close(self) -> None:
        self.items.close()
        if os.path.isdir(self._spool_dir):
            os.rmdir(self._spool_dir)


def _rejection(record_id: str, reason: str, item_id: str) -> Rejection:
    file, _, line = record_id.rpartition(":")
    return Rejection(
        reason, file or record_id, int(line) if line.isdigit() else None, f"sample {item_id}"
    )
