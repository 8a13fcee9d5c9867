"""The estimate learns from the usage providers reported: store rows, response-cache rows (this
study's and earlier studies'), per condition content and modality; the prior stays beside it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from study_files import variant, write_study

from itemeval.cli.main import main
from itemeval.config import load_study
from itemeval.planning import Plan, make_plan, refresh_estimate
from itemeval.planning import _estimate as estimate
from itemeval.planning._estimate import ESTIMATE_SLICE
from itemeval.providers.money import Pricing
from itemeval.providers.types import Usage
from itemeval.store import ResponseCache, cache_group, text_hash

ONE_CONDITION = {
    "facets.prompt": ["builtin:direct"],
    "facets.model_config": [{"name": "t0"}],
    "facets.replications": 2,
    "models": [{"id": "sim/strong", "endpoint": "sim", "name": "strong"}],
}


def plan_of(tmp_path, **changes) -> Plan:
    path = write_study(tmp_path, variant(**{**ONE_CONDITION, **changes}))
    return make_plan(load_study(path))


def generate_line(plan: Plan):
    return next(line for line in plan.estimate.lines if line.stage == "generate")


def judge_line(plan: Plan):
    return next(line for line in plan.estimate.lines if line.condition.startswith("judge"))


def priors(plan: Plan):
    assert plan.tokens is not None
    return plan.tokens.priors(plan.design)


def solution_rows(plan: Plan, items: list[str], **usage) -> list[dict]:
    """Rows of the first generate condition; `usage` values may be callables of the item."""
    cond = plan.design.generate[0]
    rows = []
    for item in items:
        for epoch in range(plan.design.epochs):
            row = {
                "item_id": item,
                "epoch": epoch,
                "status": "ok",
                "text": f"answer {item} {epoch}",
                "model": cond.model_id,
                "run_id": "r",
                "request_hash": f"h-{item}-{epoch}",
            }
            row.update({k: (v(item) if callable(v) else v) for k, v in usage.items()})
            rows.append(row)
    return rows


def cache_rows(model: str, items: list[str], epochs: int, **usage) -> list[dict]:
    return [
        {
            "key": f"k-{item}-{epoch}",
            "item_id": item,
            "epoch": epoch,
            "request_hash": f"h-{item}-{epoch}",
            "model": model,
            "text": "cached answer",
            **{k: (v(item) if callable(v) else v) for k, v in usage.items()},
        }
        for item in items
        for epoch in range(epochs)
    ]


def item_ids(plan: Plan) -> list[str]:
    return plan.items.column("item_id").to_pylist()


def test_the_prior_is_the_estimate_until_rows_exist(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = generate_line(plan_of(tmp_path))
    assert line.calibration is not None and line.calibration["source"] == "prior"
    assert line.usd == pytest.approx(line.prior_usd) and line.usd > 0
    assert line.input_tokens == line.prior_input_tokens
    assert line.output_tokens == line.prior_output_tokens


def test_store_rows_correct_input_and_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = plan_of(tmp_path)
    cond = plan.design.generate[0]
    prior_in, prior_out, _ = priors(plan).generate[cond.id]
    ids = item_ids(plan)
    position = {item: i for i, item in enumerate(ids)}
    stored = ids[:4]
    # The provider counted twice our chars/4 guess and wrote ten times the prior's output.
    plan.store.write(
        "solutions",
        cond.id,
        solution_rows(
            plan,
            stored,
            input_tokens=lambda item: 2 * int(prior_in[position[item]]),
            output_tokens=lambda item: 10 * int(prior_out[position[item]]),
        ),
    )
    again = make_plan(plan.study)
    line = generate_line(again)
    assert line.calibration["source"] == "store 8 rows"
    assert line.calibration["input_ratio"] == pytest.approx(2.0)
    assert line.calibration["input_from"] == "rows"
    assert line.calibration["output_scale"] == pytest.approx(10.0)
    remaining = [position[i] for i in ids if i not in stored]
    epochs = plan.design.epochs
    assert line.remaining_cells == len(remaining) * epochs
    assert line.remaining_input_tokens == pytest.approx(
        2 * epochs * prior_in[remaining].sum(), abs=1
    )
    assert line.remaining_output_tokens == pytest.approx(
        10 * epochs * prior_out[remaining].sum(), abs=1
    )
    price = Pricing.load().price(cond.model_id)
    assert price is not None
    usage = Usage(line.remaining_input_tokens, line.remaining_output_tokens)
    assert line.remaining_usd == pytest.approx(price.cost(usage), rel=1e-4)
    # The prior is kept beside it, untouched.
    assert line.prior_remaining_usd == pytest.approx(
        price.cost(
            Usage(int(epochs * prior_in[remaining].sum()), int(epochs * prior_out[remaining].sum()))
        ),
        rel=1e-4,
    )


def test_each_modality_learns_its_own_length(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = plan_of(tmp_path, **{"budget.dev_items": 12})
    cond = plan.design.generate[0]
    ids = item_ids(plan)
    arithmetic = [i for i in ids if i.startswith("arith")]
    science = [i for i in ids if i.startswith("science")]
    stored = arithmetic[:6] + science[:6]
    plan.store.write(
        "solutions",
        cond.id,
        solution_rows(
            plan,
            stored,
            input_tokens=50,
            output_tokens=lambda item: 400 if item.startswith("arith") else 20,
        ),
    )
    again = make_plan(plan.study)
    tables = again.tokens
    assert tables is not None
    fit = again.calibration.generate[cond.id]
    _, prior_out, prior_visible = priors(again).generate[cond.id]
    calibrated = fit.output(prior_out, prior_visible, tables.modality)
    position = {item: i for i, item in enumerate(ids)}
    rest_arith = [position[i] for i in arithmetic[6:]]
    rest_science = [position[i] for i in science[6:]]
    # Each modality with enough rows of its own gets its own mean.
    assert calibrated[rest_science].mean() == pytest.approx(20, rel=0.5)
    assert calibrated[rest_arith].mean() == pytest.approx(400, rel=0.25)


@pytest.fixture(params=[ESTIMATE_SLICE, 3], ids=["whole", "slices-of-3"])
def estimate_slice(request, monkeypatch):
    """The estimate a slice of items at a time: the same figures whatever the slice."""
    monkeypatch.setattr(estimate, "ESTIMATE_SLICE", request.param)


@pytest.mark.usefixtures("estimate_slice")
def test_cache_rows_calibrate_and_answered_cells_are_free(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cache_dir = tmp_path / "shared-cache"
    plan = plan_of(tmp_path, cache={"location": str(cache_dir)})
    cond = plan.design.generate[0]
    group = cache_group(cond.model_id, cond.params.as_dict(), cond.prompt.sha256)
    ids = item_ids(plan)
    position = {item: i for i, item in enumerate(ids)}
    _, prior_out, _ = priors(plan).generate[cond.id]
    epochs = plan.design.epochs
    ResponseCache.open(str(cache_dir)).put(
        group,
        cache_rows(
            cond.model_id,
            ids[:3],
            epochs,
            input_tokens=90,
            output_tokens=lambda item: 5 * int(prior_out[position[item]]),
        ),
    )
    again = make_plan(plan.study)
    line = generate_line(again)
    assert line.calibration["source"] == "cache 6 rows"
    assert line.calibration["answered_by_cache"] == 6
    assert line.calibration["output_scale"] == pytest.approx(5.0)
    # Nothing is stored, so every cell remains, but six are answered by the cache for free.
    assert line.remaining_cells == len(ids) * epochs
    paid = epochs * prior_out[3:].sum()
    assert line.remaining_output_tokens == pytest.approx(5 * paid, abs=1)
    # --force calls again whatever is cached: nothing is free then.
    forced = generate_line(make_plan(plan.study, force=True))
    assert forced.calibration["answered_by_cache"] == 0
    assert forced.remaining_output_tokens == pytest.approx(5 * epochs * prior_out.sum(), abs=1)


def test_earlier_studies_rows_of_other_items_give_the_scale(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = plan_of(tmp_path)
    cond = plan.design.generate[0]
    group = cache_group(cond.model_id, cond.params.as_dict(), cond.prompt.sha256)
    _, prior_out, _ = priors(plan).generate[cond.id]
    ResponseCache.open(str(tmp_path / "default-cache")).put(
        group,
        cache_rows(
            cond.model_id,
            [f"elsewhere-{i}" for i in range(5)],
            1,
            input_tokens=10,
            output_tokens=int(5 * prior_out.mean()),
        ),
    )
    line = generate_line(make_plan(plan.study))
    assert line.calibration["source"] == "cache 5 rows"
    assert line.calibration["output_scale"] == pytest.approx(5.0, rel=0.05)
    assert line.calibration["input_from"] == "prior"  # no item of this study to compare with
    assert line.calibration["answered_by_cache"] == 0
    assert line.output_tokens == pytest.approx(5 * line.prior_output_tokens, rel=0.05)


def test_a_call_counts_once_and_rows_without_usage_are_ignored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = plan_of(tmp_path)
    cond = plan.design.generate[0]
    group = cache_group(cond.model_id, cond.params.as_dict(), cond.prompt.sha256)
    ids = item_ids(plan)
    rows = solution_rows(plan, ids[:3], input_tokens=80, output_tokens=8)
    plan.store.write("solutions", cond.id, rows)
    # The same answers in the cache (the journal wrote them first): counted once.
    ResponseCache.open(str(tmp_path / "default-cache")).put(
        group,
        cache_rows(cond.model_id, ids[:3], plan.design.epochs, input_tokens=80, output_tokens=8),
    )
    # A host that reports no usage: zeros teach nothing.
    plan.store.write("solutions", cond.id, solution_rows(plan, ids[3:6]))
    line = generate_line(make_plan(plan.study))
    assert line.calibration["source"] == "store 6 rows"
    assert line.calibration["answered_by_cache"] == 0


@pytest.mark.usefixtures("estimate_slice")
def test_judges_learn_from_the_judged_answers_visible_length(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = plan_of(tmp_path)
    cond = plan.design.generate[0]
    judge = plan.design.judges[0]
    ids = item_ids(plan)
    position = {item: i for i, item in enumerate(ids)}
    base = priors(plan).judge_input[judge.id]
    _, _, prior_visible = priors(plan).generate[cond.id]

    def visible(item: str) -> int:
        return 20 * int(prior_visible[position[item]])

    stored = ids[:4]
    # A reasoning model: 900 hidden tokens, then its answer. The judge reads only the answer.
    plan.store.write(
        "solutions",
        cond.id,
        solution_rows(
            plan,
            stored,
            input_tokens=40,
            output_tokens=lambda item: 900 + visible(item),
            reasoning_tokens=900,
        ),
    )
    grades = [
        {
            "gen_condition_id": cond.id,
            "item_id": item,
            "epoch": epoch,
            "status": "ok",
            "score": 1.0,
            "parse_ok": True,
            "solution_hash": text_hash(f"answer {item} {epoch}"),  # the stored solution's
            "request_hash": f"j-{item}-{epoch}",
            "grader": judge.model_id,
            "run_id": "r",
            "input_tokens": int(base[position[item]]) + visible(item),
            "output_tokens": 55,
            "cached": epoch == 1,  # half of them answered by the response cache
        }
        for item in stored
        for epoch in range(plan.design.epochs)
    ]
    plan.store.write("grades", judge.id, grades)
    again = make_plan(plan.study)
    line = judge_line(again)
    assert line.calibration["source"] == "store 8 rows"
    assert line.calibration["input_ratio"] == pytest.approx(1.0)
    assert line.calibration["answered_share"] == pytest.approx(0.5)
    remaining = [position[i] for i in ids if i not in stored]
    epochs = plan.design.epochs
    paid = 0.5 * epochs  # per remaining item
    # Input: the rubric plus the calibrated visible answer, never its hidden reasoning.
    answers = 20 * prior_visible[remaining].sum()
    assert line.remaining_input_tokens == pytest.approx(
        paid * (base[remaining].sum() + answers), abs=2
    )
    assert line.remaining_output_tokens == pytest.approx(paid * 55 * len(remaining), abs=2)
    generate = generate_line(again)
    assert generate.remaining_output_tokens > 900 * epochs * len(remaining)


def test_prompt_cache_reads_lower_the_calibrated_cost(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = plan_of(tmp_path)
    cond = plan.design.generate[0]
    ids = item_ids(plan)
    rows = solution_rows(
        plan, ids[:4], input_tokens=2000, cached_input_tokens=1500, output_tokens=10
    )
    plan.store.write("solutions", cond.id, rows)
    line = generate_line(make_plan(plan.study))
    assert line.calibration["cached_fraction"] == pytest.approx(0.75)
    price = Pricing.load().price(cond.model_id)
    assert price is not None
    in_, out = line.remaining_input_tokens, line.remaining_output_tokens
    assert line.remaining_usd == pytest.approx(
        price.cost(Usage(in_, out, cached_input_tokens=round(0.75 * in_))), rel=1e-3
    )
    assert line.remaining_usd < price.cost(Usage(in_, out))


def test_refresh_estimate_sees_what_was_stored_since(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = plan_of(tmp_path)
    cond = plan.design.generate[0]
    plan.store.write(
        "solutions",
        cond.id,
        solution_rows(plan, item_ids(plan)[:4], input_tokens=77, output_tokens=700),
    )
    refreshed = refresh_estimate(plan)
    fresh = make_plan(plan.study)
    assert refreshed.estimate.to_json() == fresh.estimate.to_json()
    assert generate_line(refreshed).remaining_cells < generate_line(plan).remaining_cells
    assert generate_line(plan).calibration["source"] == "prior"  # the old plan is unchanged


def test_estimate_command_shows_prior_calibrated_and_source(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    plan = plan_of(tmp_path)
    cond = plan.design.generate[0]
    plan.store.write(
        "solutions",
        cond.id,
        solution_rows(plan, item_ids(plan)[:4], input_tokens=77, output_tokens=700),
    )
    path = str(plan.study.path)
    assert main(["estimate", path, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    line = next(c for c in payload["conditions"] if c["stage"] == "generate")
    assert line["calibration"]["source"] == "store 8 rows"
    assert line["usd"] > 5 * line["prior_usd"]
    assert payload["remaining_usd"] > payload["prior_remaining_usd"]
    assert main(["estimate", path]) == 0
    out = capsys.readouterr().out
    assert "prior USD" in out and "calibrated from" in out and "store 8 rows" in out
    assert "the prior said" in out


def test_the_gate_uses_the_calibrated_figure(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    plan = plan_of(tmp_path)
    cond = plan.design.generate[0]
    plan.store.write(
        "solutions",
        cond.id,
        solution_rows(plan, item_ids(plan)[:4], input_tokens=77, output_tokens=3000),
    )
    estimate = make_plan(plan.study).estimate
    assert estimate.remaining_usd > 3 * estimate.prior_remaining_usd
    # A cap between the prior and the calibrated figure: the calibrated one decides.
    cap = (estimate.remaining_usd + estimate.prior_remaining_usd) / 2
    text = plan.study.path.read_text().replace("policy: dev", f"policy: dev\n  max_usd: {cap}")
    plan.study.path.write_text(text)
    assert main(["estimate", str(plan.study.path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gate"].startswith("over budget")
    assert main(["run", str(plan.study.path), "--no-ray", "--yes", "--quiet"]) == 4


def test_an_unreadable_cache_is_a_warning_not_a_failure(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = plan_of(tmp_path)
    cond = plan.design.generate[0]
    group = cache_group(cond.model_id, cond.params.as_dict(), cond.prompt.sha256)
    partition = tmp_path / "default-cache" / "calls" / f"group={group}"
    partition.mkdir(parents=True)
    (partition / "0000-broken.parquet").write_bytes(b"not parquet at all")
    again = make_plan(plan.study)
    assert any("could not read the response cache" in w for w in again.estimate.warnings)
    assert generate_line(again).calibration["source"] == "prior"
    assert np.isfinite(again.estimate.remaining_usd)


def test_rows_from_the_store_and_the_cache_join_whatever_their_nullability():
    """Store columns are non-nullable, the cache's read may not be (a second run hit this)."""
    import numpy as np
    import pyarrow as pa

    from itemeval.planning._usage_rows import CELL, USAGE, UsageRows

    values = {"item_id": ["a"], "epoch": [0], **{name: [10] for name in USAGE}}
    types = {"item_id": pa.string(), "epoch": pa.int32()}
    strict = pa.schema(
        [pa.field(n, types.get(n, pa.int64()), nullable=False) for n in [*CELL, *USAGE]]
        + [pa.field("cached", pa.bool_(), nullable=False)]
    )
    stored = pa.table({**values, "cached": [False]}, schema=strict)
    loose = pa.schema([pa.field(n, types.get(n, pa.int64())) for n in [*CELL, *USAGE]])
    extra = pa.table({**values, "item_id": ["b"]}, schema=loose)
    rows = UsageRows.of(stored, extra, pa.array(["a", "b"]), per_item=np.array([5.0, 5.0]))
    assert len(rows.pos) == 2
