"""What each page shows, computed from a `ViewIndex`: filters are numpy masks over the index's
per-item counts; texts are fetched for the rows of the page only.

* `overview`: the report's leaderboard (bootstrap intervals), coverage, cost and errors;
* `items_page`: one page of items matching an `ItemQuery`;
(`answers`: one item with every condition's answers, and two conditions compared.)

"Right" for a condition means that most of its graded answers to the item (its epochs) are
correct under the headline grader; "wrong" that it has graded answers and is not right.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval._util.heap import release_unused_memory
from itemeval.export import (
    Bootstrap,
    Cost,
    Errors,
    Leaderboard,
    Ranked,
    StudyCells,
    costs,
    errors,
    primary_grader,
)
from itemeval.statistics import Proportion, bootstrap_proportion
from itemeval.store import latest_manifest, read_items_part
from itemeval.view._index import ViewIndex

PER_PAGE = 50
SORTS = ("accuracy", "-accuracy", "difficulty", "-difficulty", "id")

#: Tiers of the leaderboard (conditions whose accuracies the data cannot tell apart), by
#: generate condition id. By default `paired_tiers` (the report's paired comparisons);
#: assign a function taking the `Leaderboard` and returning {condition id: tier label} to
#: replace it. The overview shows a "tier" column when it returns anything.
TierFunction = Callable[[Leaderboard], dict[str, str]]
tiers_hook: TierFunction | None = None
#: Above this many items the overview leaves tiers to `itemeval report`: the paired bootstrap
#: over every item would add to the server's start and memory on a big store.
TIER_ITEMS_MAX = 20_000


def paired_tiers(index: ViewIndex, board: Leaderboard, bootstrap: Bootstrap) -> dict[str, str]:
    """Each generate condition's tier and rank interval under the headline grader, from the
    paired comparisons the report's leaderboard shows (`itemeval.statistics.compare` over the
    index's per-item counts, items as clusters; a study's `analysis.cluster_by` is left to the
    report): {condition id: "1 (rank 1-2)"}."""
    if board.primary is None or index.correct_by_grade.shape[2] > TIER_ITEMS_MAX:
        return {}
    from itemeval.statistics import Tallies, compare, rank_text

    k = index.facets.grade.index(board.primary)
    correct = index.correct_by_grade[k].T.astype(np.float64)  # (items, conditions)
    graded = index.graded_by_grade[k].T.astype(np.float64)
    if not graded.any():
        return {}
    units = [g.id for g in index.facets.generate]
    analysis = index.plan.study.analysis
    family = compare(
        Tallies(units=units, sums=correct, squares=correct, counts=graded),
        resamples=bootstrap.resamples,
        seed=bootstrap.seed,
        adjustment=analysis.adjust,
        alpha=analysis.alpha,
    )
    return {
        unit: f"{family.tiers[u]} (rank {rank_text(family, u)})"
        for u, unit in enumerate(units)
        if family.answers[u] > 0
    }


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
    usd: float


def overview(index: ViewIndex, bootstrap: Bootstrap | None = None) -> Overview:
    cells = index.cells
    bootstrap = bootstrap or Bootstrap()
    board = ranked(index, bootstrap)
    tiers = tiers_hook(board) if tiers_hook is not None else paired_tiers(index, board, bootstrap)
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
    usd = sum(
        float(pc.sum(t.column("usd")).as_py() or 0.0)
        for t in (cells.solutions, cells.grades)
        if t.num_rows
    )
    gens = index.facets.generate
    cost_lines = condition_costs(index)
    release_unused_memory()
    error_lines = errors(_projected(cells, _ERRORS_SOLUTIONS, _ERRORS_GRADES))
    release_unused_memory()
    return Overview(
        board=board,
        tiers=tiers,
        costs=cost_lines,
        errors=error_lines,
        done={g.id: int(index.done[k].sum()) for k, g in enumerate(gens)},
        error_counts={g.id: int(index.errors[k].sum()) for k, g in enumerate(gens)},
        expected=cells.expected_per_condition,
        last_run=last_run,
        solutions=cells.answers,
        grades=cells.grades.num_rows,
        usd=usd,
    )


# The columns the report's `costs` and `errors` read: what they filter is copied, so they are
# given only these (a `select` copies nothing).
_COSTS_SOLUTIONS = [
    "gen",
    "rows",
    "usd",
    "input_tokens",
    "output_tokens",
    "cached",
    "cached_input_tokens",
]
_COSTS_GRADES = ["gen", "grade", "usd", "valid", "correct", "cached", "cached_input_tokens"]
_ERRORS_SOLUTIONS = ["gen", "ok", "error_code", "rows"]
_ERRORS_GRADES = ["gen", "grade", "ok", "error_code", "parse_ok", "parse_code", "valid", "stale"]


def _projected(cells: StudyCells, solutions: list[str], grades: list[str]) -> StudyCells:
    return dataclasses.replace(
        cells, solutions=cells.solutions.select(solutions), grades=cells.grades.select(grades)
    )


def condition_costs(index: ViewIndex) -> dict[str, Cost]:
    """The report's `costs` (the same numbers, a test holds them equal) by generate condition
    id, computed one condition at a time: the report filters the grades (the paid ones, the
    headline grader's), and a condition's rows are a tenth of the copy all of them were."""
    cells = _projected(index.cells, [*_COSTS_SOLUTIONS, "batch"], [*_COSTS_GRADES, "batch"])
    out = {}
    for code, condition in enumerate(index.facets.generate):
        mine = dataclasses.replace(
            cells,
            solutions=cells.solutions.filter(pc.equal(cells.solutions.column("gen"), code)),
            grades=cells.grades.filter(pc.equal(cells.grades.column("gen"), code)),
        )
        out[condition.id] = costs(mine, index.plan.pricing)[code]
        del mine
    return out


def ranked(index: ViewIndex, bootstrap: Bootstrap) -> Leaderboard:
    """The report's leaderboard (`export.report.summary.leaderboard`: the same numbers, a test
    holds them equal), from the index's per-item counts instead of group-bys over the grades:
    per (condition, grader) and per (model, grader), the items are the bootstrap's clusters."""
    f = index.facets
    correct, graded = index.correct_by_grade, index.graded_by_grade

    def accuracy(gens: list[int]) -> dict[str, Proportion]:
        out = {}
        for k, grader in enumerate(f.grade):
            trials = graded[k, gens].sum(axis=0)
            if trials.any():
                successes = correct[k, gens].sum(axis=0)
                out[grader.id] = bootstrap_proportion(
                    successes, trials, resamples=bootstrap.resamples, seed=bootstrap.seed
                )
        return out

    conditions = [
        Ranked(name=g.slug, generate=g, accuracy=accuracy([c])) for c, g in enumerate(f.generate)
    ]
    models = []
    for name in f.models:
        mine = [c for c, g in enumerate(f.generate) if g.model_name == name]
        models.append(Ranked(name=name, accuracy=accuracy(mine), conditions=len(mine)))
    primary = primary_grader(f.grade)

    def rank(line: Ranked) -> tuple[float, str]:
        value = line.accuracy.get(primary.id) if primary else None
        return (-(value.value if value is not None and value.defined else -1.0), line.name)

    return Leaderboard(primary, f.grade, sorted(conditions, key=rank), sorted(models, key=rank))


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
    missed: str = ""  # generate condition: items with at least one wrong answer of it
    condition: str = ""  # scope of errors / parse / disagree (default every condition)
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


def right_wrong(index: ViewIndex, gen: int) -> tuple[np.ndarray, np.ndarray]:
    """Per item: whether condition `gen` got it right, and whether it got it wrong."""
    correct, graded = index.correct[gen], index.graded[gen]
    right = 2 * correct > graded
    return right, (graded > 0) & ~right


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


def item_accuracy(index: ViewIndex) -> tuple[np.ndarray, np.ndarray]:
    """Per item: accuracy over every condition and epoch (headline grader), and graded count."""
    graded = index.graded.sum(axis=0)
    correct = index.correct.sum(axis=0)
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
    wrong, right = index.gen_code(query.wrong), index.gen_code(query.right)
    if wrong is not None:
        mask &= right_wrong(index, wrong)[1]
    if right is not None:
        mask &= right_wrong(index, right)[0]
    missed = index.gen_code(query.missed)
    if missed is not None:
        mask &= index.correct[missed] < index.graded[missed]
    scope = index.gen_code(query.condition)

    def scoped(counts: np.ndarray) -> np.ndarray:
        return counts[scope] if scope is not None else counts.sum(axis=0)

    errors, parse, disagree = (
        scoped(index.errors),
        scoped(index.parse_failures),
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
    accuracy, graded = item_accuracy(index)
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
    )


def inputs_of(index: ViewIndex, codes: np.ndarray) -> list[str]:
    if len(codes) == 0 or len(index.snapshots) < len(index.cells.datasets):
        return [""] * len(codes)
    ids = index.item_ids.take(pa.array(codes, type=pa.int64()))
    return index.fetcher(["input"]).take(ids).column("input").to_pylist()


def number_or_none(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)
