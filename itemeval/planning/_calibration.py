"""Calibration of the estimate: token counts learned from the usage providers reported.

The prior (`estimate.py`) counts input at four characters a token and guesses output from the
answer a prompt asks for. Once answers are stored, what the providers reported replaces it, per
condition content (model, params and template: the response cache's group, so a renamed
condition, or an earlier study making the same calls, counts) and per item modality:

* **input**: `reported input tokens / our chars-4 count` over the same rows (for a judge, the
  count includes the judged solution's visible tokens, from its stored row). Without such rows,
  the same model's ratio over the study's other conditions; else the prior (ratio 1).
* **output**: visible output (what a judge reads) and hidden reasoning are learned apart, since
  an answer's length scales with what the prompt asks for and reasoning does not. Visible
  output is scaled (observed / prior), reasoning is a mean per call; both for the condition as
  a whole and per modality, each modality's own figure shrunk towards the condition's by as
  much as the modalities differ no more than chance would make them (`_shrunk`). Rows of items
  outside this study (an earlier study in the cache) give the condition's figure when no item
  of this study has a row yet.
* **prompt caching**: the share of input tokens the provider served from its cache.
* **the response cache**: a call whose answer is cached costs nothing. A generate cell whose
  answer the cache holds (same condition content, item and epoch) is counted as free; a judge
  condition's calls are free at the share of its stored rows the cache answered (judge requests
  repeat when two conditions give byte-identical answers, as short answers often are).

Rows come from this study's store (`solutions/`, `grades/`: the row of each cell) and from
the response cache (`<cache>/calls/group=<group>/`: every paid answer, this study's and other
studies'); cache rows of cells the store holds are left out, so a call counts once, and rows
without usage (a host that reports none) are left out. Only the usage columns are read, never a
text (reading them, a condition at a time: `usage_rows.py`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from itemeval.planning._design import Design, GenerateCondition, GradeCondition
from itemeval.planning._usage_rows import (
    CELL,
    USAGE,
    CacheReader,
    Source,
    UsageRows,
    cache_only,
    covers_selection,
    empty_visible,
    judge_prior_input,
    let_go,
    store_rows,
    visible_of,
)
from itemeval.store import (
    GRADES,
    SOLUTIONS,
    STUDY_CACHE_DIR,
    StudyStore,
    cache_group,
    default_cache_url,
)
from itemeval.store._positions import ItemLookup

#: Rows a condition needs before what they show replaces the prior.
MIN_ROWS = 3


# -- what calibration works on and gives back -----------------------------------------------


@dataclass(frozen=True)
class Priors:
    """The estimate's prior per item (arrays aligned with `item_ids`, the selected items)."""

    item_ids: pa.Array
    modality: np.ndarray  # small int codes
    generate: Mapping[
        str, tuple[np.ndarray, np.ndarray, np.ndarray]
    ]  # id -> input, output, visible
    judge_input: Mapping[str, np.ndarray]  # judge id -> rubric tokens without the response
    judge_output: Mapping[str, np.ndarray]  # judge id -> prior output


@dataclass(frozen=True)
class Fit:
    """How one condition's prior token counts become calibrated ones (the default: the prior)."""

    source: Source = field(default_factory=Source)
    input_ratio: float | None = None
    input_from: str = "prior"  # "rows" | "model" (the model's other conditions) | "prior"
    visible_scale: float | None = None  # observed / prior visible output
    visible_factors: Mapping[int, float] = field(default_factory=dict)  # modality -> factor
    reasoning_mean: float | None = None  # hidden reasoning tokens per call
    reasoning_by_modality: Mapping[int, float] = field(default_factory=dict)
    output_scale: float | None = None  # calibrated / prior output over the study's items (shown)
    cached_fraction: float = 0.0
    #: Per item: cells not in the store whose answer the response cache holds (free).
    answered: np.ndarray | None = None
    #: Share of calls the response cache answers (judges: learned from the stored rows).
    answered_share: float = 0.0

    def input(self, prior: np.ndarray) -> np.ndarray:
        return prior * (1.0 if self.input_ratio is None else self.input_ratio)

    def visible(self, prior_visible: np.ndarray, modality: np.ndarray) -> np.ndarray:
        if self.visible_scale is None:
            return prior_visible.astype(np.float64)
        return prior_visible * _lookup(modality, self.visible_scale, self.visible_factors)

    def output(
        self, prior_output: np.ndarray, prior_visible: np.ndarray, modality: np.ndarray
    ) -> np.ndarray:
        """Calibrated visible output plus calibrated reasoning (the prior's where unknown)."""
        hidden = prior_output.astype(np.float64) - prior_visible
        if self.reasoning_mean is not None:
            hidden = _lookup(modality, self.reasoning_mean, self.reasoning_by_modality)
        return self.visible(prior_visible, modality) + hidden

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source.describe(),
            "store_rows": self.source.store_rows,
            "cache_rows": self.source.cache_rows,
            "input_ratio": _round(self.input_ratio),
            "input_from": self.input_from,
            "output_scale": _round(self.output_scale),
            "reasoning_per_call": _round(self.reasoning_mean),
            "cached_fraction": round(self.cached_fraction, 4),
            "answered_by_cache": int(self.answered.sum()) if self.answered is not None else 0,
            "answered_share": round(self.answered_share, 4),
        }


def _lookup(modality: np.ndarray, default: float, by_code: Mapping[int, float]) -> np.ndarray:
    """Per item: the value of its modality, `default` for a modality without one."""
    table = np.full(max([*by_code, int(modality.max(initial=0))]) + 1, default, np.float64)
    for code, value in by_code.items():
        table[code] = value
    return table[modality]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


@dataclass
class Calibration:
    """Fits by generate condition id and by judge condition id; what could not be read."""

    generate: dict[str, Fit] = field(default_factory=dict)
    judges: dict[str, Fit] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def cache_root_url(enabled: bool, location: str | None, store: StudyStore) -> str:
    """Where a study's runs journal their paid answers (as the driver decides it): the cache at
    `cache.location` or the user cache directory, or with `cache.enabled: false` the study's own
    `response_cache/`."""
    if enabled:
        return location or default_cache_url()
    return store.root.join(STUDY_CACHE_DIR).url


# -- the fit -----------------------------------------------------------------------------------


def calibrate(
    design: Design,
    priors: Priors,
    store: StudyStore,
    cache_url: str | None,
    storage_options: dict[str, Any] | None = None,
    *,
    force: bool = False,
) -> Calibration:
    """Fit every generate and judge condition of `design` to the rows stored now. With `force`
    (a run that calls again whatever is cached), no call is expected to be answered for free."""
    out = Calibration()
    generate = list(design.generate)
    judges = list(design.judges)
    groups = {c.id: _generate_group(c) for c in generate} | {j.id: _judge_group(j) for j in judges}
    cache = CacheReader(cache_url, storage_options, out.warnings)
    lookup = ItemLookup(priors.item_ids)
    # One condition at a time: its rows are read, reduced to a few numbers per row and let go.
    rows: dict[str, UsageRows] = {}
    visible: list[pa.Table] = []  # a judge's input covers the judged solution's visible tokens
    cells = len(priors.item_ids) * design.epochs
    for cond in generate:
        stored = store_rows(store, SOLUTIONS, cond.id, [*CELL, *USAGE, "cached"], lookup)
        if covers_selection(stored, lookup, design.epochs, cells):
            extra = cache_only(None, stored)
        else:
            extra = cache_only(cache.rows(groups[cond.id]), stored)
        prior_in, _, _ = priors.generate[cond.id]
        rows[cond.id] = UsageRows.of(stored, extra, lookup, per_item=prior_in)
        if judges:
            visible.append(visible_of(cond.id, stored))
        stored = extra = None
        let_go(rows[cond.id])
    visible_by_cell = pa.concat_tables(visible) if visible else empty_visible()
    visible = []
    for judge in judges:
        stored = store_rows(store, GRADES, judge.id, ["gen_condition_id", *CELL, *USAGE, "cached"])
        if covers_selection(stored, lookup, design.epochs, cells * len(generate)):
            extra = cache_only(None, stored)
        else:
            extra = cache_only(cache.rows(groups[judge.id]), stored.select([*CELL, *USAGE]))
        base = priors.judge_input[judge.id]
        prior_in = judge_prior_input(stored, visible_by_cell, lookup, base)
        rows[judge.id] = UsageRows.of(stored, extra, lookup, per_stored_row=prior_in)
        stored = extra = None
        let_go(rows[judge.id])
    visible_by_cell = None

    models = {c.id: c.model_id for c in generate} | {j.id: j.model_id or "" for j in judges}
    by_model = _model_ratios(rows, models)
    items = len(priors.item_ids)
    for cond in generate:
        _, prior_out, prior_visible = priors.generate[cond.id]
        fit = _fit(
            rows[cond.id], priors.modality, prior_out, prior_visible, by_model.get(cond.model_id)
        )
        answered = rows[cond.id].answered(items, design.epochs)
        if not force and answered is not None:
            fit = replace(fit, answered=answered)
        out.generate[cond.id] = fit
    for judge in judges:
        prior_out = priors.judge_output[judge.id]
        r = rows[judge.id]
        fit = _fit(r, priors.modality, prior_out, prior_out, by_model.get(judge.model_id or ""))
        if not force and r.store_rows >= MIN_ROWS:
            fit = replace(fit, answered_share=r.store_answered / r.store_rows)
        out.judges[judge.id] = fit
    return out


def _fit(
    rows: UsageRows,
    modality: np.ndarray,
    prior_out: np.ndarray,
    prior_visible: np.ndarray,
    model_ratio: float | None,
) -> Fit:
    if rows.source.rows == 0 and model_ratio is None:
        return Fit()
    reported, prior, usable = rows.input_sums()
    if usable >= MIN_ROWS and prior > 0:
        ratio, origin = reported / prior, "rows"
    elif model_ratio is not None:
        ratio, origin = model_ratio, "model"
    else:
        ratio, origin = None, "prior"
    visible_scale, visible_factors = _scale(
        rows, rows.output - rows.reasoning, modality, prior_visible
    )
    reasoning_mean, reasoning_by_modality = _means(rows, rows.reasoning, modality)
    fit = Fit(
        visible_scale=visible_scale,
        visible_factors=visible_factors,
        reasoning_mean=reasoning_mean,
        reasoning_by_modality=reasoning_by_modality,
    )
    # What the fit does to this study's output, in one number (shown, never applied).
    output_scale = None
    if visible_scale is not None or reasoning_mean is not None:
        calibrated = float(fit.output(prior_out, prior_visible, modality).sum())
        output_scale = calibrated / max(float(prior_out.sum()), 1.0)
    total_input = int(rows.input.sum())
    cached_fraction = 0.0
    if rows.source.rows >= MIN_ROWS and total_input:
        cached_fraction = min(1.0, float(rows.cached.sum()) / total_input)
    return Fit(
        source=rows.source,
        input_ratio=ratio,
        input_from=origin,
        visible_scale=visible_scale,
        visible_factors=visible_factors,
        reasoning_mean=reasoning_mean,
        reasoning_by_modality=reasoning_by_modality,
        output_scale=output_scale,
        cached_fraction=cached_fraction,
    )


def _scale(
    rows: UsageRows, observed: np.ndarray, modality: np.ndarray, prior: np.ndarray
) -> tuple[float | None, dict[int, float]]:
    """The condition's scale (observed / prior, summed) and each modality's, or (None, {})."""
    known = rows.pos >= 0
    if int(known.sum()) < MIN_ROWS:
        if len(observed) >= MIN_ROWS and len(prior) and prior.mean() > 0:
            # Only other studies' items: their mean against this study's mean prior.
            return float(observed.mean()) / float(prior.mean()), {}
        return None, {}
    prior_rows = prior[rows.pos[known]].astype(np.float64)
    usable = prior_rows > 0
    if int(usable.sum()) < MIN_ROWS:
        return None, {}
    ratios = observed[known][usable] / prior_rows[usable]
    return _shrunk(ratios, prior_rows[usable], modality[rows.pos[known]][usable])


def _means(
    rows: UsageRows, observed: np.ndarray, modality: np.ndarray
) -> tuple[float | None, dict[int, float]]:
    """The mean per call and each modality's, or (None, {}) with fewer than `MIN_ROWS` rows."""
    if len(observed) < MIN_ROWS:
        return None, {}
    known = rows.pos >= 0
    if int(known.sum()) < MIN_ROWS:
        return float(observed.mean()), {}
    values = observed[known].astype(np.float64)
    return _shrunk(values, np.ones(len(values)), modality[rows.pos[known]])


def _shrunk(
    values: np.ndarray, weights: np.ndarray, codes: np.ndarray
) -> tuple[float, dict[int, float]]:
    """The weighted mean of `values` and per code the code's own mean, shrunk towards it by as
    much as the codes' means differ no more than their noise would make them (an empirical
    Bayes estimate: a modality whose answers really are longer keeps its own mean; differences
    a handful of rows explain by chance are pooled away)."""
    overall = float(np.average(values, weights=weights))
    groups = [(int(code), codes == code) for code in np.unique(codes)]
    means = {code: float(np.average(values[m], weights=weights[m])) for code, m in groups}
    counts = {code: int(m.sum()) for code, m in groups}
    # Within-modality variance, pooled (the noise of one row).
    dof = sum(n - 1 for n in counts.values())
    if dof > 0:
        within = sum(float(((values[m] - means[c]) ** 2).sum()) for c, m in groups) / dof
    else:
        within = float(values.var())
    total = sum(counts.values())
    between = sum(n * (means[c] - overall) ** 2 for c, n in counts.items()) / total
    # What `between` would be from noise alone: (modalities - 1) x the variance of one row / rows.
    noise = within * (len(counts) - 1) / total
    spread = max(0.0, between - noise)
    out = {}
    for code, n in counts.items():
        error = within / n
        weight = 1.0 if spread + error == 0 else spread / (spread + error)
        out[code] = overall + weight * (means[code] - overall)
    return overall, out


def _model_ratios(rows: Mapping[str, UsageRows], models: Mapping[str, str]) -> dict[str, float]:
    """Each model's input ratio over all its conditions' usable rows (at least `MIN_ROWS`)."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for cid, r in rows.items():
        reported, prior, usable = r.input_sums()
        total = sums[models[cid]]
        total[0] += reported
        total[1] += prior
        total[2] += usable
    return {
        model: reported / prior
        for model, (reported, prior, usable) in sums.items()
        if usable >= MIN_ROWS and prior > 0
    }


# -- the response cache's groups ---------------------------------------------------------------


def _generate_group(cond: GenerateCondition) -> str:
    return cache_group(cond.model_id, cond.params.as_dict(), cond.prompt.sha256)


def _judge_group(cond: GradeCondition) -> str:
    assert cond.model_id is not None and cond.params is not None and cond.rubric is not None
    return cache_group(cond.model_id, cond.params.as_dict(), cond.rubric.sha256)
