"""One item and two conditions side by side: answers fetched from their fragments.

* `item_detail`: the item, its prompt rendered through each prompt template as the model saw
  it, and every condition's answers (every epoch) with their grades under every grader; a word
  diff of two chosen answers;
* `compare`: the items where two generate conditions differ (accuracy over epochs, headline
  grader), largest differences first, with both conditions' answers.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.datasets import table_to_items
from itemeval.judging._panels import MEMBER_PARSE_FAILURE
from itemeval.store import GRADES, SOLUTIONS, Stage
from itemeval.view._index import ViewIndex
from itemeval.view._partitions import Where
from itemeval.view._queries import inputs_of, item_accuracy, number_or_none
from itemeval.view._rows import fetch_rows

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
        accuracy=number_or_none(accuracy[code]),
        diff=diff,
        diff_pair=diff_pair,
    )


def _fetch(
    stage: Stage, fields: list[str], where: list[Where], chosen: list[tuple[int, pa.Table]]
) -> list[pa.Table]:
    """For each `(code, index rows)` of `chosen`: those rows' stored `fields`, read from the
    fragments of partition `where[code]` at the rows' `frag` and `pos`."""
    return fetch_rows(
        stage,
        fields,
        [
            (where[code], c.column("frag").to_numpy(), c.column("pos").to_numpy())
            for code, c in chosen
        ],
    )


def answers_of(
    index: ViewIndex, items: list[int], gens: list[int] | None = None
) -> dict[int, list[Answer]]:
    """Every answer (and its grades) of `items` by the generate conditions `gens` (all by
    default), fetched from their fragments."""
    facets = index.facets
    gens = list(range(len(facets.generate))) if gens is None else gens
    out: dict[int, list[Answer]] = {i: [] for i in items}
    mine = index.answers.take(pa.array(index.solution_rows.rows(items)))
    s_gen = mine.column("gen").to_numpy()
    answers: dict[tuple[int, int, int], Answer] = {}
    chosen_by_gen = [(gen, mine.filter(pa.array(s_gen == gen))) for gen in gens]
    fetched_by_gen = _fetch(SOLUTIONS, _SOLUTION_FIELDS, index.solution_where, chosen_by_gen)
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
        stored = index.stored_graders  # the panels after them are stored nowhere
        fetched_by_grade = _fetch(
            GRADES, _GRADE_FIELDS, index.grade_where, chosen_by_grade[:stored]
        ) + [_panel_fields(chosen) for _, chosen in chosen_by_grade[stored:]]
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


def _panel_fields(rows: pa.Table) -> pa.Table:
    """What the page shows of a panel's verdicts (index rows): correct or wrong, or that a
    member's output could not be parsed."""
    valid = rows.column("valid")
    n = rows.num_rows
    return pa.table(
        {
            "status": pa.array(["ok"] * n, pa.string()),
            "correct": rows.column("correct"),
            "parse_ok": valid,
            "parse_code": pc.if_else(valid, pa.scalar(None, pa.string()), MEMBER_PARSE_FAILURE),
            **{name: pa.nulls(n) for name in ("score", "extracted", "reasoning", "judge_text")},
            "cached": pa.array([False] * n),
        }
    )


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
    inputs = inputs_of(index, shown)
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
