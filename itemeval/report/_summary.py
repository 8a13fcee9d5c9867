"""What the report says, computed from `StudyCells`: leaderboards, facet tables, grader
agreement, errors and coverage (costs: `report.costs`; item difficulty: `report.difficulty`).

Definitions (the report and `docs/results.md` state them too):

* accuracy = correct answers / graded answers, counting only final grades of the current
  answer (`StudyCells` "valid"); failed calls, judge parse failures and stale grades are left
  out of both numbers and reported under errors;
* every interval is a 95% percentile bootstrap over items (or `analysis.cluster_by`'s
  clusters) with an item's epochs (and, for a model, its conditions) kept together
  (`statistics.bootstrap_proportion`), seeded;
* the headline grader is the first verifiable scorer, else the first judge
  (`conditions.primary_grader`); every grader's accuracy is shown next to it;

Everything works on the integer codes of `StudyCells` (vectorised group-bys and joins) and maps
codes back to names only for the few result rows.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.results import GenerateFacets, GradeFacets, StudyCells, primary_grader
from itemeval.statistics import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Agreement,
    Proportion,
    agreement,
    bootstrap_proportion,
)


@dataclass(frozen=True)
class Bootstrap:
    """How every interval is drawn: the leaderboard's, and (through
    `statistics.analysis_options`) the paired comparisons' with the same resamples, seed and
    confidence."""

    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    confidence: float = DEFAULT_CONFIDENCE
    #: per selected item, the cluster it is resampled with (`analysis.cluster_by`); None: each
    #: item is its own
    clusters: np.ndarray | None = field(default=None, compare=False, repr=False)


def headline_code(cells: StudyCells) -> int | None:
    """The code of the headline grade condition (None without grade conditions)."""
    primary = primary_grader(cells.facets.grade)
    return None if primary is None else cells.facets.grade.index(primary)


def facet_codes(cells: StudyCells, facet: str) -> tuple[list[str], pa.Array]:
    """The names of a facet (`model`, `prompt`, `model_config`) and, per generate condition
    code, the facet's code: take() it with a `gen` column to get the facet of each row."""
    f = cells.facets
    names = {"model": f.models, "prompt": f.prompts, "model_config": f.model_configs}[facet]
    value = {"model": "model_name", "prompt": "prompt", "model_config": "model_config"}[facet]
    codes = [names.index(getattr(g, value)) for g in f.generate]
    return names, pa.array(codes, type=pa.int32())


def proportions(
    grades: pa.Table, keys: Sequence[pa.Array | pa.ChunkedArray], bootstrap: Bootstrap
) -> dict[tuple[int, ...], Proportion]:
    """Accuracy with its interval per distinct combination of the integer `keys` (one value per
    grade row, non-negative codes), clustered by item; combinations in increasing order, and
    each one's clusters in increasing order (as the leaderboard's: what the bootstrap resamples).

    Counted with `np.bincount` per combination: a hash group-by over every (combination, item)
    took 680 MB more at the peak of a 10M-row `report` (5M grades; measured)."""
    if grades.num_rows == 0:
        return {}
    radices = []
    combo = np.zeros(grades.num_rows, dtype=np.int64)
    for k in keys:  # mixed radix, in place: increasing combo = keys in increasing order
        code = k.to_numpy(zero_copy_only=False)
        radices.append(int(code.max()) + 1)
        combo *= radices[-1]
        combo += code
        del code
    item = grades.column("item").to_numpy()
    cluster = item if bootstrap.clusters is None else bootstrap.clusters[item]
    correct = grades.column("correct")
    verdict = correct.is_valid().to_numpy(zero_copy_only=False)
    right = pc.fill_null(correct, False).to_numpy(zero_copy_only=False)
    # Each combination's rows together, in their order.
    order = np.argsort(combo, kind="stable")
    combo = combo[order]
    starts = np.concatenate(([0], np.flatnonzero(combo[1:] != combo[:-1]) + 1))
    stops = [*starts[1:].tolist(), len(order)]
    values = combo[starts].tolist()
    del combo
    out: dict[tuple[int, ...], Proportion] = {}
    for value, start, stop in zip(values, starts.tolist(), stops, strict=True):
        rows = order[start:stop]
        mine = cluster[rows]
        graded = verdict[rows]
        trials = np.bincount(mine[graded], minlength=int(mine.max()) + 1)
        successes = np.bincount(mine[graded & right[rows]], minlength=len(trials))
        seen = np.flatnonzero(np.bincount(mine, minlength=len(trials)))
        key = []
        for radix in reversed(radices):
            value, digit = divmod(value, radix)
            key.append(digit)
        out[tuple(reversed(key))] = bootstrap_proportion(
            successes[seen].astype(np.float64),
            trials[seen].astype(np.float64),
            resamples=bootstrap.resamples,
            seed=bootstrap.seed,
            confidence=bootstrap.confidence,
        )
    return out


#: Per grade condition code: its correct and its valid grades per generate condition and item,
#: two (generate conditions, items) arrays; what the leaderboard's intervals resample.
ItemCounts = Callable[[int], tuple[np.ndarray, np.ndarray]]


def item_counts(cells: StudyCells) -> ItemCounts:
    """`ItemCounts` of the cells' valid grades, one grade condition at a time (the viewer
    keeps them for every grade condition in its index and passes its own)."""
    grades = cells.grades
    shape = (len(cells.facets.generate), cells.items.num_rows)
    grade = grades.column("grade").to_numpy()
    valid = grades.column("valid").to_numpy(zero_copy_only=False)
    gen = grades.column("gen").to_numpy()
    item = grades.column("item").to_numpy()
    correct = pc.fill_null(grades.column("correct"), False).to_numpy(zero_copy_only=False)

    def of(code: int) -> tuple[np.ndarray, np.ndarray]:
        mine = valid & (grade == code)
        flat = gen[mine].astype(np.int64) * shape[1] + item[mine]
        size = shape[0] * shape[1]
        graded = np.bincount(flat, minlength=size).reshape(shape)
        right = np.bincount(flat[correct[mine]], minlength=size).reshape(shape)
        return right, graded

    return of


def interval(successes: np.ndarray, trials: np.ndarray, bootstrap: Bootstrap) -> Proportion:
    """Accuracy with its interval from per-item counts (summed into `analysis.cluster_by`'s
    clusters when the study names one): every accuracy a reader shows comes from here."""
    if bootstrap.clusters is not None:
        codes = bootstrap.clusters
        successes = np.bincount(codes, weights=successes, minlength=int(codes.max()) + 1)
        trials = np.bincount(codes, weights=trials, minlength=int(codes.max()) + 1)
    return bootstrap_proportion(
        successes,
        trials,
        resamples=bootstrap.resamples,
        seed=bootstrap.seed,
        confidence=bootstrap.confidence,
    )


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


def leaderboard(
    cells: StudyCells, bootstrap: Bootstrap | None = None, counts: ItemCounts | None = None
) -> Leaderboard:
    """Accuracy per generate condition and per model under every grade condition (panels
    included when the cells have them), ordered by the headline accuracy; from the per-item
    `counts` (computed from the cells when not given)."""
    bootstrap = bootstrap or Bootstrap()
    counts = counts or item_counts(cells)
    f = cells.facets
    by_model = [[c for c, g in enumerate(f.generate) if g.model_name == m] for m in f.models]
    accuracy: list[dict[str, Proportion]] = [{} for _ in f.generate]
    model_accuracy: list[dict[str, Proportion]] = [{} for _ in f.models]
    for k, grader in enumerate(f.grade):
        correct, graded = counts(k)
        if not graded.any():
            continue
        for c in range(len(f.generate)):
            if graded[c].any():
                accuracy[c][grader.id] = interval(correct[c], graded[c], bootstrap)
        for m, gens in enumerate(by_model):
            if gens and graded[gens].any():
                pooled = correct[gens].sum(axis=0), graded[gens].sum(axis=0)
                model_accuracy[m][grader.id] = interval(*pooled, bootstrap)
    conditions = [
        Ranked(name=g.slug, generate=g, accuracy=accuracy[c]) for c, g in enumerate(f.generate)
    ]
    lines = [
        Ranked(name=name, accuracy=model_accuracy[m], conditions=len(by_model[m]))
        for m, name in enumerate(f.models)
    ]
    primary = primary_grader(f.grade)
    conditions.sort(key=lambda line: _rank_key(primary, line))
    lines.sort(key=lambda line: _rank_key(primary, line))
    return Leaderboard(primary, f.grade, conditions, lines)


# -- facet tables -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FacetTable:
    """Accuracy (headline grader) for every model x column value (a prompt, a config, ...)."""

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
    cells: StudyCells, column_facet: str, bootstrap: Bootstrap | None = None
) -> FacetTable | None:
    """Model x `column_facet` (`prompt`, `model_config` or `dataset`) under the headline grader."""
    code = headline_code(cells)
    if code is None:
        return None
    grades = cells.valid_grades(code)
    models, model_of = facet_codes(cells, "model")
    if column_facet == "dataset":
        columns, column = cells.datasets, grades.column("dataset")
    else:
        columns, column_of = facet_codes(cells, column_facet)
        column = column_of.take(grades.column("gen"))
    found = proportions(
        grades, [model_of.take(grades.column("gen")), column], bootstrap or Bootstrap()
    )
    named = {(models[m], columns[c]): value for (m, c), value in found.items()}
    return FacetTable(column_facet, models, columns, named)


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
    keys = ["gen", "item", "epoch"]
    out = []
    grade = cells.facets.grade
    for a, b in itertools.combinations(range(len(grade)), 2):
        first = cells.valid_grades(a).select([*keys, "correct"])
        second = cells.valid_grades(b).select([*keys, "correct"]).rename_columns([*keys, "other"])
        joined = first.join(second, keys, join_type="inner")
        verdicts = agreement(
            joined.column("correct").to_numpy(zero_copy_only=False),
            joined.column("other").to_numpy(zero_copy_only=False),
        )
        out.append(GraderAgreement(grade[a], grade[b], verdicts))
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


def count(mask: pa.ChunkedArray | pa.Array) -> int:
    """How many values of a boolean column are true."""
    return int(pc.sum(mask).as_py() or 0)


def _code_counts(table: pa.Table, key: str, column: str, slugs: list[str]) -> list[CodeCount]:
    """Rows (or, for counted tables, their `rows`) by `key` and code."""
    if table.num_rows == 0:
        return []
    if "rows" not in table.column_names:
        table = table.append_column("rows", pa.repeat(pa.scalar(1, pa.int64()), table.num_rows))
    grouped = table.group_by([key, column], use_threads=False).aggregate([("rows", "sum")])
    rows = [
        CodeCount(slugs[k], c or "unknown", int(n))
        for k, c, n in zip(
            grouped.column(key).to_pylist(),
            grouped.column(column).to_pylist(),
            grouped.column("rows_sum").to_pylist(),
            strict=True,
        )
    ]
    return sorted(rows, key=lambda r: (r.condition, -r.count, r.code))


def errors(cells: StudyCells) -> Errors:
    f = cells.facets
    gen_slugs = [g.slug for g in f.generate]
    grade_slugs = [g.slug for g in f.grade]
    solutions, grades = cells.solutions, cells.grades
    failed = solutions.filter(pc.invert(solutions.column("ok")))
    grade_failed = grades.filter(pc.invert(grades.column("ok")))
    unparsed = grades.filter(pc.and_(grades.column("ok"), pc.invert(grades.column("parse_ok"))))
    expected = cells.expected_per_condition
    coverage = []
    for c, g in enumerate(f.generate):
        mine = solutions.filter(pc.equal(solutions.column("gen"), c))
        stored = int(pc.sum(mine.column("rows")).as_py() or 0)
        ok = int(pc.sum(mine.filter(mine.column("ok")).column("rows")).as_py() or 0)
        coverage.append(Coverage("generate", g.slug, expected, ok, stored - ok))
    for k, grader in enumerate(f.grade):
        mine = _of_grader(grades, k)
        ok = mine.column("ok")
        parsed = pc.and_(ok, mine.column("parse_ok"))
        coverage.append(
            Coverage(
                "grade",
                grader.slug,
                expected * len(f.generate),
                count(mine.column("valid")),
                count(pc.invert(ok)),
                count(pc.and_(ok, pc.invert(mine.column("parse_ok")))),
                count(pc.and_(parsed, mine.column("stale"))),
            )
        )
    return Errors(
        generation=_code_counts(failed, "gen", "error_code", gen_slugs),
        grading=_code_counts(grade_failed, "grade", "error_code", grade_slugs),
        parse_failures=_code_counts(unparsed, "grade", "parse_code", grade_slugs),
        coverage=coverage,
    )


def _of_grader(grades: pa.Table, code: int) -> pa.Table:
    """The grades of one grade condition; every grade without a copy when there is one."""
    mask = pc.equal(grades.column("grade"), code)
    return grades if pc.all(mask).as_py() is not False else grades.filter(mask)


def fmt_proportion(value: Proportion | None, digits: int = 3) -> str:
    """`0.842 [0.801, 0.879]`, or `n/a` when nothing was graded."""
    if value is None or not value.defined or math.isnan(value.value):
        return "n/a"
    return f"{value.value:.{digits}f} [{value.low:.{digits}f}, {value.high:.{digits}f}]"


def fmt_usd(value: float | None) -> str:
    """Dollars: cents from $1 up, three significant digits below (simulated and small models
    cost fractions of a cent per answer); what the report, the viewer and `status` print."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if value == 0 or abs(value) >= 1:
        return f"${value:,.2f}"
    decimals = max(2, 2 - math.floor(math.log10(abs(value))))
    return f"${value:.{decimals}f}"
