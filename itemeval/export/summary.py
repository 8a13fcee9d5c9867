"""What the report says, computed from `StudyCells`: leaderboards, prompt sensitivity, grader
agreement, cost per correct answer, errors, and (in `export.difficulty`) item difficulty.

Definitions (the report and `docs/results.md` state them too):

* accuracy = correct answers / graded answers, counting only final grades of the current
  answer (`StudyCells` "valid"); failed calls, judge parse failures and stale grades are left
  out of both numbers and reported under errors;
* every interval is a 95% percentile bootstrap over items with an item's epochs (and, for a
  model, its conditions) kept together (`stats.bootstrap_proportion`), seeded;
* the headline grader is the first verifiable scorer, else the first judge
  (`conditions.primary_grader`); every grader's accuracy is shown next to it;
* cost per correct answer = (generation USD + grading USD of every grader, of the condition's
  logical rows) / correct answers under the headline grader.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.export.cells import StudyCells
from itemeval.export.conditions import GenerateFacets, GradeFacets, primary_grader
from itemeval.export.stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Agreement,
    Proportion,
    agreement,
    bootstrap_proportion,
)

_SEP = "\x1f"


@dataclass(frozen=True)
class Bootstrap:
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED


def with_facets(cells: StudyCells, table: pa.Table) -> pa.Table:
    """`table` (with `gen_condition_id`) plus `model`, `model_name`, `prompt`, `model_config`."""
    generate = cells.facets.generate
    facets = pa.table(
        {
            "gen_condition_id": [f.id for f in generate],
            "model": [f.model for f in generate],
            "model_name": [f.model_name for f in generate],
            "prompt": [f.prompt for f in generate],
            "model_config": [f.model_config for f in generate],
        }
    )
    return table.join(facets, "gen_condition_id", join_type="inner")


def proportions(
    grades: pa.Table, keys: Sequence[str], bootstrap: Bootstrap
) -> dict[tuple[str, ...], Proportion]:
    """Accuracy with its interval per distinct value of `keys`, clustered by item."""
    if grades.num_rows == 0:
        return {}
    correct = pc.cast(grades.column("correct"), pa.int64())
    table = grades.select([*keys, "item_id"]).append_column("c", correct)
    per_item = table.group_by([*keys, "item_id"], use_threads=False).aggregate(
        [("c", "sum"), ("c", "count")]
    )
    composite = _composite(per_item, keys)
    order = pc.sort_indices(composite).to_numpy()
    composite_sorted = composite.take(pa.array(order)).to_numpy(zero_copy_only=False)
    successes = per_item.column("c_sum").to_numpy()[order].astype(np.float64)
    trials = per_item.column("c_count").to_numpy()[order].astype(np.float64)
    bounds = np.flatnonzero(composite_sorted[1:] != composite_sorted[:-1]) + 1
    out: dict[tuple[str, ...], Proportion] = {}
    for start, stop in zip(
        np.concatenate(([0], bounds)), np.concatenate((bounds, [len(order)])), strict=True
    ):
        key = tuple(str(composite_sorted[start]).split(_SEP))
        out[key] = bootstrap_proportion(
            successes[start:stop],
            trials[start:stop],
            resamples=bootstrap.resamples,
            seed=bootstrap.seed,
        )
    return out


def _composite(table: pa.Table, keys: Sequence[str]) -> pa.Array:
    columns = [pc.cast(table.column(k), pa.string()) for k in keys]
    if len(columns) == 1:
        return columns[0].combine_chunks()
    return pc.binary_join_element_wise(*columns, _SEP).combine_chunks()


# -- leaderboard ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ranked:
    """One leaderboard line: a generate condition or a model, its accuracy under each grader."""

    name: str
    accuracy: dict[str, Proportion]  # grade condition id -> accuracy
    generate: GenerateFacets | None = None  # None for a model line
    conditions: int = 1


@dataclass(frozen=True)
class Leaderboard:
    primary: GradeFacets | None
    graders: tuple[GradeFacets, ...]
    conditions: list[Ranked]
    models: list[Ranked]

    def headline(self, line: Ranked) -> Proportion | None:
        return line.accuracy.get(self.primary.id) if self.primary else None


def _rank_key(primary: GradeFacets | None, line: Ranked) -> tuple[float, str]:
    value = line.accuracy.get(primary.id) if primary else None
    score = value.value if value is not None and value.defined else -1.0
    return (-score, line.name)


def leaderboard(cells: StudyCells, bootstrap: Bootstrap | None = None) -> Leaderboard:
    """Accuracy per generate condition and per model, ordered by the headline accuracy."""
    bootstrap = bootstrap or Bootstrap()
    grades = with_facets(cells, cells.valid_grades())
    primary = primary_grader(cells.facets.grade)
    by_condition = proportions(grades, ["gen_condition_id", "grade_condition_id"], bootstrap)
    by_model = proportions(grades, ["model_name", "grade_condition_id"], bootstrap)
    conditions = [
        Ranked(
            name=f.slug,
            generate=f,
            accuracy={
                g.id: by_condition[(f.id, g.id)]
                for g in cells.facets.grade
                if (f.id, g.id) in by_condition
            },
        )
        for f in cells.facets.generate
    ]
    models = []
    for name in cells.facets.models:
        count = sum(1 for f in cells.facets.generate if f.model_name == name)
        accuracy = {
            g.id: by_model[(name, g.id)] for g in cells.facets.grade if (name, g.id) in by_model
        }
        models.append(Ranked(name=name, accuracy=accuracy, conditions=count))
    conditions.sort(key=lambda line: _rank_key(primary, line))
    models.sort(key=lambda line: _rank_key(primary, line))
    return Leaderboard(primary, cells.facets.grade, conditions, models)


# -- facet tables -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FacetTable:
    """Accuracy (headline grader) for every row value x column value, e.g. model x prompt."""

    row_facet: str
    column_facet: str
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Proportion]

    def spread(self, row: str) -> float | None:
        """max - min accuracy over the columns of a row (prompt sensitivity)."""
        values = [
            self.cells[(row, c)].value
            for c in self.columns
            if (row, c) in self.cells and self.cells[(row, c)].defined
        ]
        return max(values) - min(values) if len(values) >= 2 else None


def facet_table(
    cells: StudyCells,
    row_facet: str,
    column_facet: str,
    columns: list[str],
    bootstrap: Bootstrap | None = None,
) -> FacetTable | None:
    primary = primary_grader(cells.facets.grade)
    if primary is None:
        return None
    grades = with_facets(cells, cells.valid_grades(primary.id))
    found = proportions(grades, [row_facet, column_facet], bootstrap or Bootstrap())
    return FacetTable(row_facet, column_facet, cells.facets.models, columns, found)


# -- agreement --------------------------------------------------------------------------------


@dataclass(frozen=True)
class GraderAgreement:
    first: GradeFacets
    second: GradeFacets
    agreement: Agreement

    @property
    def kinds(self) -> str:
        return " / ".join(sorted((self.first.kind, self.second.kind)))


def grader_agreement(cells: StudyCells) -> list[GraderAgreement]:
    """Every pair of grade conditions, over the answers both graded validly."""
    keys = ["gen_condition_id", "item_id", "epoch"]
    out = []
    for first, second in itertools.combinations(cells.facets.grade, 2):
        a = cells.valid_grades(first.id).select([*keys, "correct"])
        b = cells.valid_grades(second.id).select([*keys, "correct"])
        joined = a.join(b.rename_columns([*keys, "correct_b"]), keys, join_type="inner")
        out.append(
            GraderAgreement(
                first,
                second,
                agreement(
                    joined.column("correct").to_numpy(zero_copy_only=False),
                    joined.column("correct_b").to_numpy(zero_copy_only=False),
                ),
            )
        )
    return out


# -- cost -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    generate: GenerateFacets
    generation_usd: float
    grading_usd: float
    correct: int
    graded: int
    tokens: int

    @property
    def usd(self) -> float:
        return self.generation_usd + self.grading_usd

    @property
    def per_correct(self) -> float | None:
        return self.usd / self.correct if self.correct else None


def costs(cells: StudyCells) -> list[Cost]:
    """Per generate condition: what its answers and their grading cost, per correct answer."""
    primary = primary_grader(cells.facets.grade)
    generation = _sums(
        cells.solutions, "gen_condition_id", ["usd", "input_tokens", "output_tokens"]
    )
    grading = _sums(cells.grades, "gen_condition_id", ["usd"])
    headline = cells.valid_grades(primary.id) if primary else cells.valid_grades().slice(0, 0)
    headline = headline.append_column("c", pc.cast(headline.column("correct"), pa.int64()))
    headline = headline.append_column(
        "graded", pa.repeat(pa.scalar(1, pa.int64()), headline.num_rows)
    )
    tallies = _sums(headline, "gen_condition_id", ["c", "graded"])
    out = []
    for f in cells.facets.generate:
        gen = generation.get(f.id, {})
        out.append(
            Cost(
                generate=f,
                generation_usd=gen.get("usd", 0.0),
                grading_usd=grading.get(f.id, {}).get("usd", 0.0),
                correct=int(tallies.get(f.id, {}).get("c", 0)),
                graded=int(tallies.get(f.id, {}).get("graded", 0)),
                tokens=int(gen.get("input_tokens", 0) + gen.get("output_tokens", 0)),
            )
        )
    return out


def _sums(table: pa.Table, key: str, columns: list[str]) -> dict[str, dict[str, float]]:
    if table.num_rows == 0:
        return {}
    grouped = table.group_by(key, use_threads=False).aggregate([(c, "sum") for c in columns])
    keys = grouped.column(key).to_pylist()
    out: dict[str, dict[str, float]] = {k: {} for k in keys}
    for c in columns:
        for k, v in zip(keys, grouped.column(f"{c}_sum").to_pylist(), strict=True):
            out[k][c] = float(v or 0)
    return out


# -- errors and coverage ----------------------------------------------------------------------


@dataclass(frozen=True)
class CodeCount:
    condition: str  # condition slug
    code: str
    count: int


@dataclass(frozen=True)
class Coverage:
    stage: str
    condition: str  # slug
    expected: int
    valid: int  # generate: ok solutions; grade: valid grades
    errors: int
    parse_failures: int = 0
    stale: int = 0

    @property
    def missing(self) -> int:
        return max(0, self.expected - self.valid - self.errors - self.parse_failures - self.stale)


@dataclass(frozen=True)
class Errors:
    generation: list[CodeCount] = field(default_factory=list)
    grading: list[CodeCount] = field(default_factory=list)
    parse_failures: list[CodeCount] = field(default_factory=list)
    coverage: list[Coverage] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.generation or self.grading or self.parse_failures)


def errors(cells: StudyCells) -> Errors:
    slugs = {f.id: f.slug for f in (*cells.facets.generate, *cells.facets.grade)}
    solutions, grades = cells.solutions, cells.grades
    failed = solutions.filter(pc.equal(solutions.column("status"), "error"))
    grade_failed = grades.filter(pc.equal(grades.column("status"), "error"))
    unparsed = grades.filter(
        pc.and_(pc.equal(grades.column("status"), "ok"), pc.invert(grades.column("parse_ok")))
    )

    def counts(table: pa.Table, key: str, code: str) -> list[CodeCount]:
        if table.num_rows == 0:
            return []
        grouped = table.group_by([key, code], use_threads=False).aggregate([(key, "count")])
        rows = [
            CodeCount(slugs.get(k, k), c or "unknown", int(n))
            for k, c, n in zip(
                grouped.column(key).to_pylist(),
                grouped.column(code).to_pylist(),
                grouped.column(f"{key}_count").to_pylist(),
                strict=True,
            )
        ]
        return sorted(rows, key=lambda r: (r.condition, -r.count, r.code))

    expected = cells.expected_per_condition
    coverage = []
    for f in cells.facets.generate:
        mine = solutions.filter(pc.equal(solutions.column("gen_condition_id"), f.id))
        ok = int(pc.sum(pc.equal(mine.column("status"), "ok")).as_py() or 0)
        coverage.append(Coverage("generate", f.slug, expected, ok, mine.num_rows - ok))
    for g in cells.facets.grade:
        mine = grades.filter(pc.equal(grades.column("grade_condition_id"), g.id))
        ok = pc.equal(mine.column("status"), "ok")
        coverage.append(
            Coverage(
                "grade",
                g.slug,
                expected * len(cells.facets.generate),
                count(mine.column("valid")),
                count(pc.invert(ok)),
                count(pc.and_(ok, pc.invert(mine.column("parse_ok")))),
                count(pc.and_(ok, pc.and_(mine.column("parse_ok"), mine.column("stale")))),
            )
        )
    return Errors(
        generation=counts(failed, "gen_condition_id", "error_code"),
        grading=counts(grade_failed, "grade_condition_id", "error_code"),
        parse_failures=counts(unparsed, "grade_condition_id", "parse_code"),
        coverage=coverage,
    )


def count(mask: pa.ChunkedArray | pa.Array) -> int:
    """How many values of a boolean column are true."""
    return int(pc.sum(mask).as_py() or 0)


def fmt_proportion(value: Proportion | None, digits: int = 3) -> str:
    """`0.842 [0.801, 0.879]`, or `n/a` when nothing was graded."""
    if value is None or not value.defined or math.isnan(value.value):
        return "n/a"
    return f"{value.value:.{digits}f} [{value.low:.{digits}f}, {value.high:.{digits}f}]"
