"""The report's tables as plain text cells, shared by the HTML page and the Markdown summary.

Each function turns one part of `ReportData` into a `TextTable` (a header, rows of strings and
which columns hold numbers), so both renderers show exactly the same numbers. `METHOD` is the
list of definitions printed at the end of both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from itemeval.report._data import ReportData, leaderboard_lines
from itemeval.report._difficulty import ItemScore
from itemeval.report._summary import CodeCount, FacetTable, fmt_proportion, fmt_usd

MAX_LISTED_UNSOLVED = 50
NOTHING_GRADED = "Nothing graded yet: `itemeval run STUDY` (or `itemeval grade STUDY`) first."


class _Bounded(Protocol):
    @property
    def value(self) -> float | None: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...


def interval_text(estimate: _Bounded, sign: str = "") -> str:
    """`0.512 [0.480, 0.544]` (`sign="+"`: `+0.012 [-0.020, +0.044]`); the value alone without
    bounds; `n/a` without a value."""
    if estimate.value is None:
        return "n/a"
    if estimate.low is None or estimate.high is None:
        return f"{estimate.value:{sign}.3f}"
    return f"{estimate.value:{sign}.3f} [{estimate.low:{sign}.3f}, {estimate.high:{sign}.3f}]"


@dataclass(frozen=True)
class TextTable:
    header: list[str]
    rows: list[list[str]]
    numeric: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.rows)


usd = fmt_usd  # the report's dollars, as the viewer and `status` print them


def number(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3f}"


def shorten(text: str | None, limit: int = 140) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def overview(data: ReportData) -> list[tuple[str, str, str]]:
    """Key facts of the study: (label, value, detail)."""
    f = data.facets
    items = sum(n for _, n in data.datasets)
    per_dataset = ", ".join(f"{name} {n:,}" for name, n in data.datasets)
    graders = len(f.grade)
    expected = items * f.epochs * len(f.generate) * graders
    facts = [
        ("Items", f"{items:,}", f"{len(data.datasets)} datasets: {per_dataset}"),
        (
            "Conditions",
            f"{len(f.generate)} x {graders}",
            f"{len(f.models)} models x {len(f.prompts)} prompts x {len(f.model_configs)} "
            f"configs, {graders} graders; {f.epochs} epochs",
        ),
        (
            "Valid grades",
            f"{data.graded:,}",
            f"of {expected:,} the design asks for; {data.solutions:,} answers stored",
        ),
        ("Paid", usd(data.usd), "generation and grading of the current rows"),
    ]
    if data.cache_hits:
        facts += [
            (
                "Saved by the response cache",
                usd(data.cache_saved_usd),
                f"{data.cache_hits:,} answers and grades came from the response cache and paid "
                "nothing; their calls at their prices",
            ),
            (
                "Alone",
                usd(data.usd + data.cache_saved_usd),
                "paid + saved: what the conditions cost, every call at its price, whatever "
                "ran before",
            ),
        ]
    if data.prompt_cache_saved_usd > 0:
        facts.append(
            (
                "Saved by prompt caching",
                usd(data.prompt_cache_saved_usd),
                "input the providers served from their prompt caches, at cached-input prices",
            )
        )
    if data.batch_rows:
        facts.append(
            (
                "Saved by the batch tier",
                usd(data.batch_saved_usd),
                f"{data.batch_rows:,} rows answered through providers' batch APIs, at batch "
                "prices (against live prices)",
            )
        )
    board = data.leaderboard
    if board.conditions and board.primary is not None:
        best = board.conditions[0]
        value = board.headline(best)
        if value is not None and value.defined:
            facts.append(
                ("Top accuracy", f"{value.value:.3f}", f"{best.name}, by {board.primary.label}")
            )
    return facts


def provenance(data: ReportData) -> str:
    """Where the numbers come from: the store and the last run."""
    text = f"Store {data.store}"
    if data.last_run:
        run = data.last_run
        text += f"; last run {run['run_id']} ({run['command']}, {run['outcome']})"
    return text


def condition_table(data: ReportData) -> TextTable:
    header, rows, right = leaderboard_lines(data.leaderboard, data.headline_family)
    return TextTable(header, rows, right)


def model_table(data: ReportData) -> TextTable:
    board = data.leaderboard
    graders = sorted(board.graders, key=lambda g: board.primary is None or g.id != board.primary.id)
    found = (
        data.statistics.find(board.primary.id, scope="models")
        if data.statistics is not None and board.primary is not None
        else None
    )
    family = found[1] if found is not None else None
    position = {name: u for u, name in enumerate(family.units)} if family else {}
    from itemeval.statistics import rank_text

    rows = []
    for rank, line in enumerate(board.models, start=1):
        headline = board.headline(line)
        u = position.get(line.name)
        lead = [str(rank)] if family is None else ["", ""]
        if family is not None and u is not None:
            lead = [str(family.tiers[u]), rank_text(family, u)]
        rows.append(
            [
                *lead,
                line.name,
                str(line.conditions),
                *(fmt_proportion(line.accuracy.get(g.id)) for g in graders),
                f"{int(headline.trials):,}" if headline and headline.defined else "0",
            ]
        )
    first = ["#"] if family is None else ["tier", "rank"]
    header = [*first, "model", "conditions", *(g.label for g in graders), "graded"]
    n = len(first)
    return TextTable(header, rows, {*range(n), n + 1, *range(n + 2, n + 3 + len(graders))})


def facet_matrix(table: FacetTable, column_title: str) -> TextTable:
    spread = len(table.columns) > 1
    header = ["model", *table.columns] + (["spread (max - min)"] if spread else [])
    rows = []
    for row in table.rows:
        cells = [fmt_proportion(table.cells.get((row, c))) for c in table.columns]
        if spread:
            value = table.spread(row)
            cells.append("n/a" if value is None else f"{value:.3f}")
        rows.append([row, *cells])
    return TextTable(header, rows, set(range(1, len(header))))


def agreement_table(data: ReportData) -> TextTable:
    rows = []
    for pair in data.agreement:
        a = pair.agreement
        rows.append(
            [
                pair.first.label,
                pair.second.label,
                pair.kinds,
                f"{a.n:,}",
                "n/a" if math.isnan(a.rate) else f"{a.rate:.3f}",
                "n/a" if math.isnan(a.kappa) else f"{a.kappa:.3f}",
                f"{a.only_first:,}",
                f"{a.only_second:,}",
            ]
        )
    header = [
        "grader A",
        "grader B",
        "kinds",
        "answers",
        "agreement",
        "Cohen's kappa",
        "only A correct",
        "only B correct",
    ]
    return TextTable(header, rows, {3, 4, 5, 6, 7})


def cost_table(data: ReportData) -> TextTable:
    """Per generate condition, cheapest per correct answer first: paid, saved by the response
    cache, alone (paid + saved), and alone per correct answer."""
    rows = []
    ordered = sorted(
        data.costs,
        key=lambda c: (c.per_correct is None, c.per_correct or 0.0, c.generate.slug),
    )
    for cost in ordered:
        rows.append(
            [
                cost.generate.slug,
                cost.generate.model_name,
                usd(cost.generation_usd),
                usd(cost.grading_usd),
                usd(cost.usd),
                f"{cost.cache_hits:,}",
                usd(cost.cache_saved_usd),
                usd(cost.alone_usd),
                f"{cost.correct:,} / {cost.graded:,}",
                usd(cost.per_correct),
                f"{cost.tokens:,}",
                f"{cost.prompt_cached_tokens:,}",
                usd(cost.prompt_cache_saved_usd),
                f"{cost.batch_rows:,}",
                usd(cost.batch_saved_usd),
            ]
        )
    header = [
        "condition",
        "model",
        "generation paid",
        "grading paid",
        "paid",
        "response-cache answers",
        "saved by the response cache",
        "alone",
        "correct / graded",
        "alone per correct answer",
        "generation tokens",
        "prompt-cached tokens",
        "saved by prompt caching",
        "batch rows",
        "saved by the batch tier",
    ]
    return TextTable(header, rows, set(range(2, len(header))))


#: What the cost table's columns mean (the report prints it above the table).
COST_NOTE = (
    "Paid: what the condition's current answers and every grade of them cost. Response-cache "
    "answers paid nothing: 'saved by the response cache' is what those calls cost at their "
    "prices (their stored tokens at the pricing table's prices). Alone = paid + saved: what the "
    "condition would cost run by itself, every call at its price; it does not depend on which "
    "condition ran first. Alone per correct answer divides it by the correct answers under the "
    "headline grader."
)


def coverage_table(data: ReportData) -> TextTable:
    rows = [
        [
            c.stage,
            c.condition,
            f"{c.expected:,}",
            f"{c.valid:,}",
            f"{c.errors:,}",
            f"{c.parse_failures:,}",
            f"{c.stale:,}",
            f"{c.missing:,}",
        ]
        for c in data.errors.coverage
    ]
    header = [
        "stage",
        "condition",
        "expected",
        "done",
        "errors",
        "parse failures",
        "stale",
        "not yet",
    ]
    return TextTable(header, rows, {2, 3, 4, 5, 6, 7})


def code_table(counts: list[CodeCount], what: str) -> TextTable:
    return TextTable(
        ["condition", what, "count"],
        [[c.condition, c.code, f"{c.count:,}"] for c in counts],
        {2},
    )


def difficulty_table(data: ReportData) -> TextTable:
    rows = [
        [
            d.dataset,
            f"{d.items:,}",
            f"{d.graded_items:,}",
            "n/a" if math.isnan(d.mean_accuracy) else f"{d.mean_accuracy:.3f}",
            f"{d.solved_by_all:,}",
            f"{d.unsolved_items:,}",
        ]
        for d in data.difficulty
    ]
    header = [
        "dataset",
        "items",
        "graded items",
        "mean item accuracy",
        "always right",
        "never right",
    ]
    return TextTable(header, rows, {1, 2, 3, 4, 5})


def _item_row(score: ItemScore) -> list[str]:
    stated = "" if score.stated_difficulty is None else f"{score.stated_difficulty:g}"
    return [
        score.dataset,
        score.item_id,
        f"{score.accuracy:.3f}",
        f"{score.correct:,} / {score.graded:,}",
        stated,
        shorten(score.input),
        shorten(score.target, 60),
    ]


_ITEM_HEADER = [
    "dataset",
    "item",
    "accuracy",
    "correct / graded",
    "stated difficulty",
    "input",
    "target",
]


def hardest_table(data: ReportData) -> TextTable:
    rows = [_item_row(s) for d in data.difficulty for s in d.hardest]
    return TextTable(_ITEM_HEADER, rows, {2, 3, 4})


def unsolved_table(data: ReportData) -> TextTable:
    rows = [_item_row(s) for d in data.difficulty for s in d.unsolved[:MAX_LISTED_UNSOLVED]]
    return TextTable(_ITEM_HEADER, rows, {2, 3, 4})


def unsolved_overflow(data: ReportData) -> int:
    return sum(d.unlisted_unsolved for d in data.difficulty)


def headline_note(data: ReportData) -> str:
    board = data.leaderboard
    if board.primary is None:
        return "This study has no grader, so nothing is ranked."
    others = [g.label for g in board.graders if g.id != board.primary.id]
    note = f"Ranked by accuracy under {board.primary.label}"
    note += (
        " (a verifiable scorer)"
        if board.primary.kind == "scorer"
        else " (no scorer: the first judge)"
    )
    if others:
        note += "; also shown: " + ", ".join(others)
    return (
        note
        + f". 95% intervals: percentile bootstrap over {_resampled(data)} with an item's epochs "
        "kept together "
        f"({data.bootstrap.resamples:,} resamples, seed {data.bootstrap.seed})."
    )


def _resampled(data: ReportData) -> str:
    clusters = data.statistics.clusters if data.statistics is not None else None
    if clusters is None:
        return "items"
    return f"clusters of items sharing {clusters.by!r} (analysis.cluster_by)"


METHOD = [
    "Accuracy = correct answers / graded answers. Only final grades of the current answer "
    "count: a failed call, a judge output that breaks the score contract (a parse failure) and "
    "a grade of an earlier answer text are left out of both numbers and listed under errors.",
    "Confidence intervals: 95% percentile bootstrap. Each resample draws items with "
    "replacement and keeps every epoch (and, for a model, every condition) of a drawn item "
    "together, so repeated answers to one item do not count as independent evidence. Seeded: "
    "the same store gives the same intervals.",
    "Paired comparisons: the difference of two conditions over the items both graded, a 95% "
    "interval from a paired bootstrap (one resample drives both; epochs stay with their item), "
    "the exact McNemar test with one epoch and a binary score, else a paired t-test with a "
    "cluster-robust standard error; p-values adjusted per family (Holm by default). Tier: the "
    "conditions not told apart from the best of the tier; rank: the 95% interval of the rank "
    "over the bootstrap's resamples. Formulas and calibration: docs/statistics.md.",
    "Grader agreement: over the answers both graders graded validly, the share of equal "
    "verdicts (correct or not) and Cohen's kappa = (p_o - p_e) / (1 - p_e), where p_e is the "
    "agreement expected from each grader's own rate of 'correct'. Kappa is n/a when both "
    "graders gave a single identical verdict to everything.",
    "Cost: paid = USD of the condition's current answers + USD of every grade of them. A row "
    "answered from the response cache paid nothing and keeps its call's tokens: saved by the "
    "response cache = those tokens at the call's prices (the pricing table, as calls are "
    "priced: input, prompt-cache reads, output, the batch tier's share). Alone = paid + saved, "
    "every call at its price, whatever ran before. Cost per correct answer = alone / correct "
    "answers under the headline grader.",
    "Saved by prompt caching = input tokens the providers served from their prompt caches "
    "(on paid calls of the condition's generations and grades) x (input price - cached-input "
    "price), at the pricing table's prices. Anthropic bills cache writes at 1.25x the input "
    "price; that premium is in the USD paid, not netted out of the saving.",
    "Item accuracy pools every condition and epoch under the headline grader. Items that no "
    "answer got right are often broken (a wrong target, an ambiguous question): check them.",
]
