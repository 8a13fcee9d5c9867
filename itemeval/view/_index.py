"""What the viewer answers from: the small columns of every logical row, and where each row is.

`build_index(plan)` reads the store the way the report does (`results.read_cells`): only keys,
status, codes and numbers, deduplicated by the store's rule, one partition (or one condition
pair of a grade partition) at a time, never a text. Each logical row also keeps where it is
stored (its fragment and its position there, `FRAG`/`POS`), so a page fetches the texts of the
rows it shows and nothing else (`results.RowFetcher`).

The grades hold the study's panels too, as grade conditions after the stored ones
(`judging.study_cells`; a panel's rows are stored nowhere: no `frag`, `pos`). From those rows it
derives, per grade condition, generate condition and item, dense counts of correct and valid
grades (what the overview's leaderboard resamples, `report.study_numbers`), failed calls and
parse failures; per generate condition and item, the headline grader's counts, failed calls,
parse failures and judge/scorer disagreements: every filter of the items page is a numpy mask
over them.

`store_version(plan)` names the store's contents (every partition's fragment names and
compaction marker): the viewer builds a new index when it changes (a run under way).

Compact columns (int16 condition codes and epochs, int32 tokens, dictionary-encoded error and
parse codes), each table combined a column at a time: 1,000,000 solutions and 2,000,000 grades
hold about 100 MB of arrow while the overview is computed, and about 52 MB (17 bytes a row)
once `keep_page_columns` dropped what only the overview reads (`docs/performance.md`, "The
viewer on a big store").
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval._util.heap import release_unused_memory, trim_heap
from itemeval.judging import study_cells
from itemeval.planning import Plan
from itemeval.results import DesignFacets, ItemFetcher, StudyCells, primary_grader
from itemeval.store import GRADES, SOLUTIONS, SnapshotInfo, read_snapshot_info
from itemeval.store.fragments import (
    compaction_generation,
    list_fragments,
)
from itemeval.view._partitions import Where

_CODE = pa.int32()
_SMALL = pa.int16()  # condition codes and epochs
_NAME = pa.dictionary(pa.int16(), pa.string())  # error and parse codes: a few names, mostly null
_TOKENS = pa.int32()  # one call's tokens; the sums the overview takes of them are int64


#: What pages read of the index's grades, once the overview is computed (`correct`: a panel's
#: verdict, which no fragment holds).
PAGE_COLUMNS = {
    "grades": ["grade", "gen", "item", "epoch", "correct", "stale", "valid", "frag", "pos"],
}


@dataclass(frozen=True)
class RowsByItem:
    """The rows of a table grouped by item: `order[starts[i]:starts[i + 1]]` are item i's."""

    order: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, item: pa.ChunkedArray | pa.Array, n_items: int) -> RowsByItem:
        codes = item.to_numpy()
        order = np.argsort(codes, kind="stable").astype(np.int32)
        starts = np.searchsorted(codes[order], np.arange(n_items + 1)).astype(np.int64)
        return cls(order, starts)

    def rows(self, items: np.ndarray | list[int]) -> np.ndarray:
        parts = [self.order[self.starts[i] : self.starts[i + 1]] for i in items]
        return np.sort(np.concatenate(parts)) if parts else np.empty(0, np.int32)


@dataclass
class ViewIndex:
    """The small columns of the store and the per-item counts the pages filter on."""

    plan: Plan
    version: str
    cells: StudyCells  # report cells, grades with `frag`/`pos` (where each row is stored)
    answers: pa.Table  # each stored answer: `_ANSWERS_SCHEMA` (the report only counts them)
    solution_where: list[Where]  # per generate condition code
    grade_where: list[Where]  # per grade condition code
    snapshots: dict[str, SnapshotInfo]
    modality: pa.Array  # per item (None when the snapshot is not written yet)
    difficulty: np.ndarray  # per item, NaN when unknown
    headline: int | None  # grade condition code of the headline grader
    judge_scorer: tuple[int, int] | None  # (scorer code, judge code) compared for disagreement
    correct_by_grade: np.ndarray  # [grade, gen, item]: correct answers (valid grades)
    graded_by_grade: np.ndarray  # [grade, gen, item]: valid grades
    failed_by_grade: np.ndarray  # [grade, gen, item]: failed grading calls
    unparsed_by_grade: np.ndarray  # [grade, gen, item]: parse failures (panels: a member's)
    correct: np.ndarray  # [gen, item]: correct answers under the headline grader
    graded: np.ndarray  # [gen, item]: valid grades under the headline grader
    errors: np.ndarray  # [gen, item]: failed calls (solutions and stored grades)
    parse_failures: np.ndarray  # [gen, item]: judge outputs without a valid score block
    disagree: np.ndarray  # [gen, item]: epochs where the judge and the scorer disagree
    done: np.ndarray  # [gen, item]: ok solutions
    solution_rows: RowsByItem
    grade_rows: RowsByItem
    built_at: float = field(default_factory=time.time)
    seconds: float = 0.0
    #: Item flags from later analyses (e.g. IRT misfit), name -> bool mask over items. Empty
    #: until such an analysis exists; the items page offers a filter per flag.
    flags: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def facets(self) -> DesignFacets:
        return self.cells.facets

    @property
    def item_ids(self) -> pa.Array:
        return self.cells.items.column("item_id").combine_chunks()

    @property
    def item_count(self) -> int:
        return self.cells.items.num_rows

    def item_code(self, item_id: str) -> int | None:
        found = pc.index(self.item_ids, item_id).as_py()
        return None if found is None or found < 0 else int(found)

    @property
    def stored_graders(self) -> int:
        """Grade conditions with stored rows (codes below it); panels come after."""
        return len(self.grade_where)

    def gen_code(self, ref: str | None) -> int | None:
        """A generate condition by id or slug (None when absent or unknown)."""
        if not ref:
            return None
        for code, g in enumerate(self.facets.generate):
            if ref in (g.id, g.slug):
                return code
        return None

    def gen_codes(self, ref: str | None) -> list[int] | None:
        """A generate condition by id or slug, or every condition of a model by its name
        (None when absent or unknown)."""
        code = self.gen_code(ref)
        if code is not None:
            return [code]
        found = [c for c, g in enumerate(self.facets.generate) if ref and g.model_name == ref]
        return found or None

    def grade_code(self, ref: str | None) -> int | None:
        """A grade condition (a panel too) by id or slug (None when absent or unknown)."""
        if not ref:
            return None
        for code, g in enumerate(self.facets.grade):
            if ref in (g.id, g.slug):
                return code
        return None

    def counts(self, code: int) -> tuple[np.ndarray, np.ndarray]:
        """`report.ItemCounts`: grade condition `code`'s correct and valid grades per generate
        condition and item."""
        return self.correct_by_grade[code], self.graded_by_grade[code]

    def keep_page_columns(self) -> None:
        """Drop the columns only the overview reads (status, codes, USD, tokens, cache and
        tier): it is computed once per index, and pages read only `PAGE_COLUMNS`. On 1,000,000
        solutions and 2,000,000 grades, about 100 -> 52 MB of arrow."""
        self.cells = dataclasses.replace(
            self.cells, grades=self.cells.grades.select(PAGE_COLUMNS["grades"])
        )

    def fetcher(self, columns: list[str]) -> ItemFetcher:
        return ItemFetcher(self.plan.items, self.snapshots, columns)


def store_version(plan: Plan) -> str:
    """A name for what the store holds now: it changes when a fragment lands or goes."""
    digest = hashlib.sha256()
    for stage, ids in (
        (SOLUTIONS, [c.id for c in plan.design.generate]),
        (GRADES, [c.id for c in plan.design.grade]),
    ):
        for condition_id in ids:
            location = plan.store.partition(stage, condition_id)
            digest.update(condition_id.encode())
            for info in list_fragments(location):
                digest.update(info.name.encode())
            digest.update(str(compaction_generation(location)).encode())
    return digest.hexdigest()[:16]


def snapshots_of(plan: Plan) -> dict[str, SnapshotInfo]:
    """The items snapshot of each dataset (read again when the plan had none yet)."""
    out = {}
    for d in plan.datasets:
        info = d.snapshot or read_snapshot_info(plan.store, d.name, d.fingerprint)
        if info is not None:
            out[d.name] = info
    return out


def build_index(plan: Plan, version: str | None = None) -> ViewIndex:
    """Read the store's small columns for `plan`'s selection (see the module doc)."""
    started = time.monotonic()
    version = version or store_version(plan)
    solution_where: list[Where] = []
    answer_parts: list[pa.Table] = []

    def keep_answers(code: int, located: pa.Table) -> None:
        """Each answer's place (the pages fetch its text) and status, compact."""
        condition = plan.design.generate[code]
        encoded = pc.dictionary_encode(located.column("fragment")).combine_chunks()
        location = plan.store.partition(SOLUTIONS, condition.id)
        solution_where.append(Where(condition.id, location, encoded.dictionary.to_pylist()))
        n = located.num_rows
        answer_parts.append(
            pa.table(
                {
                    "gen": pa.array(np.full(n, code, dtype=np.int16)),
                    "item": located.column("item"),
                    "epoch": located.column("epoch").cast(_SMALL),
                    "ok": located.column("ok"),
                    "frag": encoded.indices.cast(pa.int32()),
                    "pos": located.column("position").cast(pa.int32()),
                }
            ).combine_chunks()
        )

    cells = study_cells(plan, locations=True, on_solutions=keep_answers)
    if plan.design.panels:  # the panels' rows were appended: one chunk a column for the pages
        cells = dataclasses.replace(cells, grades=cells.grades.combine_chunks())
    release_unused_memory()
    answers = _combined(answer_parts, _ANSWERS_SCHEMA)
    grade_where = [  # the stored grade conditions (the panels come after them)
        Where(g.id, plan.store.partition(GRADES, g.id), names)
        for g, names in zip(cells.facets.grade, cells.grade_fragments, strict=False)
    ]
    facets = cells.facets
    n_items = cells.items.num_rows
    epochs = facets.epochs
    snapshots = snapshots_of(plan)
    modality, difficulty = _item_fields(plan, snapshots, n_items)
    primary = primary_grader(facets.grade)
    headline = None if primary is None else facets.grade.index(primary)
    scorers = [k for k, g in enumerate(facets.grade) if g.kind == "scorer"]
    judges = [k for k, g in enumerate(facets.grade) if g.kind == "judge"]
    judge_scorer = (scorers[0], judges[0]) if scorers and judges else None
    # The per-item arrays, by field name (mypy checks `**` against every field otherwise).
    counts: dict[str, Any] = _counts(
        cells, answers, n_items, epochs, headline, judge_scorer, len(grade_where)
    )
    solution_rows = RowsByItem.of(answers.column("item"), n_items)
    grade_rows = RowsByItem.of(cells.grades.column("item"), n_items)
    release_unused_memory()
    return ViewIndex(
        plan=plan,
        version=version,
        cells=cells,
        answers=answers,
        solution_where=solution_where,
        grade_where=grade_where,
        snapshots=snapshots,
        modality=modality,
        difficulty=difficulty,
        headline=headline,
        judge_scorer=judge_scorer,
        seconds=time.monotonic() - started,
        solution_rows=solution_rows,
        grade_rows=grade_rows,
        **counts,
    )


def _item_fields(
    plan: Plan, snapshots: dict[str, SnapshotInfo], n_items: int
) -> tuple[pa.Array, np.ndarray]:
    """Modality and stated difficulty of every selected item (unknown without a snapshot)."""
    if n_items and all(d.name in snapshots for d in plan.datasets):
        fetcher = ItemFetcher(plan.items, snapshots, ["modality", "difficulty"])
        table = fetcher.take(plan.items.column("item_id"))
        modality = table.column("modality").combine_chunks()
        difficulty = table.column("difficulty").to_numpy(zero_copy_only=False)
        return modality, np.asarray(difficulty, dtype=np.float64)
    return pa.nulls(n_items, pa.string()), np.full(n_items, np.nan)


def _counts(
    cells: StudyCells,
    solutions: pa.Table,
    n_items: int,
    epochs: int,
    headline: int | None,
    judge_scorer: tuple[int, int] | None,
    stored: int,
) -> dict[str, np.ndarray]:
    n_gen = len(cells.facets.generate)
    shape = (n_gen, n_items)
    size = n_gen * n_items
    grades = cells.grades
    g_gen = grades.column("gen").to_numpy()
    g_item = grades.column("item").to_numpy()
    g_grade = grades.column("grade").to_numpy()
    g_ok = grades.column("ok").to_numpy(zero_copy_only=False)
    g_valid = grades.column("valid").to_numpy(zero_copy_only=False)
    g_parse = grades.column("parse_ok").to_numpy(zero_copy_only=False)
    g_correct = pc.fill_null(grades.column("correct"), False).to_numpy(zero_copy_only=False)
    cell_type = np.int32 if size * max(epochs, 1) < 2**31 else np.int64
    flat = g_gen.astype(cell_type) * n_items + g_item

    def per_cell(mask: np.ndarray, index: np.ndarray = flat) -> np.ndarray:
        counted = np.bincount(index[mask], minlength=size)
        return counted.astype(np.int32).reshape(shape)

    n_grade = len(cells.facets.grade)
    graded_by = np.zeros((n_grade, *shape), dtype=np.int32)
    correct_by = np.zeros((n_grade, *shape), dtype=np.int32)
    failed_by = np.zeros((n_grade, *shape), dtype=np.int32)
    unparsed_by = np.zeros((n_grade, *shape), dtype=np.int32)
    for code in range(n_grade):
        grader = g_grade == code
        mine = g_valid & grader
        graded_by[code] = per_cell(mine)
        correct_by[code] = per_cell(mine & g_correct)
        failed_by[code] = per_cell(grader & ~g_ok)
        unparsed_by[code] = per_cell(grader & g_ok & ~g_parse)
    if headline is not None:
        graded, correct = graded_by[headline], correct_by[headline]
    else:
        graded = correct = np.zeros(shape, dtype=np.int32)
    s_flat = (
        solutions.column("gen").to_numpy().astype(cell_type) * n_items
        + solutions.column("item").to_numpy()
    )
    s_ok = solutions.column("ok").to_numpy(zero_copy_only=False)
    # Over the stored graders: a panel's parse failure is its member's, counted there.
    errors = failed_by[:stored].sum(axis=0, dtype=np.int32) + per_cell(~s_ok, s_flat)
    done = per_cell(s_ok, s_flat)
    parse_failures = unparsed_by[:stored].sum(axis=0, dtype=np.int32)
    disagree = np.zeros(shape, dtype=np.int32)
    if judge_scorer is not None:
        cell = flat * epochs + grades.column("epoch").to_numpy()
        verdicts = []
        for code in judge_scorer:
            dense = np.full(size * epochs, -1, dtype=np.int8)
            mask = g_valid & (g_grade == code)
            dense[cell[mask]] = g_correct[mask]
            verdicts.append(dense)
        differ = (verdicts[0] >= 0) & (verdicts[1] >= 0) & (verdicts[0] != verdicts[1])
        disagree = differ.reshape(n_gen, n_items, epochs).sum(axis=2).astype(np.int32)
    return {
        "correct_by_grade": correct_by,
        "graded_by_grade": graded_by,
        "failed_by_grade": failed_by,
        "unparsed_by_grade": unparsed_by,
        "correct": correct,
        "graded": graded,
        "errors": errors,
        "parse_failures": parse_failures,
        "disagree": disagree,
        "done": done,
    }


#: Each stored answer of the selection: which cell, whether its call succeeded, where it is.
_ANSWERS_SCHEMA = pa.schema(
    [
        ("gen", _SMALL),
        ("item", _CODE),
        ("epoch", _SMALL),
        ("ok", pa.bool_()),
        ("frag", pa.int32()),
        ("pos", pa.int32()),
    ]
)


def _combined(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """`parts` (emptied) as one table of `schema`, each column one chunk. Built a column at a
    time, each column's parts dropped once it is combined: the peak is the result and one
    column of the parts, not both tables whole."""
    tables = [p.select(schema.names).cast(schema) for p in parts if p.num_rows]
    parts.clear()
    if not tables:
        return schema.empty_table()
    pending = [[c for t in tables for c in t.column(k).chunks] for k in range(len(schema))]
    del tables
    columns = []
    for k, f in enumerate(schema):
        chunks, pending[k] = pending[k], []
        columns.append(pa.concat_arrays(chunks) if chunks else pa.array([], f.type))
        del chunks
        trim_heap()  # the parts' small buffers were on the heap
    return pa.Table.from_arrays(columns, schema=schema)
