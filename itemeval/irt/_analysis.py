"""`analyze_irt(plan)`: the store's results as a conditions x items matrix, 1PL and 2PL fitted,
one of them chosen by cross-validation, suspicious items flagged, and everything written under
`<store>/analysis/irt/`. Fewer than `MIN_CONDITIONS` conditions with graded answers: refused.

The data are the final grades of the headline grader (the report's `cells`), one binomial per
condition and item (correct answers out of graded epochs). Other stores add their conditions
through the responses they stored when `analyze irt` ran on them: an item is the same item when
its dataset, identifier and content hash (of its input and target) agree.

Files written (each wholly or not at all), with the store and condition each row came from:

* `responses.parquet`  source store, condition, dataset, item, item hash, correct, trials
* `conditions.parquet` source store, condition, model, prompt, standardized ability of the chosen
                       model with its SE and interval, both models' abilities
* `items.parquet`      dataset, item, item hash, 2PL intercept, discrimination (its test z, q) and
                       difficulty (where defined) with SEs, 1PL difficulty, counts, flag
* `fit.json`           grader, stores, the model chosen and why, held-out log-likelihoods, time,
                       `itemeval` version
"""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval import __version__
from itemeval.errors import InputError, Problem
from itemeval.irt._fit import Z95, HeldOut, IrtFit, fit_irt, held_out_loglik
from itemeval.irt._flags import FLAG_Q, discrimination_q
from itemeval.irt._items import ItemParameters, ItemTable, item_table
from itemeval.irt._patterns import item_patterns
from itemeval.irt._responses import (
    ANALYSIS_DIR,
    RESPONSES_FILE,
    RESPONSES_SCHEMA,
    ResponseMatrix,
    other_responses,
    own_responses,
    response_matrix,
)
from itemeval.planning import Plan
from itemeval.storage import resolve

if TYPE_CHECKING:
    from itemeval.results import StudyCells

CONDITIONS_FILE = "conditions.parquet"
ITEMS_FILE = "items.parquet"
FIT_FILE = "fit.json"
#: Fewer conditions with graded answers and `analyze irt` refuses: a 2PL item has one answer
#: per condition to fit two parameters, and the ability scale is set by the conditions (the
#: adaptive bank's `MIN_CALIBRATION` is the same number, measured in benchmarks/adaptive.py).
MIN_CONDITIONS = 3
#: The model choice is computed on at most this many items (a random sample; seed 0).
HELD_OUT_ITEMS = 5_000


@dataclass(frozen=True)
class ConditionAbility:
    store: str
    condition: str
    slug: str
    model: str
    prompt: str
    ability: float  # the chosen model's, in SDs of the fitted conditions (0: their mean)
    se: float  # the items' estimation error included (joint information)
    low: float
    high: float
    accuracy: float  # observed, over the items it answered
    items: int  # items with at least one graded answer
    theta: float  # the chosen model's ability on the fit's own scale (the items' scale)
    theta_se: float
    ability_1pl: float  # both models' standardized abilities
    ability_2pl: float


@dataclass(frozen=True)
class IrtResult:
    study: str
    grader: str
    stores: list[str]  # the study's store first
    conditions: list[ConditionAbility]
    items: ItemTable  # a Sequence[ItemParameters] over the items' columns (`.table`)
    held_out: HeldOut | None  # the model choice (None: not compared, the 2PL reported)
    loglik: dict[str, float]  # model -> log-likelihood of all the data
    seconds: float
    written: str | None  # URL of the analysis folder
    chosen: str = "2pl"  # the model whose abilities are reported

    @property
    def flagged(self) -> list[ItemParameters]:
        """Every flagged item, in the items' order, with its text."""
        flag = self.items.table.column("flag")
        return self.items.rows(np.flatnonzero(pc.is_valid(flag).to_numpy(zero_copy_only=False)))

    def to_json(self) -> dict[str, object]:
        """As JSON allows: a number that is not finite (a difficulty not defined, an item not
        tested) is null."""
        payload = {
            "study": self.study,
            "grader": self.grader,
            "stores": self.stores,
            "conditions": [asdict(c) for c in self.conditions],
            "flagged": [asdict(i) for i in self.flagged],
            "items": len(self.items),
            "held_out": asdict(self.held_out) if self.held_out else None,
            "chosen": self.chosen,
            "loglik": self.loglik,
            "seconds": round(self.seconds, 3),
            "written": self.written,
        }
        return cast(dict[str, object], _finite(payload))


def _finite(value: object) -> object:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def analyze_irt(
    plan: Plan,
    *,
    with_stores: Sequence[str] = (),
    write: bool = True,
    held_out: bool = True,
    cells: StudyCells | None = None,
) -> IrtResult:
    """Fit 1PL and 2PL to the plan's store (and `with_stores`), flag items, write the files
    (`cells`: the store's cells when the caller has read them already)."""
    started = time.monotonic()
    own = own_responses(plan, cells, hashed=write or bool(with_stores))
    if cells is None:
        # The cells read here are gone; arrow's pool keeps their pages unless told (at 10M
        # rows about 320 MB of the process's memory, which the fits would add to).
        pa.default_memory_pool().release_unused()
    store_url = plan.store.root.url
    options = plan.study.options_by_url(store_url)
    others = [other_responses(resolve(url, options.for_url(url))) for url in with_stores]
    matrix = response_matrix(own, others)
    responses = own.table() if write else None
    grader, text_of = own.grader, own.text_of
    del own  # a few arrays of a number per cell
    correct, trials = matrix.correct, matrix.trials
    answered = len(matrix.conditions)
    if answered < MIN_CONDITIONS or correct.shape[1] < 1:
        raise InputError(
            Problem(
                f"{answered} condition(s) with graded answers: item response theory needs at "
                f"least {MIN_CONDITIONS} (with fewer, each item's discrimination rests on one "
                "or two answers and the ability scale on as many points)",
                field="conditions",
                hint="run more conditions (models or prompts), or add stores that answered the "
                "same items with --with",
            )
        )
    # Items of one column of counts share their parameters: every fit and test below runs
    # over the distinct columns (`_patterns`).
    patterns = item_patterns(correct, trials)
    one = fit_irt(correct, trials, "1pl", patterns=patterns)
    two = fit_irt(correct, trials, "2pl", start=one, patterns=patterns)
    check = _held_out(correct, trials) if held_out else None
    chosen = check.chosen if check is not None else "2pl"
    conditions = _conditions(matrix, {"1pl": one, "2pl": two}, chosen)
    z, q = discrimination_q(two, correct, trials, patterns=patterns)
    items = ItemTable(item_table(matrix.items, two, one, correct, trials, z, q), text_of)
    result = IrtResult(
        study=plan.study.study,
        grader=grader,
        stores=list(dict.fromkeys([store_url, *with_stores])),
        conditions=conditions,
        items=items,
        held_out=check,
        loglik={"1pl": one.loglik, "2pl": two.loglik},
        seconds=0.0,
        written=None,
        chosen=chosen,
    )
    written = None
    if responses is not None:
        if others:
            responses = pa.concat_tables(
                [responses.cast(RESPONSES_SCHEMA), _matched(matrix, others, store_url)]
            )
        written = _write(plan, result, responses)
    return IrtResult(
        **{**result.__dict__, "seconds": time.monotonic() - started, "written": written}
    )


def _matched(matrix: ResponseMatrix, others: list[pa.Table], store_url: str) -> pa.Table:
    """The other stores' responses to this store's items (as the fit counted them)."""
    other = pa.concat_tables(others)
    other = other.filter(pc.not_equal(other.column("store"), store_url))
    keys = ("dataset", "item_id", "item_hash")
    join = pc.binary_join_element_wise
    mine = join(*(matrix.items.column(k) for k in keys), "\x00")
    theirs = join(*(other.column(k) for k in keys), "\x00")
    return other.filter(pc.is_in(theirs, value_set=mine))


def _held_out(correct: np.ndarray, trials: np.ndarray) -> HeldOut:
    items = correct.shape[1]
    if items > HELD_OUT_ITEMS:
        cols = np.sort(np.random.default_rng(0).choice(items, HELD_OUT_ITEMS, replace=False))
        correct, trials = correct[:, cols], trials[:, cols]
    return held_out_loglik(correct, trials)


def _conditions(
    matrix: ResponseMatrix, fits: dict[str, IrtFit], chosen: str
) -> list[ConditionAbility]:
    """Abilities of the chosen model as standard scores among the conditions (identified
    whichever way the latent scale is stretched), their SEs from the joint information."""
    z = {m: f.standardized() for m, f in fits.items()}
    fit = fits[chosen]
    graded = matrix.trials.sum(1)
    right = matrix.correct.sum(1)
    answered = (matrix.trials > 0).sum(1)
    out = []
    for r, c in enumerate(matrix.conditions):
        ability, se = float(z[chosen][0][r]), float(z[chosen][1][r])
        n = float(graded[r])
        out.append(
            ConditionAbility(
                store=c.store,
                condition=c.condition,
                slug=c.slug,
                model=c.model,
                prompt=c.prompt,
                ability=ability,
                se=se,
                low=ability - Z95 * se,
                high=ability + Z95 * se,
                accuracy=float(right[r]) / n if n else float("nan"),
                items=int(answered[r]),
                theta=float(fit.theta[r]),
                theta_se=float(fit.theta_se[r]),
                ability_1pl=float(z["1pl"][0][r]),
                ability_2pl=float(z["2pl"][0][r]),
            )
        )
    out.sort(key=lambda c: -c.ability)
    return out


def _parquet(table: pa.Table, *, store_schema: bool = True) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, store_schema=store_schema)
    return sink.getvalue()


def _write(plan: Plan, result: IrtResult, responses: pa.Table) -> str:
    folder = plan.store.root.join(ANALYSIS_DIR)
    folder.makedirs()
    conditions = pa.Table.from_pylist([asdict(c) for c in result.conditions])
    # The responses' repeated names are dictionary-encoded in memory; without the arrow schema
    # the file reads back as plain strings (RESPONSES_SCHEMA).
    folder.join(RESPONSES_FILE).write_atomic(_parquet(responses, store_schema=False))
    folder.join(CONDITIONS_FILE).write_atomic(_parquet(conditions))
    folder.join(ITEMS_FILE).write_atomic(_parquet(result.items.table))
    meta = {
        "study": result.study,
        "grader": result.grader,
        "stores": result.stores,
        "models": ["1pl", "2pl"],
        "chosen": result.chosen,
        "priors": {"theta": "N(0,1)", "a": "N(1,1)", "d": "N(0,3^2)"},
        "held_out": asdict(result.held_out) if result.held_out else None,
        "flag": f"negative discrimination: Benjamini-Hochberg q <= {FLAG_Q}",
        "loglik": result.loglik,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "itemeval": __version__,
    }
    folder.join(FIT_FILE).write_atomic(json.dumps(meta, indent=2).encode("utf-8"))
    return folder.url
