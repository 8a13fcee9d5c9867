"""What each condition cost, computed from `StudyCells` (the report, `status` and the viewer
show it through `numbers.study_numbers`):

* paid = USD of the condition's logical solution rows and of every grade of them;
* saved by the response cache = what the calls whose answers came from the response cache would
  have cost at their prices (the cells' `cache_usd`: `results._priced`);
* alone = paid + saved: every call at its price, whatever ran before;
* cost per correct answer = alone / correct answers under the headline grader;
* saved by prompt caching = input tokens the providers served from their prompt caches, on the
  condition's paid rows (generation and grading; response-cache answers paid nothing), times
  the model's input minus cached-input price, at the pricing table's prices;
* saved by the batch tier = what the condition's paid batch rows (generation and grading,
  `tier = batch`) would have cost more at live prices: `usd / share - usd`, the share of the
  model's prices its provider charges through its batch API (the pricing table's `batch`).

Everything is summed from counted rows (the solutions, a group-by of the grades, `grade_hits`):
nothing of the grades is copied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from itemeval.providers.money import ModelPrice, Pricing
from itemeval.report._summary import headline_code
from itemeval.results import GenerateFacets, StudyCells


@dataclass(frozen=True)
class Cost:
    """What a generate condition's logical rows (its answers and every grade of them) cost.

    `usd` is what was paid; `cache_saved_usd` what the response cache saved (its answers'
    rows paid nothing; priced at the calls' prices, `results._priced`); `alone_usd` what
    the condition would have cost alone, every call at its price: paid + saved, whatever ran
    before it. Cost per correct answer divides `alone_usd`, so it does not depend on run
    order or on answers another condition happened to share."""

    generate: GenerateFacets
    generation_usd: float  # paid
    grading_usd: float  # paid
    correct: int
    graded: int
    tokens: int
    prompt_cached_tokens: int = 0  # input tokens served from providers' prompt caches
    prompt_cache_saved_usd: float = 0.0
    batch_rows: int = 0  # generation and grading rows answered through batch APIs
    batch_saved_usd: float = 0.0  # what the batch price saved on them
    cache_hits: int = 0  # generation and grading rows answered from the response cache
    cache_saved_usd: float = 0.0  # what those calls would have cost

    @property
    def usd(self) -> float:
        """Paid: generation and grading."""
        return self.generation_usd + self.grading_usd

    @property
    def alone_usd(self) -> float:
        """What the condition would have cost alone: every call at its price."""
        return self.usd + self.cache_saved_usd

    @property
    def per_correct(self) -> float | None:
        """Alone USD / correct answers under the headline grader."""
        return self.alone_usd / self.correct if self.correct else None


def costs(cells: StudyCells, pricing: Pricing | None = None) -> list[Cost]:
    """Per generate condition: what its answers and their grading paid, what the response
    cache saved, what it would have cost alone, per correct answer; with `pricing`, what prompt
    caching and the batch tier saved. From counted rows: nothing of the grades is copied."""
    f = cells.facets
    calls = _call_groups(cells)
    n_gen = len(f.generate)

    def per_gen(table: pa.Table, column: str) -> np.ndarray:
        if table.num_rows == 0:
            return np.zeros(n_gen)
        values = pc.fill_null(table.column(column), 0).to_numpy(zero_copy_only=False)
        gens = table.column("gen").to_numpy()
        return np.bincount(gens, weights=values.astype(np.float64), minlength=n_gen)

    stage = calls.column("grade").to_numpy()
    generation = calls.filter(pa.array(stage < 0))
    grading = calls.filter(pa.array(stage >= 0))
    cached = calls.filter(calls.column("cached"))
    batch = calls.filter(calls.column("batch"))
    solutions = cells.solutions
    tokens = per_gen(solutions, "input_tokens") + per_gen(solutions, "output_tokens")
    saved = per_gen(solutions, "cache_usd") + per_gen(cells.grade_hits, "cache_usd")
    correct, graded = _headline_tallies(cells)
    prompt_tokens, prompt_saved = _prompt_cache(cells, calls, pricing)
    batch_saved = _batch_saved(cells, calls, pricing)
    generation_usd, grading_usd = per_gen(generation, "usd"), per_gen(grading, "usd")
    hits, batch_rows = per_gen(cached, "rows"), per_gen(batch, "rows")
    return [
        Cost(
            generate=g,
            generation_usd=float(generation_usd[c]),
            grading_usd=float(grading_usd[c]),
            correct=int(correct[c]),
            graded=int(graded[c]),
            tokens=int(tokens[c]),
            prompt_cached_tokens=int(prompt_tokens[c]),
            prompt_cache_saved_usd=float(prompt_saved[c]),
            batch_rows=int(batch_rows[c]),
            batch_saved_usd=float(batch_saved[c]),
            cache_hits=int(hits[c]),
            cache_saved_usd=float(saved[c]),
        )
        for c, g in enumerate(f.generate)
    ]


_CALL_GROUPS = pa.schema(
    [
        ("gen", pa.int32()),
        ("grade", pa.int32()),  # -1: generation
        ("cached", pa.bool_()),
        ("batch", pa.bool_()),
        ("rows", pa.int64()),
        ("usd", pa.float64()),
        ("cached_input_tokens", pa.int64()),
    ]
)


def _call_groups(cells: StudyCells) -> pa.Table:
    """The generation and grading rows counted by `gen, grade, cached, batch` (grade -1 for
    generation), with the sums of `usd` and `cached_input_tokens`: a small table."""
    parts = []
    solutions = cells.solutions
    if solutions.num_rows:
        grouped = solutions.group_by(["gen", "cached", "batch"], use_threads=False).aggregate(
            [("rows", "sum"), ("usd", "sum"), ("cached_input_tokens", "sum")]
        )
        parts.append(
            grouped.append_column(
                "grade", pa.array(np.full(grouped.num_rows, -1, np.int32))
            ).rename_columns([n.removesuffix("_sum") for n in grouped.column_names] + ["grade"])
        )
    grades = cells.grades
    if grades.num_rows:
        grouped = grades.group_by(["gen", "grade", "cached", "batch"], use_threads=False).aggregate(
            [([], "count_all"), ("usd", "sum"), ("cached_input_tokens", "sum")]
        )
        parts.append(
            grouped.rename_columns(
                [
                    "rows" if n == "count_all" else n.removesuffix("_sum")
                    for n in grouped.column_names
                ]
            )
        )
    tables = [t.select(_CALL_GROUPS.names).cast(_CALL_GROUPS) for t in parts]
    return pa.concat_tables(tables) if tables else _CALL_GROUPS.empty_table()


def _headline_tallies(cells: StudyCells) -> tuple[np.ndarray, np.ndarray]:
    """Per generate condition: correct answers and valid grades under the headline grader."""
    n_gen = len(cells.facets.generate)
    code = headline_code(cells)
    grades = cells.grades
    if code is None or grades.num_rows == 0:
        return np.zeros(n_gen, np.int64), np.zeros(n_gen, np.int64)
    mine = grades.column("valid").to_numpy(zero_copy_only=False) & (
        grades.column("grade").to_numpy() == code
    )
    gen = grades.column("gen").to_numpy()[mine]
    right = pc.fill_null(grades.column("correct"), False).to_numpy(zero_copy_only=False)[mine]
    return (
        np.bincount(gen[right], minlength=n_gen),
        np.bincount(gen, minlength=n_gen),
    )


def _price_of(
    cells: StudyCells, pricing: Pricing | None, grade: int, gen: int
) -> ModelPrice | None:
    """The live price of the calls of generation (`grade` -1) or of grade condition `grade`."""
    model = (
        cells.facets.generate[gen].model if grade < 0 else cells.facets.grade[grade].grader_model
    )
    return pricing.price(model) if pricing is not None and model else None


def _prompt_cache(
    cells: StudyCells, calls: pa.Table, pricing: Pricing | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per generate condition: prompt-cached input tokens of its paid generation and grading
    rows, and what they saved at the models' prices (0 without `pricing`)."""
    n_gen = len(cells.facets.generate)
    tokens, saved = np.zeros(n_gen, np.int64), np.zeros(n_gen)
    paid = calls.filter(pc.invert(calls.column("cached")))
    for gen, grade, value in zip(
        paid.column("gen").to_pylist(),
        paid.column("grade").to_pylist(),
        paid.column("cached_input_tokens").to_pylist(),
        strict=True,
    ):
        if not value:
            continue
        tokens[gen] += value
        price = _price_of(cells, pricing, grade, gen)
        if price is not None:
            saved[gen] += price.read_savings(value)
    return tokens, saved


def _batch_saved(cells: StudyCells, calls: pa.Table, pricing: Pricing | None) -> np.ndarray:
    """Per generate condition: what the batch price saved on its paid batch rows (`usd /
    share - usd`, 0 without `pricing`)."""
    saved = np.zeros(len(cells.facets.generate))
    paid = calls.filter(pc.and_(calls.column("batch"), pc.invert(calls.column("cached"))))
    for gen, grade, usd in zip(
        paid.column("gen").to_pylist(),
        paid.column("grade").to_pylist(),
        paid.column("usd").to_pylist(),
        strict=True,
    ):
        price = _price_of(cells, pricing, grade, gen)
        share = price.batch_share if price is not None else None
        if share and usd:
            saved[gen] += float(usd) / share - float(usd)
    return saved
