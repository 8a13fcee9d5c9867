"""What each page shows, computed from a `ViewIndex`: filters are numpy masks over the index's
per-item counts; texts are fetched for the rows of the page only.

* `overview`: the report's leaderboard (bootstrap intervals), coverage, cost and errors;
* `items_page`: one page of items matching an `ItemQuery`;
* `item_detail`: one item, its rendered prompts and every condition's answers with their grades;
* `compare`: the items where two generate conditions differ, with both answers.

"Right" for a condition means that most of its graded answers to the item (its epochs) are
correct under the headline grader; "wrong" that it has graded answers and is not right.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.export.report.summary import (
    Bootstrap,
    Cost,
    Errors,
    Leaderboard,
    costs,
    errors,
    leaderboard,
)
from itemeval.store import GRADES, SOLUTIONS, latest_manifest, read_items_part
from itemeval.view.index import ViewIndex
from itemeval.view.rows import fetch_rows
from itemeval.workitem import table_to_items

PER_PAGE = 50
SORTS = ("accuracy", "-accuracy", "difficulty", "-difficulty", "id")

#: Tiers of the leaderboard (conditions whose accuracies the data cannot tell apart), by
#: generate condition id. The hook for a tiering analysis: assign a function taking the
#: `Leaderboard` and returning {condition id: tier label}; the overview shows a "tier" column
#: when it returns anything.
TierFunction = Callable[[Leaderboard], dict[str, str]]
tiers_hook: TierFunction | None = None

_SOLUTION_FIELDS = [
    "status",
    "error_code",
    "error_message",
    "text",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
    "usd",
    "latency_ms",
    "attempts",
    "cached",
    "tier",
    "model",
]
_GRADE_FIELDS = [
    "status",
    "score",
    "correct",
    "extracted",
    "parse_ok",
    "parse_code",
    "reasoning",
    "judge_text",
    "error_code",
    "error_message",
    "input_tokens",
    "output_tokens",
    "usd",
    "latency_ms",
    "cached",
    "grader",
]


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
    board = leaderboard(cells, bootstrap or Bootstrap())
    tiers = tiers_hook(board) if tiers_hook is not None else {}
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
    return Overview(
        board=board,
        tiers=tiers,
        costs={c.generate.id: c for c in costs(cells, index.plan.pricing)},
        errors=errors(cells),
        done={g.id: int(index.done[k].sum()) for k, g in enumerate(gens)},
        error_counts={g.id: int(index.errors[k].sum()) for k, g in enumerate(gens)},
        expected=cells.expected_per_condition,
        last_run=last_run,
        solutions=cells.solutions.num_rows,
        grades=cells.grades.num_rows,
        usd=usd,
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
    inputs = _inputs(index, shown)
    ids = index.item_ids.take(pa.array(shown, type=pa.int64())).to_pylist()
    dataset_codes = index.cells.items.column("dataset").take(pa.array(shown, type=pa.int64()))
    modalities = modality_values.take(pa.array(shown, type=pa.int64())).to_pylist()
    rows = [
        ItemRow(
            item_id=item_id,
            dataset=str(dataset),
            modality=modality,
            difficulty=_number(index.difficulty[i]),
            accuracy=_number(accuracy[i]),
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


def _inputs(index: ViewIndex, codes: np.ndarray) -> list[str]:
    if len(codes) == 0 or len(index.snapshots) < len(index.cells.datasets):
        return [""] * len(codes)
    ids = index.item_ids.take(pa.array(codes, type=pa.int64()))
    return index.fetcher(["input"]).take(ids).column("input").to_pylist()


def _number(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


# -- one item ---------------------------------------------------------------------------------


@dataclass
class GradeView:
    grader: str  # grade condition label
    kind: str
    stale: bool
    valid: bool
    fields: dict[str, Any]


@dataclass
class Answer:
    key: str  # "<gen code>:<epoch>", what the diff form names
    gen: int
    condition: str  # slug
    condition_id: str
    epoch: int
    fields: dict[str, Any]
    grades: list[GradeView] = field(default_factory=list)


@dataclass
class Prompt:
    template: str
    conditions: list[str]  # slugs
    messages: tuple[dict[str, str], ...]


@dataclass
class ItemDetail:
    item_id: str
    item: dict[str, Any] | None  # the snapshot row (None before the snapshot is written)
    metadata: dict[str, Any]
    prompts: list[Prompt]
    answers: list[Answer]  # by condition (design order), then epoch
    epochs: int
    accuracy: float | None
    diff: list[tuple[str, str]] | None  # (op, text): "=", "-", "+"
    diff_pair: tuple[str, str] | None


def item_detail(
    index: ViewIndex, item_id: str, a: str | None = None, b: str | None = None
) -> ItemDetail | None:
    code = index.item_code(item_id)
    if code is None:
        return None
    row = None
    metadata: dict[str, Any] = {}
    prompts: list[Prompt] = []
    item_dataset = index.cells.items.column("dataset")[code].as_py()
    if item_dataset in index.snapshots:
        table = index.fetcher(
            [
                "item_id",
                "dataset",
                "input",
                "target",
                "grading_scheme",
                "modality",
                "task_prompt",
                "difficulty",
                "metadata",
            ]
        ).take(pa.array([item_id]))
        row = table.to_pylist()[0]
        metadata = json.loads(row["metadata"]) if row["metadata"] else {}
        work = table_to_items(table)[0]
        by_template: dict[str, Prompt] = {}
        for condition in index.plan.design.generate:
            name = condition.prompt.name
            if name not in by_template:
                by_template[name] = Prompt(name, [], condition.prompt.render_prompt(work))
            by_template[name].conditions.append(condition.slug)
        prompts = list(by_template.values())
    answers = answers_of(index, [code])[code]
    accuracy, _ = item_accuracy(index)
    diff_pair = None
    diff = None
    by_key = {answer.key: answer for answer in answers}
    if a in by_key and b in by_key:
        diff_pair = (a, b)
        diff = word_diff(
            str(by_key[a].fields.get("text") or ""), str(by_key[b].fields.get("text") or "")
        )
    return ItemDetail(
        item_id=item_id,
        item=row,
        metadata=metadata,
        prompts=prompts,
        answers=answers,
        epochs=index.facets.epochs,
        accuracy=_number(accuracy[code]),
        diff=diff,
        diff_pair=diff_pair,
    )


def answers_of(
    index: ViewIndex, items: list[int], gens: list[int] | None = None
) -> dict[int, list[Answer]]:
    """Every answer (and its grades) of `items` by the generate conditions `gens` (all by
    default), fetched from their fragments."""
    facets = index.facets
    gens = list(range(len(facets.generate))) if gens is None else gens
    out: dict[int, list[Answer]] = {i: [] for i in items}
    mine = index.cells.solutions.take(pa.array(index.solution_rows.rows(items)))
    s_gen = mine.column("gen").to_numpy()
    answers: dict[tuple[int, int, int], Answer] = {}
    chosen_by_gen = [(gen, mine.filter(pa.array(s_gen == gen))) for gen in gens]
    fetched_by_gen = fetch_rows(
        SOLUTIONS,
        _SOLUTION_FIELDS,
        [
            (index.solution_where[gen], c.column("frag").to_numpy(), c.column("pos").to_numpy())
            for gen, c in chosen_by_gen
        ],
    )
    for (gen, chosen), fetched in zip(chosen_by_gen, fetched_by_gen, strict=True):
        g = facets.generate[gen]
        for item, epoch, fields in zip(
            chosen.column("item").to_pylist(),
            chosen.column("epoch").to_pylist(),
            fetched.to_pylist(),
            strict=True,
        ):
            answers[(item, gen, epoch)] = Answer(f"{gen}:{epoch}", gen, g.slug, g.id, epoch, fields)
    grades = index.cells.grades.take(pa.array(index.grade_rows.rows(items)))
    if grades.num_rows and answers:
        g_gen = grades.column("gen").to_numpy()
        g_grade = grades.column("grade").to_numpy()
        keep = np.isin(g_gen, np.asarray(gens, dtype=np.int32))
        chosen_by_grade = [
            (code, grades.filter(pa.array(keep & (g_grade == code))))
            for code in range(len(facets.grade))
        ]
        fetched_by_grade = fetch_rows(
            GRADES,
            _GRADE_FIELDS,
            [
                (index.grade_where[code], c.column("frag").to_numpy(), c.column("pos").to_numpy())
                for code, c in chosen_by_grade
            ],
        )
        for (code, chosen), fetched in zip(chosen_by_grade, fetched_by_grade, strict=True):
            grader = facets.grade[code]
            for item, gen, epoch, stale, valid, fields in zip(
                chosen.column("item").to_pylist(),
                chosen.column("gen").to_pylist(),
                chosen.column("epoch").to_pylist(),
                chosen.column("stale").to_pylist(),
                chosen.column("valid").to_pylist(),
                fetched.to_pylist(),
                strict=True,
            ):
                answer = answers.get((item, gen, epoch))
                if answer is not None:
                    answer.grades.append(GradeView(grader.label, grader.kind, stale, valid, fields))
    for (item, _, _), answer in sorted(answers.items()):
        out[item].append(answer)
    return out


_TOKENS = re.compile(r"\s+|[^\s]+")


def word_diff(a: str, b: str) -> list[tuple[str, str]]:
    """A word-level diff of two texts: ("=", text), ("-", only in a), ("+", only in b)."""
    left, right = _TOKENS.findall(a), _TOKENS.findall(b)
    out: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.append(("=", "".join(left[i1:i2])))
            continue
        if i2 > i1:
            out.append(("-", "".join(left[i1:i2])))
        if j2 > j1:
            out.append(("+", "".join(right[j1:j2])))
    return out


# -- compare ----------------------------------------------------------------------------------


@dataclass
class CompareRow:
    item_id: str
    dataset: str
    input: str
    accuracy_a: float
    accuracy_b: float
    answers_a: list[Answer]
    answers_b: list[Answer]


@dataclass
class Comparison:
    a: int | None
    b: int | None
    both: int = 0  # items graded under both
    a_better: int = 0
    b_better: int = 0
    same: int = 0
    rows: list[CompareRow] = field(default_factory=list)
    total: int = 0
    page: int = 1
    pages: int = 1


def compare(
    index: ViewIndex, a_ref: str, b_ref: str, page: int = 1, per_page: int = 20
) -> Comparison:
    """The items where conditions `a` and `b` differ under the headline grader (accuracy over
    epochs), the largest differences first, with both conditions' answers."""
    a, b = index.gen_code(a_ref), index.gen_code(b_ref)
    if a is None or b is None:
        return Comparison(a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc_a = index.correct[a] / np.maximum(index.graded[a], 1)
        acc_b = index.correct[b] / np.maximum(index.graded[b], 1)
    both = (index.graded[a] > 0) & (index.graded[b] > 0)
    delta = np.where(both, acc_a - acc_b, 0.0)
    differ = np.flatnonzero(both & (delta != 0))
    order = np.argsort(-np.abs(delta[differ]), kind="stable")
    differ = differ[order]
    total = len(differ)
    pages = max(1, -(-total // per_page))
    page = min(max(1, page), pages)
    shown = differ[(page - 1) * per_page : page * per_page]
    answers = answers_of(index, shown.tolist(), [a, b]) if len(shown) else {}
    inputs = _inputs(index, shown)
    ids = index.item_ids.take(pa.array(shown, type=pa.int64())).to_pylist()
    datasets = index.cells.items.column("dataset").take(pa.array(shown, type=pa.int64()))
    rows = [
        CompareRow(
            item_id=item_id,
            dataset=str(dataset),
            input=text,
            accuracy_a=float(acc_a[i]),
            accuracy_b=float(acc_b[i]),
            answers_a=[x for x in answers[i] if x.gen == a],
            answers_b=[x for x in answers[i] if x.gen == b],
        )
        for i, item_id, dataset, text in zip(
            shown.tolist(), ids, datasets.to_pylist(), inputs, strict=True
        )
    ]
    return Comparison(
        a=a,
        b=b,
        both=int(both.sum()),
        a_better=int((both & (delta > 0)).sum()),
        b_better=int((both & (delta < 0)).sum()),
        same=int((both & (delta == 0)).sum()),
        rows=rows,
        total=total,
        page=page,
        pages=pages,
    )
