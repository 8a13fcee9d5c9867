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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from itemeval import __version__
from itemeval.errors import InputError, Problem
from itemeval.ids import content_hash
from itemeval.irt._fit import Z95, HeldOut, IrtFit, fit_irt, held_out_loglik
from itemeval.irt._flags import FLAG_Q, discrimination_q, item_flag
from itemeval.planning import Plan
from itemeval.storage import Location, resolve

if TYPE_CHECKING:
    from itemeval.export import StudyCells

ANALYSIS_DIR = "analysis/irt"
RESPONSES_FILE = "responses.parquet"
CONDITIONS_FILE = "conditions.parquet"
ITEMS_FILE = "items.parquet"
FIT_FILE = "fit.json"
#: Fewer conditions with graded answers and `analyze irt` refuses: a 2PL item has one answer
#: per condition to fit two parameters, and the ability scale is set by the conditions (the
#: adaptive bank's `MIN_CALIBRATION` is the same number, measured in benchmarks/adaptive.py).
MIN_CONDITIONS = 3
#: The model choice is computed on at most this many items (a random sample; seed 0).
HELD_OUT_ITEMS = 5_000

RESPONSES_SCHEMA = pa.schema(
    [
        pa.field("store", pa.string()),
        pa.field("condition", pa.string()),
        pa.field("slug", pa.string()),
        pa.field("model", pa.string()),
        pa.field("prompt", pa.string()),
        pa.field("dataset", pa.string()),
        pa.field("item_id", pa.string()),
        pa.field("item_hash", pa.string()),
        pa.field("correct", pa.int64()),
        pa.field("trials", pa.int64()),
    ]
)


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
class ItemParameters:
    dataset: str
    item_id: str
    item_hash: str
    correct: int
    trials: int
    difficulty: float  # 2PL b = -d / a where a is clearly above 0, else NaN (`b_defined`)
    difficulty_se: float
    discrimination: float  # 2PL a
    discrimination_se: float
    difficulty_1pl: float
    flag: str | None  # "none right" | "all right" | "negative discrimination"
    intercept: float = float("nan")  # 2PL d: P(right) = sigmoid(a theta + d)
    intercept_se: float = float("nan")
    difficulty_1pl_se: float = float("nan")
    discrimination_z: float = float("nan")  # score test of a = 0 (below -1.96: a < 0 at 2.5%)
    discrimination_q: float = float("nan")  # its one-sided p, Benjamini-Hochberg adjusted
    input: str | None = None
    target: str | None = None

    @property
    def accuracy(self) -> float:
        return self.correct / self.trials if self.trials else float("nan")


@dataclass(frozen=True)
class IrtResult:
    study: str
    grader: str
    stores: list[str]  # the study's store first
    conditions: list[ConditionAbility]
    items: list[ItemParameters]
    held_out: HeldOut | None  # the model choice (None: not compared, the 2PL reported)
    loglik: dict[str, float]  # model -> log-likelihood of all the data
    seconds: float
    written: str | None  # URL of the analysis folder
    chosen: str = "2pl"  # the model whose abilities are reported

    @property
    def flagged(self) -> list[ItemParameters]:
        return [i for i in self.items if i.flag]

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


def item_hashes(inputs: Sequence[str], targets: Sequence[str]) -> list[str]:
    """The content hash that identifies an item across stores (16 hex digits)."""
    return [
        content_hash({"input": i, "target": t})[:16] for i, t in zip(inputs, targets, strict=True)
    ]


TextOf = Callable[[list[str]], dict[str, tuple[str, str]]]


def study_responses(
    plan: Plan, cells: StudyCells | None = None, *, hashed: bool = True
) -> tuple[pa.Table, str, TextOf]:
    """This store's responses (RESPONSES_SCHEMA), the headline grader's label, and a reader of
    items' text (input, target). Without `hashed` the item hashes are left empty (nothing is
    written or matched) and no item's text is read until asked for."""
    from itemeval.export import ItemFetcher, primary_grader, read_cells

    cells = cells if cells is not None else read_cells(plan)
    primary = primary_grader(cells.facets.grade)
    if primary is None:
        raise InputError(Problem("the study has no grader: nothing to fit", field="facets"))
    code = cells.facets.grade.index(primary)
    grades = cells.valid_grades(code)
    table = grades.select(["gen", "item"]).append_column(
        "c", pc.cast(grades.column("correct"), pa.int64())
    )
    per_cell = table.group_by(["gen", "item"], use_threads=False).aggregate(
        [("c", "sum"), ("c", "count")]
    )
    snapshots = {d.name: d.snapshot for d in plan.datasets if d.snapshot is not None}
    fetcher = ItemFetcher(plan.items, snapshots, ["input", "target"])
    ids = cells.items.column("item_id")

    def text_of(wanted: list[str]) -> dict[str, tuple[str, str]]:
        texts = fetcher.take(pa.array(wanted, pa.string()))
        inputs, targets = texts.column("input").to_pylist(), texts.column("target").to_pylist()
        return dict(zip(wanted, zip(inputs, targets, strict=True), strict=True))

    reader: TextOf = text_of
    if hashed:
        known = text_of(ids.to_pylist())
        pairs = list(known.values())
        hashes = pa.array(item_hashes([p[0] for p in pairs], [p[1] for p in pairs]), pa.string())

        def reader(wanted: list[str]) -> dict[str, tuple[str, str]]:
            return {i: known[i] for i in wanted}

    else:
        hashes = pa.array([""] * len(ids), pa.string())
    item_codes = per_cell.column("item")
    gen_codes = per_cell.column("gen").to_pylist()
    facets = cells.facets.generate
    store = plan.store.root.url
    n = per_cell.num_rows
    responses = pa.table(
        {
            "store": pa.array([store] * n, pa.string()),
            "condition": pa.array([facets[g].id for g in gen_codes], pa.string()),
            "slug": pa.array([facets[g].slug for g in gen_codes], pa.string()),
            "model": pa.array([facets[g].model_name for g in gen_codes], pa.string()),
            "prompt": pa.array([facets[g].prompt for g in gen_codes], pa.string()),
            "dataset": cells.items.column("dataset").take(item_codes).cast(pa.string()),
            "item_id": ids.take(item_codes),
            "item_hash": hashes.take(item_codes),
            "correct": per_cell.column("c_sum"),
            "trials": per_cell.column("c_count"),
        },
        schema=RESPONSES_SCHEMA,
    )
    return responses, primary.label, reader


def other_responses(location: Location) -> pa.Table:
    """The responses another store holds (written by `analyze irt` there)."""
    source = location.join(ANALYSIS_DIR, RESPONSES_FILE)
    if not source.exists():
        raise InputError(
            Problem(
                f"{source.url} does not exist",
                field="--with",
                hint="run `itemeval analyze irt` on that store's study first: it writes the "
                "responses other studies fit with",
            )
        )
    return pq.read_table(io.BytesIO(source.read_bytes())).cast(RESPONSES_SCHEMA)


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
    hashed = write or bool(with_stores)
    own, grader, text = study_responses(plan, cells, hashed=hashed)
    store_url = plan.store.root.url
    parts = [own]
    options = plan.study.options_by_url(store_url)
    for url in with_stores:
        other = other_responses(resolve(url, options.for_url(url)))
        other = other.filter(pc.not_equal(other.column("store"), store_url))
        parts.append(other)
    responses = pa.concat_tables(parts)
    # Items are this study's; another store's answers count where dataset, id and hash agree.
    item_keys = own.group_by(["dataset", "item_id", "item_hash"], use_threads=False).aggregate([])
    key_of = {
        (d, i, h): n
        for n, (d, i, h) in enumerate(
            zip(
                item_keys.column("dataset").to_pylist(),
                item_keys.column("item_id").to_pylist(),
                item_keys.column("item_hash").to_pylist(),
                strict=True,
            )
        )
    }
    rows = list(
        zip(
            responses.column("store").to_pylist(),
            responses.column("condition").to_pylist(),
            strict=True,
        )
    )
    condition_of: dict[tuple[str, str], int] = {}
    for r in rows:
        condition_of.setdefault(r, len(condition_of))
    col = np.array(
        [
            key_of.get(k, -1)
            for k in zip(
                responses.column("dataset").to_pylist(),
                responses.column("item_id").to_pylist(),
                responses.column("item_hash").to_pylist(),
                strict=True,
            )
        ],
        dtype=np.int64,
    )
    row = np.array([condition_of[r] for r in rows], dtype=np.int64)
    keep = col >= 0
    responses = responses.filter(pa.array(keep))
    row, col = row[keep], col[keep]
    shape = (len(condition_of), len(key_of))
    correct = np.zeros(shape, np.float32)
    trials = np.zeros(shape, np.float32)
    np.add.at(correct, (row, col), responses.column("correct").to_numpy())
    np.add.at(trials, (row, col), responses.column("trials").to_numpy())
    # A condition none of whose answers matched an item is no condition of the fit.
    live = trials.sum(1) > 0
    correct, trials = correct[live], trials[live]
    new_row = np.cumsum(live) - 1
    condition_of = {key: int(new_row[r]) for key, r in condition_of.items() if live[r]}
    answered = int(live.sum())
    if answered < MIN_CONDITIONS or shape[1] < 1:
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
    one = fit_irt(correct, trials, "1pl")
    two = fit_irt(correct, trials, "2pl", start=one)
    check = _held_out(correct, trials) if held_out else None
    chosen = check.chosen if check is not None else "2pl"
    conditions = _conditions(
        responses, condition_of, {"1pl": one, "2pl": two}, chosen, correct, trials
    )
    items = _items(item_keys, two, one, correct, trials, text)
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
    written = _write(plan, result, responses) if write else None
    return IrtResult(
        **{**result.__dict__, "seconds": time.monotonic() - started, "written": written}
    )


def _held_out(correct: np.ndarray, trials: np.ndarray) -> HeldOut:
    items = correct.shape[1]
    if items > HELD_OUT_ITEMS:
        cols = np.sort(np.random.default_rng(0).choice(items, HELD_OUT_ITEMS, replace=False))
        correct, trials = correct[:, cols], trials[:, cols]
    return held_out_loglik(correct, trials)


def _conditions(
    responses: pa.Table,
    condition_of: dict[tuple[str, str], int],
    fits: dict[str, IrtFit],
    chosen: str,
    correct: np.ndarray,
    trials: np.ndarray,
) -> list[ConditionAbility]:
    """Abilities of the chosen model as standard scores among the conditions (identified
    whichever way the latent scale is stretched), their SEs from the joint information."""
    first: dict[tuple[str, str], tuple[str, str, str]] = {}
    names = ("store", "condition", "slug", "model", "prompt")
    for store, condition, slug, model, prompt in zip(
        *(responses.column(c).to_pylist() for c in names), strict=True
    ):
        first.setdefault((store, condition), (slug, model, prompt))
    z = {m: f.standardized() for m, f in fits.items()}
    fit = fits[chosen]
    out = []
    for key, r in condition_of.items():
        if key not in first:
            continue
        slug, model, prompt = first[key]
        ability, se = float(z[chosen][0][r]), float(z[chosen][1][r])
        n = float(trials[r].sum())
        out.append(
            ConditionAbility(
                store=key[0],
                condition=key[1],
                slug=slug,
                model=model,
                prompt=prompt,
                ability=ability,
                se=se,
                low=ability - Z95 * se,
                high=ability + Z95 * se,
                accuracy=float(correct[r].sum()) / n if n else float("nan"),
                items=int((trials[r] > 0).sum()),
                theta=float(fit.theta[r]),
                theta_se=float(fit.theta_se[r]),
                ability_1pl=float(z["1pl"][0][r]),
                ability_2pl=float(z["2pl"][0][r]),
            )
        )
    out.sort(key=lambda c: -c.ability)
    return out


def _items(
    keys: pa.Table,
    two: IrtFit,
    one: IrtFit,
    correct: np.ndarray,
    trials: np.ndarray,
    text_of: TextOf,
) -> list[ItemParameters]:
    k = correct.sum(0).astype(np.int64)
    n = trials.sum(0).astype(np.int64)
    z, q = discrimination_q(two, correct, trials)
    defined = two.b_defined
    ids = keys.column("item_id").to_pylist()
    flags = [item_flag(int(k[j]), int(n[j]), float(q[j])) for j in range(len(ids))]
    text = text_of([i for i, f in zip(ids, flags, strict=True) if f])
    out = []
    for j, (dataset, item_id, item_hash) in enumerate(
        zip(
            keys.column("dataset").to_pylist(),
            ids,
            keys.column("item_hash").to_pylist(),
            strict=True,
        )
    ):
        flag = flags[j]
        words = text.get(item_id) if flag else None
        out.append(
            ItemParameters(
                dataset=dataset,
                item_id=item_id,
                item_hash=item_hash,
                correct=int(k[j]),
                trials=int(n[j]),
                difficulty=float(two.b[j]) if defined[j] else float("nan"),
                difficulty_se=float(two.b_se[j]) if defined[j] else float("nan"),
                discrimination=float(two.a[j]),
                discrimination_se=float(two.a_se[j]),
                difficulty_1pl=float(one.b[j]),
                flag=flag,
                input=words[0] if words else None,
                target=words[1] if words else None,
                intercept=float(two.d[j]),
                intercept_se=float(two.d_se[j]),
                difficulty_1pl_se=float(one.b_se[j]),
                discrimination_z=float(z[j]),
                discrimination_q=float(q[j]),
            )
        )
    return out


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _write(plan: Plan, result: IrtResult, responses: pa.Table) -> str:
    folder = plan.store.root.join(ANALYSIS_DIR)
    folder.makedirs()
    conditions = pa.Table.from_pylist([asdict(c) for c in result.conditions])
    items = pa.Table.from_pylist(
        [{k: v for k, v in asdict(i).items() if k not in ("input", "target")} for i in result.items]
    )
    folder.join(RESPONSES_FILE).write_atomic(_parquet(responses))
    folder.join(CONDITIONS_FILE).write_atomic(_parquet(conditions))
    folder.join(ITEMS_FILE).write_atomic(_parquet(items))
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
