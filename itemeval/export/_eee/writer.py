"""Streaming Every Eval Ever files out of the long-table stream.

The scan yields one condition pair at a time; for each dataset met in a pair the writer opens
that evaluation's samples file on its first sample, appends one JSON line per sample (hashing the
bytes as it goes) and tallies, per item, correct and graded answers. When the pair ends it
commits the samples files and writes each aggregate record, with the bootstrap interval computed
from the per-item tallies (memory: one pair's items, never its texts).

Files are written into a hidden staging directory next to `eee/` and replace `eee/` as a whole
when the export succeeds: `eee/` always holds exactly one export's records (a failed export
leaves the previous ones; records of conditions no longer in the study disappear).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
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
from itemeval.export._outputs import OutputDir, OutputFile
from itemeval.export._stats import DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_proportion
from itemeval.export._table.scan import Pair
from itemeval.planning import Plan
from itemeval.storage import unique_name
from itemeval.templates import Template

EEE_DIR = "eee"
#: Rendered prompts remembered (see `EeeWriter._items`).
RENDERED_ITEMS = 200_000
_ENCODE = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode
_EXCLUSION_COLUMNS = [
    "dataset",
    "grade_status",
    "grade_error_code",
    "parse_ok",
    "parse_code",
    "grade_stale",
]


@dataclass
class _Open:
    """One evaluation of the current pair, while its samples stream in."""

    evaluation: Evaluation
    file: OutputFile | None = None
    hasher: Any = field(default_factory=hashlib.sha256)
    rows: int = 0
    tallies: dict[str, list[int]] = field(default_factory=dict)  # item -> [correct, graded]
    excluded: Counter[str] = field(default_factory=Counter)
    latest: datetime | None = None


@dataclass
class EeeTotals:
    evaluations: int = 0
    samples: int = 0
    excluded: Counter[str] = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)


class EeeWriter:
    """A sink of the long-table stream that writes Every Eval Ever records under `<out>/eee/`."""

    def __init__(
        self,
        out: OutputDir,
        plan: Plan,
        context: RecordContext,
        *,
        resamples: int = DEFAULT_RESAMPLES,
        seed: int = DEFAULT_SEED,
    ) -> None:
        self.out = out
        self.staging = f".{EEE_DIR}-partial-{unique_name()}"
        self.context = context
        self.resamples = resamples
        self.seed = seed
        self.totals = EeeTotals()
        self.plan = plan
        self._clusters: dict[str, int] | None = None
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
        self._pair: Pair | None = None
        self._open: dict[str, _Open] = {}
        # (prompt sha256, item id) -> (rendered prompt, choices): every epoch, grader and model
        # that shares a prompt saw the same text. Bounded (an LRU): helps whenever one pair's
        # items fit, costs nothing otherwise.
        self._items: OrderedDict[tuple[str, str], tuple[str | None, list[str] | None]] = (
            OrderedDict()
        )

    # -- the sink protocol -------------------------------------------------------------------
    def begin_pair(self, pair: Pair) -> None:
        self._pair = pair
        self._open = {}

    def write(self, batch: pa.RecordBatch) -> None:
        assert self._pair is not None, "begin_pair first"
        table = pa.Table.from_batches([batch])
        final = sample_mask(table)
        # Grades that are not final are only counted (few rows: a Python loop is fine);
        # ungraded rows (--include-ungraded) are not an evaluation of anything yet.
        left_out = table.filter(pc.and_(table.column("graded"), pc.invert(final)))
        if left_out.num_rows:
            for row in left_out.select(_EXCLUSION_COLUMNS).to_pylist():
                self._evaluation(row["dataset"]).excluded[_exclusion(row)] += 1
        samples = table.filter(final).select(SAMPLE_COLUMNS)
        if samples.num_rows == 0:
            return
        columns = [samples.column(name).to_pylist() for name in SAMPLE_COLUMNS]
        pending: dict[str, list[bytes]] = {}
        for values in zip(*columns, strict=True):
            row = dict(zip(SAMPLE_COLUMNS, values, strict=True))
            state = self._evaluation(row["dataset"])
            formatted, choices = self._item(row)
            record = build_instance(state.evaluation, row, formatted, choices)
            pending.setdefault(row["dataset"], []).append(_ENCODE(record).encode("utf-8") + b"\n")
            tally = state.tallies.setdefault(row["item_id"], [0, 0])
            tally[0] += int(bool(row["correct"]))
            tally[1] += 1
            graded_at = row["graded_at"]
            if graded_at is not None and (state.latest is None or graded_at > state.latest):
                state.latest = graded_at
        for dataset, lines in pending.items():
            state = self._open[dataset]
            if state.file is None:
                state.file = self.out.open(f"{self.staging}/{state.evaluation.samples_path}")
            data = b"".join(lines)
            state.file.write(data)
            state.hasher.update(data)
            state.rows += len(lines)

    def end_pair(self) -> None:
        for state in self._open.values():
            self.totals.excluded.update(state.excluded)
            if state.file is None:
                continue  # no sample (nothing graded, or only failed grades): no records
            state.file.commit()
            self.totals.files.append(f"{EEE_DIR}/{state.evaluation.samples_path}")
            ids = list(state.tallies)
            tallies = np.array(list(state.tallies.values()), dtype=np.float64)
            by = self.plan.study.analysis.cluster_by
            if by:  # analysis.cluster_by: resample whole clusters of items
                codes = self._cluster_codes(by)
                groups = np.unique([codes[i] for i in ids], return_inverse=True)[1]
                tallies = np.stack(
                    [np.bincount(groups, weights=tallies[:, j]) for j in (0, 1)], axis=1
                )
            accuracy = bootstrap_proportion(
                tallies[:, 0], tallies[:, 1], resamples=self.resamples, seed=self.seed
            )
            totals = EvaluationTotals(
                accuracy=accuracy,
                samples=state.rows,
                sample_ids=ids if len(ids) <= MAX_SAMPLE_IDS else [],
                excluded=dict(sorted(state.excluded.items())),
                evaluated_at=_unix(state.latest),
                checksum=state.hasher.hexdigest(),
                samples_file_name=state.evaluation.samples_path.rsplit("/", 1)[1],
                cluster_by=by,
                items=len(ids),
            )
            record = build_aggregate(state.evaluation, totals)
            text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
            self.out.write_bytes(
                f"{self.staging}/{state.evaluation.aggregate_path}", text.encode("utf-8")
            )
            self.totals.files.append(f"{EEE_DIR}/{state.evaluation.aggregate_path}")
            self.totals.evaluations += 1
            self.totals.samples += state.rows
        self._open = {}
        self._pair = None

    def close(self) -> None:
        """Finish the last pair and publish: the staged tree becomes `eee/`."""
        if self._pair is not None:
            self.end_pair()
        self.out.replace_tree(self.staging, EEE_DIR)

    def abort(self) -> None:
        for state in self._open.values():
            if state.file is not None:
                state.file.discard()
        self._open = {}
        self.out.delete_tree(self.staging)

    # -- helpers -------------------------------------------------------------------------------
    def _evaluation(self, dataset: str) -> _Open:
        state = self._open.get(dataset)
        if state is None:
            assert self._pair is not None
            generate, grade = self._pair.generate, self._pair.grade
            evaluation = Evaluation(
                context=self.context,
                generate=generate,
                grade=grade,
                dataset=self._datasets[dataset],
                endpoint_kind=self._endpoint_kinds.get(generate.endpoint, ""),
                prompt_text=self._prompts[generate.id].text,
                rubric_text=self._rubrics.get(grade.id),
            )
            state = self._open[dataset] = _Open(evaluation)
        return state

    def _cluster_codes(self, by: str) -> dict[str, int]:
        """Item id -> cluster code of `analysis.cluster_by` (read once)."""
        if self._clusters is None:
            from itemeval.statistics import item_clusters

            ids = self.plan.items.column("item_id").to_pylist()
            codes = item_clusters(self.plan, by).codes.tolist()
            self._clusters = dict(zip(ids, codes, strict=True))
        return self._clusters

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


def _exclusion(row: dict[str, Any]) -> str:
    """Why a grade is not a sample (see `eee.sample_mask`)."""
    if row["grade_status"] != "ok":
        return f"grade_error_{row['grade_error_code'] or 'unknown'}"
    if not row["parse_ok"]:
        return f"parse_failure_{row['parse_code'] or 'unknown'}"
    if row["grade_stale"]:
        return "stale_grade"
    return "no_score"


def _unix(moment: datetime | None) -> str | None:
    return None if moment is None else str(moment.timestamp())
