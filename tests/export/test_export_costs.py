"""Costs that mean what they say: per condition what was paid, what the response cache saved and
what the condition would cost alone (every call at its price), and cost per correct answer from
the latter, so that it does not depend on which condition ran first.

The same demo-like study is run three times, each with its own store and response cache: once
with `strong_direct` first (its answers, and so its judge requests, are the ones `medium_direct`
and `weak_direct` repeat), once with `medium_direct` first, once with the response cache off.
What each paid differs; what each would cost alone does not. The saving is checked against
physical truth: the dollars the response cache recorded for the calls whose answers it gave."""

from __future__ import annotations

import glob
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from export_studies import write_study

from itemeval.config import load_study
from itemeval.judging import study_cells
from itemeval.planning import Plan, make_plan
from itemeval.providers.money import ModelPrice
from itemeval.providers.types import Usage
from itemeval.report import Cost, costs
from itemeval.results import call_usd
from itemeval.runtime import RunOptions, run_study

#: No injected faults: the three runs hold the same logical rows, whatever ran first.
STUDY = {
    "facets.replications": 1,
    "endpoints.sim.sim": {},
}


def _run(folder: Path, first: str | None, **changes: object) -> Plan:
    path = write_study(folder, **{**STUDY, **changes})
    config = load_study(path)
    if first is not None:
        outcome = run_study(config, RunOptions(no_ray=True, yes=True, quiet=True, condition=first))
        assert outcome.status == "completed", outcome.message
    outcome = run_study(config, RunOptions(no_ray=True, yes=True, quiet=True))
    assert outcome.status == "completed", outcome.message
    return make_plan(load_study(path), with_pending=False)


@pytest.fixture(scope="module")
def three_orders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Plan]:
    folder = tmp_path_factory.mktemp("orders")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ITEMEVAL_CACHE_DIR", str(folder / "default-cache"))
        return {
            "strong first": _run(folder / "strong", "strong_direct_default"),
            "medium first": _run(folder / "medium", "medium_direct_default"),
            "no cache": _run(folder / "plain", None, **{"cache.enabled": False}),
        }


def _costs(plan: Plan) -> dict[str, Cost]:
    return {c.generate.slug: c for c in costs(study_cells(plan), plan.pricing)}


def test_alone_and_per_correct_do_not_depend_on_run_order(three_orders: dict[str, Plan]) -> None:
    by_order = {order: _costs(plan) for order, plan in three_orders.items()}
    strong, medium, plain = by_order["strong first"], by_order["medium first"], by_order["no cache"]
    for slug, line in strong.items():
        for other in (medium[slug], plain[slug]):
            assert other.correct == line.correct and other.graded == line.graded
            assert other.alone_usd == pytest.approx(line.alone_usd, rel=1e-9), slug
            assert other.per_correct == pytest.approx(line.per_correct, rel=1e-9), slug
        for each in (line, medium[slug], plain[slug]):
            assert each.alone_usd == pytest.approx(each.usd + each.cache_saved_usd, rel=1e-12)
            assert each.per_correct == pytest.approx(each.alone_usd / each.correct)
    # What was paid does depend on the order: medium_direct's answers repeat strong_direct's,
    # so whichever ran second had its judge's answers from the response cache.
    after, before = strong["medium_direct_default"], medium["medium_direct_default"]
    assert after.cache_hits > before.cache_hits + 20
    assert after.usd < before.usd and after.cache_saved_usd > before.cache_saved_usd
    assert strong["strong_direct_default"].usd > medium["strong_direct_default"].usd
    # Paid, per correct answer, medium_direct looked far cheaper after strong_direct; alone it
    # is not.
    paid_ratio = (after.usd / after.correct) / (before.usd / before.correct)
    assert paid_ratio < 0.8 and after.per_correct == pytest.approx(before.per_correct)


def _stored(plan: Plan) -> pa.Table:
    """Every logical row of the store (solutions and grades): cached, usd, the request."""
    columns = ["epoch", "cached", "usd", "request_hash"]
    parts = [
        plan.store.read_solutions(None, columns).select(columns),
        plan.store.read_grades(None, columns).select(columns),
    ]
    return pa.concat_tables(parts, promote_options="permissive")


def _cache_entries(folder: Path) -> pa.Table:
    """What the response cache recorded of each call it holds: request, epoch, its usd."""
    files = glob.glob(str(folder / "cache" / "**" / "*.parquet"), recursive=True)
    table = pa.concat_tables(
        [pq.read_table(f, columns=["request_hash", "epoch", "usd"]) for f in files]
    )
    return table.group_by(["request_hash", "epoch"]).aggregate([("usd", "max")])


@pytest.mark.parametrize("order", ["strong first", "medium first"])
def test_paid_and_saved_against_the_store_and_the_cache(
    three_orders: dict[str, Plan], order: str
) -> None:
    """Paid is what the store's rows recorded; saved by the response cache is what the cache
    recorded for the calls it answered (their first call's dollars), at the report's prices."""
    plan = three_orders[order]
    lines = _costs(plan).values()
    rows = _stored(plan)
    paid = float(pc.sum(rows.column("usd")).as_py())
    assert sum(c.usd for c in lines) == pytest.approx(paid, rel=1e-9)
    hits = rows.filter(rows.column("cached"))
    assert hits.num_rows == sum(c.cache_hits for c in lines) > 50
    assert float(pc.sum(hits.column("usd")).as_py() or 0.0) == 0.0  # a hit pays nothing
    folder = Path(plan.store.root.path).parent
    joined = hits.join(_cache_entries(folder), ["request_hash", "epoch"], join_type="inner")
    assert joined.num_rows == hits.num_rows  # every hit's call is in the cache
    recorded = float(pc.sum(joined.column("usd_max")).as_py())
    assert sum(c.cache_saved_usd for c in lines) == pytest.approx(recorded, rel=1e-9)


def test_a_cache_hit_is_priced_as_its_call_was() -> None:
    """`call_usd` gives each row what `ModelPrice.cost` charges a call with its tokens: live
    and batch tiers, prompt-cache reads, and the long-context tier past the threshold."""
    price = ModelPrice(
        key="m",
        input_per_m=3.0,
        output_per_m=15.0,
        cached_input_per_m=0.3,
        batch_share=0.5,
        long_above=200_000,
        long_input=2.0,
        long_output=1.5,
    )
    rng = np.random.default_rng(7)
    n = 400
    inputs = rng.integers(0, 400_000, n)
    inputs[:5] = [0, 1, 200_000, 200_001, 399_999]
    cached = np.minimum(rng.integers(0, 300_000, n), inputs)
    outputs = rng.integers(0, 20_000, n)
    batch = rng.random(n) < 0.5
    got = call_usd(price, inputs, outputs, cached, batch)
    for i in range(n):
        usage = Usage(int(inputs[i]), int(outputs[i]), int(cached[i]))
        expected = price.at_tier("batch" if batch[i] else "live").cost(usage)
        assert math.isclose(got[i], expected, rel_tol=1e-12, abs_tol=1e-15), i
    assert not call_usd(None, inputs, outputs, cached, batch).any()  # an unpriced model
