# One piece: `EeeWriter` is one writer over one condition pair's files: what changed, what is
# kept, and the totals, share the state of a single pass.
"""Every Eval Ever files of one condition pair, written from what changed.

An evaluation is one pair on one dataset: an aggregate record and a samples file (one JSON line
per final grade). An export hands the writer the pair's rows that are new or changed, in the
long table's order, and for every evaluation it must rewrite, the lines of the previous samples
file that are still current (their byte ranges, from the key index). The new samples file is
those bytes copied as they are, then the new lines: no record is made again for a row that did
not change, and a superseded row's line is left out. The aggregate is computed from the key
index (per-item tallies, the exclusions, the latest grade time), never from the rows.

A samples file's lines carry the evaluation's `evaluation_id`, which ends with the time the
file was begun (`EvaluationRecord.begun`): kept while lines are only added, so the copied lines
stay true; renewed when the evaluation is made again from nothing. `retrieved_timestamp` is
the time of the export that wrote the aggregate.

Memory: one pair's per-item tallies and one batch of records; copies stream 8 MB at a time.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.datasets import WorkItem
from itemeval.export._eee.aggregate import EvaluationTotals, build_aggregate
from itemeval.export._eee.records import (
    MAX_SAMPLE_IDS,
    SAMPLE_COLUMNS,
    DatasetSourceInfo,
    Evaluation,
    RecordContext,
    build_instance,
    item_choices,
    sample_mask,
)
from itemeval.export._manifest import (
    EEE_DIR,
    TAIL_BYTES,
    AppendedFile,
    Commit,
    EvaluationRecord,
)
from itemeval.export._outputs import OutputDir, OutputFile
from itemeval.ids import canonical_json
from itemeval.planning import Plan
from itemeval.results import Pair
from itemeval.statistics import DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_proportion
from itemeval.templates import Template

#: Rendered prompts remembered (see `EeeWriter._item`).
RENDERED_ITEMS = 200_000
_COPY_BYTES = 8 << 20
_ENCODE = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode
_EXCLUSION_COLUMNS = [
    "grade_status",
    "grade_error_code",
    "parse_ok",
    "parse_code",
    "grade_stale",
]
#: What the key index keeps of each row for Every Eval Ever.
EEE_INDEX_FIELDS = [
    pa.field("sample", pa.bool_()),  # a line of the samples file (a final grade)
    pa.field("correct", pa.bool_()),
    pa.field("graded_at", pa.timestamp("us", tz="UTC")),
    pa.field("excluded", pa.string()),  # why a grade is not a sample
    pa.field("offset", pa.int64()),  # the line's bytes in the samples file
    pa.field("length", pa.int64()),
]
EEE_INDEX_SCHEMA = pa.schema(
    [pa.field("item_id", pa.string()), pa.field("epoch", pa.int32()), *EEE_INDEX_FIELDS]
)


@dataclass
class _Samples:
    """One evaluation's samples file while it is written."""

    evaluation: Evaluation
    target: str
    file: OutputFile | AppendedFile
    checksum: bool = True  # sha256 of the whole file (0.3.0 records carry it)
    hasher: Any = field(default_factory=hashlib.sha256)
    rows: int = 0
    bytes: int = 0
    moved: pa.Table = field(default_factory=lambda: EEE_INDEX_SCHEMA.empty_table())
    tail: builtins.bytes = b""  # the file's last `TAIL_BYTES` (`bytes` is a field here)

    def add(self, data: builtins.bytes, rows: int) -> int:
        """Append; the offset the data starts at."""
        at = self.bytes
        self.file.write(data)
        self.tail = (self.tail + data)[-TAIL_BYTES:]
        if self.checksum:
            self.hasher.update(data)
        self.bytes += len(data)
        self.rows += rows
        return at


@dataclass
class EeeTotals:
    evaluations: int = 0
    samples: int = 0
    excluded: dict[str, int] = field(default_factory=dict)


class EeeWriter:
    """Every Eval Ever records of one export, pair by pair (see the module doc)."""

    def __init__(
        self,
        out: OutputDir,
        commit: Commit,
        plan: Plan,
        context: RecordContext,
        *,
        resamples: int = DEFAULT_RESAMPLES,
        seed: int = DEFAULT_SEED,
    ) -> None:
        self.out = out
        self.commit = commit
        self.context = context
        self.resamples = resamples
        self.seed = seed
        self.plan = plan
        self._clusters: tuple[pa.Array, np.ndarray] | None = None
        study = plan.study
        self._datasets = {
            d.name: DatasetSourceInfo(
                name=d.name,
                items=d.selected,
                fingerprint=d.fingerprint,
                path=d.handle.source.path,
                format=d.handle.source.format,
                split=d.handle.source.split,
                revision=d.handle.source.revision,
            )
            for d in plan.datasets
        }
        self._endpoint_kinds = {name: str(e.kind) for name, e in study.endpoints.items()}
        self._prompts: dict[str, Template] = {c.id: c.prompt for c in plan.design.generate}
        self._rubrics = {c.id: c.rubric.text for c in plan.design.grade if c.rubric is not None}
        # (prompt sha256, item id) -> (rendered prompt, choices): every epoch, grader and model
        # that shares a prompt saw the same text. Bounded (an LRU).
        self._items: OrderedDict[tuple[str, str], tuple[str | None, list[str] | None]] = (
            OrderedDict()
        )
        # 0.3.0 records carry their samples file's sha256; 0.2.0 records do not.
        self._checksums = context.version == "0.3.0"
        self._pair: Pair | None = None
        self._begun: dict[str, str] = {}
        self._open: dict[str, _Samples] = {}
        self._copy: dict[str, tuple[str, pa.Table, int]] = {}
        self._rows: list[pa.Table] = []

    # -- what an evaluation is made of -------------------------------------------------------
    def knows(self, dataset: str) -> bool:
        """Whether `dataset` is one of the study's."""
        return dataset in self._datasets

    def evaluation(self, pair: Pair, dataset: str, begun: str | None = None) -> Evaluation:
        generate, grade = pair.generate, pair.grade
        return Evaluation(
            context=self.context,
            generate=generate,
            grade=grade,
            dataset=self._datasets[dataset],
            endpoint_kind=self._endpoint_kinds.get(generate.endpoint, ""),
            prompt_text=self._prompts[generate.id].text,
            rubric_text=self._rubrics.get(grade.id),
            begun=begun,
        )

    def signatures(self, pair: Pair, dataset: str) -> tuple[str, str]:
        """(what its lines depend on besides the rows, what its aggregate depends on besides
        the samples), as digests."""
        e = self.evaluation(pair, dataset)
        c = self.context
        # What `build_instance` and the rendered prompt read.
        lines = {
            "records": [c.study, c.version],
            "generate": list(_facets(e.generate)),
            "grade": list(_facets(e.grade)),
            "dataset": e.dataset.name,
            "prompt": e.prompt_text,
        }
        d = e.dataset
        aggregate = lines | {
            "source": [d.fingerprint, d.path, d.format, d.split, d.revision, d.items],
            "model": [e.endpoint_kind, e.rubric_text, c.epochs],
            "records": [c.study, c.version, c.organization, c.relationship],
            "interval": [self.resamples, self.seed, self.plan.study.analysis.cluster_by],
        }
        return _digest(lines), _digest(aggregate)

    # -- one pair ------------------------------------------------------------------------------
    def begin_pair(
        self,
        pair: Pair,
        begun: dict[str, str],
        copies: dict[str, tuple[str, pa.Table, int]],
    ) -> None:
        """Start a pair. `begun`: per dataset to rewrite, the time its evaluation began;
        `copies`: per dataset, the previous samples file, the index rows of its lines that
        stay (`EEE_INDEX_SCHEMA`, in file order) and its size. When they are the whole file
        (nothing superseded) and it is on local disk, new lines are added to it where it is;
        else it is copied."""
        self._pair = pair
        self._begun = dict(begun)
        self._copy = dict(copies)
        self._open = {}
        self._rows = []

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        """New or changed long-table rows of the pair (of datasets being rewritten)."""
        assert self._pair is not None, "begin_pair first"
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        n = table.num_rows
        if n == 0:
            return
        final = pc.fill_null(sample_mask(table), False)
        graded = pc.fill_null(table.column("graded"), False)
        excluded = pa.nulls(n, pa.string())
        left_out = pc.and_(graded, pc.invert(final))
        if pc.any(left_out).as_py():
            # Grades that are not final are only counted (few rows: a Python loop is fine).
            reasons = [
                _exclusion(row) if out else None
                for row, out in zip(
                    table.select(_EXCLUSION_COLUMNS).to_pylist(),
                    left_out.to_pylist(),
                    strict=True,
                )
            ]
            excluded = pa.array(reasons, pa.string())
        offsets = np.full(n, -1, dtype=np.int64)
        lengths = np.zeros(n, dtype=np.int64)
        chosen = np.flatnonzero(final.to_numpy(zero_copy_only=False))
        if len(chosen):
            samples = table.take(pa.array(chosen)).select(SAMPLE_COLUMNS)
            columns = [samples.column(name).to_pylist() for name in SAMPLE_COLUMNS]
            pending: dict[str, list[tuple[int, bytes]]] = {}
            for index, values in zip(chosen.tolist(), zip(*columns, strict=True), strict=True):
                row = dict(zip(SAMPLE_COLUMNS, values, strict=True))
                state = self._samples(row["dataset"])
                formatted, choices = self._item(row)
                record = build_instance(state.evaluation, row, formatted, choices)
                line = _ENCODE(record).encode("utf-8") + b"\n"
                pending.setdefault(row["dataset"], []).append((index, line))
            for dataset, lines in pending.items():
                state = self._open[dataset]
                at = state.add(b"".join(line for _, line in lines), len(lines))
                for index, line in lines:
                    offsets[index] = at
                    lengths[index] = len(line)
                    at += len(line)
        self._rows.append(
            pa.table(
                {
                    "item_id": table.column("item_id"),
                    "epoch": table.column("epoch"),
                    "sample": final,
                    "correct": pc.if_else(final, table.column("correct"), None),
                    "graded_at": pc.if_else(final, table.column("graded_at"), None),
                    "excluded": excluded,
                    "offset": pa.array(offsets, mask=offsets < 0),
                    "length": pa.array(lengths, mask=offsets < 0),
                },
                schema=EEE_INDEX_SCHEMA,
            )
        )

    def end_pair(self) -> pa.Table:
        """Finish the pair's samples files (copying the kept lines of those with no new line);
        the index rows of every line written or moved (`EEE_INDEX_SCHEMA`)."""
        for dataset in self._begun:
            copied = self._copy.get(dataset)
            if copied is not None and copied[1].num_rows:
                self._samples(dataset)
        rows = list(self._rows)
        for dataset, (_, kept, _) in self._copy.items():
            state = self._open.get(dataset)
            if state is not None and kept.num_rows:
                rows.append(state.moved)
        self._rows = []
        if not rows:
            return EEE_INDEX_SCHEMA.empty_table()
        return pa.concat_tables(rows)

    def records(
        self, index: pa.Table, previous: dict[str, EvaluationRecord], rewrite: set[str]
    ) -> dict[str, EvaluationRecord]:
        """The pair's evaluations after the export: the samples files of `rewrite` committed
        and every aggregate whose samples or inputs changed written, from the new key index
        (`dataset` and `EEE_INDEX_SCHEMA` columns)."""
        assert self._pair is not None
        pair = self._pair
        out: dict[str, EvaluationRecord] = {}
        datasets = set(pc.unique(index.column("dataset")).to_pylist()) if index.num_rows else set()
        datasets.discard(None)
        for dataset in sorted(datasets | set(previous)):
            if dataset not in datasets:
                continue  # no row left: its files go (the caller deletes what is not named)
            signature, aggregate_signature = self.signatures(pair, dataset)
            before = previous.get(dataset)
            state = self._open.pop(dataset, None)
            if dataset not in rewrite and before is not None:
                if before.aggregate_signature == aggregate_signature:
                    out[dataset] = before
                    continue
                record = before.model_copy(update={"aggregate_signature": aggregate_signature})
            else:
                record = EvaluationRecord(
                    dataset=dataset,
                    signature=signature,
                    aggregate_signature=aggregate_signature,
                    begun=self._begun.get(dataset, self.context.retrieved),
                )
                if state is not None:
                    self.commit.done(state.file, state.target)
                    record.samples = state.target
                    record.samples_rows = state.rows
                    record.samples_bytes = state.bytes
                    record.checksum = state.hasher.hexdigest() if state.checksum else None
                    record.tail = hashlib.sha256(state.tail).hexdigest()
            rows = (  # one dataset (the usual case): no copy
                index if len(datasets) == 1 else index.filter(pc.equal(index["dataset"], dataset))
            )
            record.excluded = _excluded(rows)
            evaluation = self.evaluation(pair, dataset, record.begun)
            if record.samples is None or record.samples_rows == 0:
                record.aggregate = None
                record.samples = None
                out[dataset] = record
                continue
            totals = self._totals(evaluation, rows, record)
            text = json.dumps(build_aggregate(evaluation, totals), indent=2, ensure_ascii=False)
            record.aggregate = f"{EEE_DIR}/{evaluation.aggregate_path}"
            self.commit.stage_bytes(record.aggregate, (text + "\n").encode("utf-8"))
            out[dataset] = record
        for state in self._open.values():  # opened, but the dataset has no row left
            state.file.discard()
        self._open = {}
        self._pair = None
        return out

    def abort(self) -> None:
        for state in self._open.values():
            state.file.discard()
        self._open = {}

    # -- helpers -------------------------------------------------------------------------------
    def _samples(self, dataset: str) -> _Samples:
        """The dataset's samples file of this pair, begun with the kept lines copied."""
        state = self._open.get(dataset)
        if state is not None:
            return state
        assert self._pair is not None
        begun = self._begun.setdefault(dataset, self.context.retrieved)
        evaluation = self.evaluation(self._pair, dataset, begun)
        target = f"{EEE_DIR}/{evaluation.samples_path}"
        copied = self._copy.get(dataset)
        if copied is not None and copied[1].num_rows:
            source, kept, size = copied
            if source == target and self.out.root.is_local and _whole(kept, size):
                appended = self.commit.append(target, size)
                state = _Samples(
                    evaluation, target, appended, self._checksums, rows=kept.num_rows, bytes=size
                )
                if state.checksum:  # the checksum covers the lines already there
                    for chunk in appended.read_prefix(_COPY_BYTES):
                        state.hasher.update(chunk)
                state.tail = appended.read_tail(TAIL_BYTES)
                # The kept lines stay where they are: their index rows carry over as they are
                # (`moved` stays empty: nothing to look up again).
            else:
                state = _Samples(evaluation, target, self.commit.stage(target), self._checksums)
                state.moved = _copy_lines(self.out, source, kept, state)
        else:
            state = _Samples(evaluation, target, self.commit.stage(target), self._checksums)
        self._open[dataset] = state
        return state

    def _totals(
        self, evaluation: Evaluation, rows: pa.Table, record: EvaluationRecord
    ) -> EvaluationTotals:
        rows = rows.select(["item_id", "sample", "correct", "graded_at"])
        samples = rows.filter(pc.fill_null(rows.column("sample"), False))
        tallies = samples.group_by("item_id", use_threads=False).aggregate(
            [("correct", "sum"), ("correct", "count")]
        )
        tallies = tallies.sort_by("item_id")  # the interval does not depend on storage order
        ids = tallies.column("item_id")
        counts = np.stack(
            [
                pc.fill_null(tallies.column("correct_sum"), 0).to_numpy().astype(np.float64),
                tallies.column("correct_count").to_numpy().astype(np.float64),
            ],
            axis=1,
        )
        by = self.plan.study.analysis.cluster_by
        if by:  # analysis.cluster_by: resample whole clusters of items
            codes = self._cluster_codes(by, ids)
            groups = np.unique(codes, return_inverse=True)[1]
            counts = np.stack([np.bincount(groups, weights=counts[:, j]) for j in (0, 1)], axis=1)
        accuracy = bootstrap_proportion(
            counts[:, 0], counts[:, 1], resamples=self.resamples, seed=self.seed
        )
        latest = pc.max(samples.column("graded_at")).as_py()
        id_list = ids.to_pylist() if len(ids) <= MAX_SAMPLE_IDS else []
        return EvaluationTotals(
            accuracy=accuracy,
            samples=record.samples_rows,
            sample_ids=id_list,
            excluded=dict(sorted(record.excluded.items())),
            evaluated_at=None if latest is None else str(latest.timestamp()),
            checksum=record.checksum or "",
            samples_file_name=evaluation.samples_path.rsplit("/", 1)[1],
            cluster_by=by,
            items=len(ids),
        )

    def _cluster_codes(self, by: str, ids: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """The `analysis.cluster_by` cluster code of each item in `ids` (read once)."""
        if self._clusters is None:
            from itemeval.results import item_clusters

            self._clusters = (
                self.plan.items.column("item_id").combine_chunks(),
                np.asarray(item_clusters(self.plan, by).codes),
            )
        all_ids, codes = self._clusters
        where = pc.index_in(ids, value_set=all_ids).to_numpy(zero_copy_only=False)
        return codes[where.astype(np.int64)]

    def _item(self, row: dict[str, Any]) -> tuple[str | None, list[str] | None]:
        """The item's rendered prompt and answer options (remembered, see `_items`)."""
        template = self._prompts.get(row["gen_condition_id"])
        key = (template.sha256 if template else "", row["item_id"])
        known = self._items.get(key)
        if known is not None:
            self._items.move_to_end(key)
            return known
        try:
            metadata = json.loads(row["metadata"]) if row["metadata"] else {}
        except ValueError:
            metadata = {}
        if not isinstance(metadata, dict):
            metadata = {}
        known = self._items[key] = (self._render(row, metadata), item_choices(metadata))
        if len(self._items) > RENDERED_ITEMS:
            self._items.popitem(last=False)
        return known

    def _render(self, row: dict[str, Any], metadata: dict[str, Any]) -> str | None:
        """What the model saw: the rendered prompt (system message first, when there is one)."""
        template = self._prompts.get(row["gen_condition_id"])
        if template is None:
            return None
        try:
            item = WorkItem(
                id=row["item_id"],
                input=row["input"] or "",
                target=row["target"] or "",
                grading_scheme=row["grading_scheme"],
                metadata=metadata,
                dataset=row["dataset"],
                modality=row["modality"],
                task_prompt=row["task_prompt"],
                difficulty=row["difficulty"],
            )
            messages = template.render_prompt(item)
        except (KeyError, ValueError, TypeError):
            return None
        return "\n\n".join(m["content"] for m in messages)


def _copy_lines(out: OutputDir, source: str, kept: pa.Table, state: _Samples) -> pa.Table:
    """Copy the kept lines' bytes (`kept`: index rows in file order) from the previous samples
    file into `state`, a run of adjacent lines at a time; their index rows, moved."""
    offsets = kept.column("offset").to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = kept.column("length").to_numpy(zero_copy_only=False).astype(np.int64)
    ends = offsets + lengths
    # Runs of lines that follow each other in the old file are copied as one range.
    breaks = np.flatnonzero(offsets[1:] != ends[:-1]) + 1
    starts = np.concatenate(([0], breaks))
    stops = np.concatenate((breaks, [len(offsets)]))
    moved = np.empty(len(offsets), dtype=np.int64)
    with out.location(source).open("rb") as handle:
        for first, last in zip(starts.tolist(), stops.tolist(), strict=True):
            begin, end = int(offsets[first]), int(ends[last - 1])
            at = state.bytes
            moved[first:last] = at + (offsets[first:last] - begin)
            handle.seek(begin)
            remaining = end - begin
            while remaining:
                data = handle.read(min(_COPY_BYTES, remaining))
                if not data:
                    raise OSError(f"{source} is shorter than its export manifest says")
                state.add(data, 0)
                remaining -= len(data)
            state.rows += last - first
    return kept.set_column(kept.schema.get_field_index("offset"), "offset", pa.array(moved))


def _whole(kept: pa.Table, size: int) -> bool:
    """Whether the lines (in file order) are every byte of a file of `size` bytes."""
    offsets = kept.column("offset").to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = kept.column("length").to_numpy(zero_copy_only=False).astype(np.int64)
    ends = offsets + lengths
    return bool(
        len(offsets) and offsets[0] == 0 and ends[-1] == size and (offsets[1:] == ends[:-1]).all()
    )


def _excluded(rows: pa.Table) -> dict[str, int]:
    reasons = pc.drop_null(rows.column("excluded"))
    if len(reasons) == 0:
        return {}
    counts = pc.value_counts(reasons)
    return dict(
        sorted(
            zip(
                counts.field("values").to_pylist(),
                [int(c) for c in counts.field("counts").to_pylist()],
                strict=True,
            )
        )
    )


def _facets(facets: Any) -> tuple[Any, ...]:
    return dataclasses.astuple(facets)


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()[:32]


def _exclusion(row: dict[str, Any]) -> str:
    """Why a grade is not a sample (see `eee.sample_mask`)."""
    if row["grade_status"] != "ok":
        return f"grade_error_{row['grade_error_code'] or 'unknown'}"
    if not row["parse_ok"]:
        return f"parse_failure_{row['parse_code'] or 'unknown'}"
    if row["grade_stale"]:
        return "stale_grade"
    return "no_score"
