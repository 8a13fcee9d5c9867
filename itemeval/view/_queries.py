"""What each page shows, computed from a `ViewIndex`: filters are numpy masks over the index's
per-item counts; texts are fetched for the rows of the page only.

* `overview`: the report's numbers (`report.study_numbers`: the leaderboard with its intervals
  over `analysis.cluster_by`'s clusters, tiers and rank intervals, costs), coverage and errors;
* `items_page`: one page of items matching an `ItemQuery`;
(`answers`: one item with every condition's answers, and two conditions compared.)

"Right" for a condition means that most of its graded answers to the item (its epochs) are
correct under the grader the query names (the headline grader by default); "wrong" that it has
graded answers and is not right.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval._util.heap import release_unused_memory
from itemeval.report import Bootstrap, Cost, Errors, Leaderboard, errors, study_numbers
from itemeval.results import StudyCells
from itemeval.store import latest_manifest, read_items_part
from itemeval.view._index import ViewIndex

PER_PAGE = 50
SORTS = ("accuracy", "-accuracy", "difficulty", "-difficulty", "id")

#: Tiers of the leaderboard (conditions whose accuracies the data cannot tell apart), by
#: generate condition id. By default the report's (`report.study_numbers`: the headline
#: grader's paired comparisons); assign a function taking the `Leaderboard` and returning
#: {condition id: tier label} to replace it. The overview shows a "tier" column when it
#: returns anything.
TierFunction = Callable[[Leaderboard], dict[str, str]]
tiers_hook: TierFunction | None = None
#: Above this many items the overview leaves tiers to `itemeval report`: the paired bootstrap
#: over every item would add to the server's start and memory on a big store.
TIER_ITEMS_MAX = 20_000


# -- overview ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Overview:
    board: Leaderboard
    tiers: dict[str, str]
    costs: dict[str, Cost]  # by generate condition id
    errors: Errors
    done: dict[str, int]  # ok solutions by generate condition id
    error_counts: dict[str, int]  # failed calls (solutions and grades) by generate condition id
    expected: int  # solutions expected per generate condition
    last_run: dict[str, str]
    solutions: int
    grades: int
    usd: float  # paid
    cache_saved: float  # saved by the response cache
    bootstrap: Bootstrap = field(default_factory=Bootstrap)  # what the intervals resampled

    @property
    def resampled(self) -> str:
        """What the intervals resample, in words."""
        if self.bootstrap.clusters is None:
            return "over items, epochs kept together"
        return "over clusters of items, analysis.cluster_by, epochs kept together"


def overview(index: ViewIndex, bootstrap: Bootstrap | None = None) -> Overview:
    cells = index.cells
    families = "headline" if index.item_count <= TIER_ITEMS_MAX else "none"
    numbers = study_numbers(
        index.plan,
        _projected(cells, _NUMBERS_SOLUTIONS, _NUMBERS_GRADES),
        bootstrap,
        counts=index.counts,
        families=families,  # type: ignore[arg-type]
    )
    release_unused_memory()
    board = numbers.leaderboard
    tiers = tiers_hook(board) if tiers_hook is not None else numbers.tiers()
    manifest = latest_manifest(index.plan.store)
    last_run = (
        {
            "run_id": manifest.run_id,
            "command": manifest.command,
            "outcome": manifest.outcome,
            "started_at": manifest.started_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        }
        if manifest is not None
        else {}
    )
    gens = index.facets.generate
    error_lines = errors(_projected(cells, _ERRORS_SOLUTIONS, _ERRORS_GRADES))
    release_unused_memory()
    return Overview(
        board=board,
        tiers=tiers,
        costs={c.generate.id: c for c in numbers.costs},
        errors=error_lines,
        done={g.id: int(index.done[k].sum()) for k, g in enumerate(gens)},
        error_counts={g.id: int(index.errors[k].sum()) for k, g in enumerate(gens)},
        expected=cells.expected_per_condition,
        last_run=last_run,
        solutions=cells.answers,
        grades=_stored_grades(index),
        usd=sum(c.usd for c in numbers.costs),
        cache_saved=sum(c.cache_saved_usd for c in numbers.costs),
        bootstrap=numbers.bootstrap,
    )


# The columns the report's numbers and errors read: what they filter is copied, so they are
# given only these (a `select` copies nothing).
_NUMBERS_SOLUTIONS = [
    "gen",
    "ok",
    "rows",
    "usd",
    "input_tokens",
    "output_tokens",
    "cached",
    "cached_input_tokens",
    "batch",
    "cache_usd",
]
_NUMBERS_GRADES = [
    "grade",
    "gen",
    "item",
    "dataset",
    "epoch",
    "correct",
    "score",
    "valid",
    "usd",
    "cached",
    "cached_input_tokens",
    "batch",
]
_ERRORS_SOLUTIONS = ["gen", "ok", "error_code", "rows"]
_ERRORS_GRADES = ["gen", "grade", "ok", "error_code", "parse_ok", "parse_code", "valid", "stale"]


def _stored_grades(index: ViewIndex) -> int:
    """Grades in the store (the panels' rows, computed from them, are not)."""
    stored = pc.less(index.cells.grades.column("grade"), index.stored_graders)
    return int(pc.sum(stored).as_py() or 0)


def _projected(cells: StudyCells, solutions: list[str], grades: list[str]) -> StudyCells:
    return dataclasses.replace(
        cells,
        solutions=cells.solutions.select(
            [c for c in solutions if c in cells.solutions.schema.names]
        ),
        grades=cells.grades.select(grades),
    )


# -- items ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ItemQuery:
    q: str = ""  # a part of the item id or of its text (case-insensitive)
    dataset: str = ""
    modality: str = ""
    min_difficulty: float | None = None
    max_difficulty: float | None = None
    wrong: str = ""  # generate condition (id or slug): items it got wrong
    right: str = ""  # generate condition: items it got right (with `wrong`: right here only)
    missed: str = ""  # generate condition or model: items with at least one wrong answer of it
    condition: str = ""  # scope of errors / parse / disagree (default every condition)
    #: grade condition or panel (id or slug) of right / wrong / missed and accuracy (default
    #: the headline grader), and the scope of errors / parse (default every grader)
    grader: str = ""
    errors: bool = False
    parse: bool = False
    disagree: bool = False
    flag: str = ""  # an item flag of a later analysis (`ViewIndex.flags`)
    sort: str = "id"
    page: int = 1

    @classmethod
    def of(cls, query: dict[str, str]) -> ItemQuery:
        def number(key: str) -> float | None:
            try:
                value = float(query.get(key, ""))
            except ValueError:
                return None
            return value if math.isfinite(value) else None

        try:
            page = max(1, int(query.get("page", "1")))
        except ValueError:
            page = 1
        sort = query.get("sort", "id")
        return cls(
            q=query.get("q", "").strip()[:200],
            dataset=query.get("dataset", ""),
            modality=query.get("modality", ""),
            min_difficulty=number("min_difficulty"),
            max_difficulty=number("max_difficulty"),
            wrong=query.get("wrong", ""),
            right=query.get("right", ""),
            missed=query.get("missed", ""),
            condition=query.get("condition", ""),
            grader=query.get("grader", ""),
            errors=query.get("errors") in ("1", "on", "true"),
            parse=query.get("parse") in ("1", "on", "true"),
            disagree=query.get("disagree") in ("1", "on", "true"),
            flag=query.get("flag", ""),
            sort=sort if sort in SORTS else "id",
            page=page,
        )

    def params(self, **changes: Any) -> dict[str, str]:
        """The query as URL parameters (defaults left out), with `changes`."""
        values = {**self.__dict__, **changes}
        out = {}
        for key, value in values.items():
            if value in ("", None, False) or (key == "page" and value == 1):
                continue
            if key == "sort" and value == "id":
                continue
            out[key] = "1" if value is True else str(value)
        return out


@dataclass(frozen=True)
class ItemRow:
    item_id: str
    dataset: str
    modality: str | None
    difficulty: float | None
    accuracy: float | None
    graded: int
    errors: int
    parse_failures: int
    disagree: int
    input: str


@dataclass(frozen=True)
class ItemsPage:
    query: ItemQuery
    rows: list[ItemRow]
    total: int  # items matching
    pages: int
    datasets: list[str]
    modalities: list[str]
    grader: str = ""  # the label of the grader of right / wrong / missed and accuracy


def _grader_counts(index: ViewIndex, grader: int | None) -> tuple[np.ndarray, np.ndarray]:
    """[gen, item] correct and valid grades under `grader` (None: the headline grader)."""
    if grader is None:
        return index.correct, index.graded
    return index.counts(grader)


def right_wrong(
    index: ViewIndex, gen: int, grader: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per item: whether condition `gen` got it right under `grader` (default the headline
    grader), and whether it got it wrong."""
    correct, graded = _grader_counts(index, grader)
    right = 2 * correct[gen] > graded[gen]
    return right, (graded[gen] > 0) & ~right


def text_matches(index: ViewIndex, text: str) -> np.ndarray:
    """Per item: whether its id or its input contains `text` (case-insensitive). Reads the
    `item_id` and `input` columns of the items snapshot, one part at a time."""
    ids = index.item_ids
    mask = pc.match_substring(ids, text, ignore_case=True).to_numpy(zero_copy_only=False)
    found: list[pa.Array] = []
    for info in index.snapshots.values():
        for part in range(info.parts):
            table = read_items_part(info, part, ["item_id", "input"])
            hit = pc.match_substring(table.column("input"), text, ignore_case=True)
            found.append(table.column("item_id").filter(hit).combine_chunks())
    if found:
        hits = pa.concat_arrays(found)
        mask |= pc.is_in(ids, value_set=hits).to_numpy(zero_copy_only=False)
    return np.asarray(mask, dtype=bool)


def item_accuracy(index: ViewIndex, grader: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per item: accuracy over every condition and epoch under `grader` (default the headline
    grader), and graded count."""
    correct_by, graded_by = _grader_counts(index, grader)
    graded = graded_by.sum(axis=0)
    correct = correct_by.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(graded > 0, correct / np.maximum(graded, 1), np.nan)
    return accuracy, graded


def items_page(index: ViewIndex, query: ItemQuery, per_page: int = PER_PAGE) -> ItemsPage:
    n = index.item_count
    mask = np.ones(n, dtype=bool)
    datasets = index.cells.datasets
    if query.dataset in datasets:
        codes = index.cells.items.column("dataset").to_numpy(zero_copy_only=False)
        mask &= codes == query.dataset
    modality_values = index.modality
    if query.modality:
        mask &= pc.fill_null(pc.equal(modality_values, query.modality), False).to_numpy(
            zero_copy_only=False
        )
    if query.min_difficulty is not None:
        mask &= index.difficulty >= query.min_difficulty
    if query.max_difficulty is not None:
        mask &= index.difficulty <= query.max_difficulty
    grader = index.grade_code(query.grader)
    wrong, right = index.gen_code(query.wrong), index.gen_code(query.right)
    if wrong is not None:
        mask &= right_wrong(index, wrong, grader)[1]
    if right is not None:
        mask &= right_wrong(index, right, grader)[0]
    missed = index.gen_codes(query.missed)
    if missed is not None:
        correct, graded = _grader_counts(index, grader)
        mask &= (correct[missed] < graded[missed]).any(axis=0)
    scope = index.gen_code(query.condition)

    def scoped(counts: np.ndarray) -> np.ndarray:
        return counts[scope] if scope is not None else counts.sum(axis=0)

    errors, parse, disagree = (
        scoped(index.errors if grader is None else index.failed_by_grade[grader]),
        scoped(index.parse_failures if grader is None else index.unparsed_by_grade[grader]),
        scoped(index.disagree),
    )
    if query.errors:
        mask &= errors > 0
    if query.parse:
        mask &= parse > 0
    if query.disagree:
        mask &= disagree > 0
    if query.flag in index.flags:
        mask &= index.flags[query.flag]
    if query.q:
        mask &= text_matches(index, query.q)
    accuracy, graded = item_accuracy(index, grader)
    chosen = np.flatnonzero(mask)
    if query.sort.endswith("accuracy"):
        key = accuracy[chosen]
    elif query.sort.endswith("difficulty"):
        key = index.difficulty[chosen]
    else:
        key = None
    if key is not None:
        # NaN (nothing graded, no stated difficulty) last in either direction
        order = np.argsort(-key if query.sort.startswith("-") else key, kind="stable")
        nan_last = np.isnan(key[order])
        chosen = np.concatenate([chosen[order][~nan_last], chosen[order][nan_last]])
    total = len(chosen)
    pages = max(1, -(-total // per_page))
    page = min(query.page, pages)
    shown = chosen[(page - 1) * per_page : page * per_page]
    inputs = inputs_of(index, shown)
    ids = index.item_ids.take(pa.array(shown, type=pa.int64())).to_pylist()
    dataset_codes = index.cells.items.column("dataset").take(pa.array(shown, type=pa.int64()))
    modalities = modality_values.take(pa.array(shown, type=pa.int64())).to_pylist()
    rows = [
        ItemRow(
            item_id=item_id,
            dataset=str(dataset),
            modality=modality,
            difficulty=number_or_none(index.difficulty[i]),
            accuracy=number_or_none(accuracy[i]),
            graded=int(graded[i]),
            errors=int(errors[i]),
            parse_failures=int(parse[i]),
            disagree=int(disagree[i]),
            input=text,
        )
        for i, item_id, dataset, modality, text in zip(
            shown.tolist(), ids, dataset_codes.to_pylist(), modalities, inputs, strict=True
        )
    ]
    present = pc.unique(modality_values.drop_null()).to_pylist()
    return ItemsPage(
        query=ItemQuery(**{**query.__dict__, "page": page}),
        rows=rows,
        total=total,
        pages=pages,
        datasets=datasets,
        modalities=sorted(str(m) for m in present),
        grader=index.facets.grade[grader].label
        if grader is not None
        else (index.facets.grade[index.headline].label if index.headline is not None else ""),
    )


def inputs_of(index: ViewIndex, codes: np.ndarray) -> list[str]:
    if len(codes) == 0 or len(index.snapshots) < len(index.cells.datasets):
        return [""] * len(codes)
    ids = index.item_ids.take(pa.array(codes, type=pa.int64()))
    return index.fetcher(["input"]).take(ids).column("input").to_pylist()


def number_or_none(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)
