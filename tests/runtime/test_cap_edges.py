"""The budget cap at its edges: an unpriced model, a long-context price, attempts abandoned on
`deadline_s`, a pilot and the rest, and a cap on the whole study. Each is checked against what
was stored (`usd`, rows read without dedup) and, where a provider bills, the sim-server's own
usage priced independently."""

from __future__ import annotations

import time
from dataclasses import replace

import pyarrow.compute as pc
import pytest
from runtime_files import sim_server, sim_stats, write_study

from itemeval.cli.main import main
from itemeval.config import load_study
from itemeval.errors import BudgetExceeded, ConfigError, ExitCode
from itemeval.planning import make_plan
from itemeval.providers.money import Pricing
from itemeval.providers.types import Usage
from itemeval.runtime import RunOptions, run_study
from itemeval.store import StudyStore, list_manifests, read_manifest

INLINE = RunOptions(no_ray=True, yes=True, quiet=True, stages=("generate",))
ONE = {
    "facets.grader": [],
    "facets.prompt": ["builtin:direct"],
    "facets.replications": 1,
    "models": [{"id": "sim/strong", "endpoint": "sim"}],
}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "default-cache"))


def _stored_usd(store_url: str) -> float:
    rows = StudyStore.open(store_url).read("solutions", columns=["usd"], dedup=False)
    return float(pc.sum(rows.column("usd")).as_py() or 0.0)


def _manifests_usd(store_url: str) -> float:
    store = StudyStore.open(store_url)
    return sum(read_manifest(store, run).spend.usd for run in list_manifests(store))


def test_an_unpriced_model_under_a_cap_is_refused_until_its_price_is_declared(tmp_path):
    overrides = {
        **ONE,
        "endpoints.sim.sim": {"models": {"acme-ft": {"ability": 0.6}}},
        "models": [{"id": "acme-ft", "endpoint": "sim"}],
        "budget.max_usd": 1.0,
    }
    study = load_study(write_study(tmp_path, **overrides))
    with pytest.raises(ConfigError) as info:
        run_study(study, INLINE)
    text = str(info.value)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    assert "'acme-ft' has no price" in text and "pricing: my_prices.yaml" in text
    assert list_manifests(StudyStore.open(study.store_url)) == []  # nothing was written
    # Declared, it is priced with what the user declared, and the cap holds at that price.
    (tmp_path / "prices.yaml").write_text(
        "models:\n  acme-ft: {input: 1.0, output: 4.0, max_output: 512}\n"
    )
    study = load_study(write_study(tmp_path, **overrides, pricing=str(tmp_path / "prices.yaml")))
    outcome = run_study(study, INLINE)
    assert outcome.exit_code == ExitCode.OK, outcome.message
    rows = StudyStore.open(study.store_url).read(
        "solutions", columns=["input_tokens", "output_tokens", "usd"], dedup=False
    )
    tokens = zip(rows["input_tokens"].to_pylist(), rows["output_tokens"].to_pylist(), strict=True)
    declared = sum((i * 1.0 + o * 4.0) / 1e6 for i, o in tokens)
    assert outcome.spent_usd == pytest.approx(declared)
    assert outcome.spent_usd == pytest.approx(_stored_usd(study.store_url))
    assert declared > 0


def test_a_call_the_cap_cannot_price_is_never_sent_even_past_the_plan(tmp_path, monkeypatch):
    # The plan's check bypassed (as a plugin or an API caller could): the call path itself
    # refuses to send a call under a cap whose worst case it cannot price.
    monkeypatch.setattr("itemeval.runtime._driver.check_cap_bounds", lambda plan, stages: None)
    overrides = {
        **ONE,
        "endpoints.sim.sim": {"models": {"acme-ft": {"ability": 0.6}}},
        "models": [{"id": "acme-ft", "endpoint": "sim"}],
        "budget.max_usd": 1.0,
        "budget.dev_items": 4,
    }
    study = load_study(write_study(tmp_path, **overrides))
    outcome = run_study(study, INLINE)
    assert outcome.exit_code == ExitCode.BUDGET_CAP
    assert outcome.stages["generate"].not_sent == 8 and outcome.ledger.calls == 0
    assert StudyStore.open(study.store_url).read("solutions", dedup=False).num_rows == 0


def test_prefix_matches_price_only_a_family_that_shares_the_price(tmp_path):
    pricing = Pricing.load()
    assert pricing.price("gpt-4o-2024-11-20").key == "gpt-4o"  # a dated snapshot
    assert pricing.price("claude-sonnet-4-5@20250929").key == "claude-sonnet-4-5"
    assert pricing.price("o3-deep-research") is None  # not o3's price
    assert pricing.price("gpt-4o-realtime-preview") is None
    (tmp_path / "p.yaml").write_text(
        "models:\n  mine: {input: 1, output: 2}\n  fam: {input: 1, output: 2, family: any}\n"
    )
    own = Pricing.load(tmp_path / "p.yaml")
    assert own.price("mine-2") is None and own.price("fam-large").key == "fam"


def test_a_long_prompt_is_priced_and_reserved_at_the_long_context_tier():
    sonnet = Pricing.load().price("claude-sonnet-4-5")
    short, long = Usage(200_000, 1_000), Usage(200_001, 1_000)
    assert sonnet.cost(short) == pytest.approx((200_000 * 3.0 + 1_000 * 15.0) / 1e6)
    assert sonnet.cost(long) == pytest.approx((200_001 * 6.0 + 1_000 * 22.5) / 1e6)
    # The reservation uses the tier the call's input bound reaches.
    assert sonnet.worst_case(250_000, 1_000) == pytest.approx(
        (250_000 * 3.75 * 2 + 1_000 * 15.0 * 1.5) / 1e6
    )
    assert sonnet.worst_case(250_000, 0) > 2 * sonnet.worst_case(199_000, 0)
    # An estimate prices a sum of calls at the tier of the mean call, not of the sum.
    assert sonnet.cost(Usage(1_000_000, 0), calls=10) == pytest.approx(3.0)


def test_the_cap_holds_on_a_model_dearer_past_its_long_context_threshold(tmp_path, monkeypatch):
    # Output-heavy calls (a verbose model cut at max_tokens) whose every prompt passes the
    # long-context threshold: without the tier, each reservation is 2/3 of what a call costs.
    # The estimate (which prices the tier too) would refuse the run: the gate is passed by, so
    # that the in-run cap alone holds it.
    monkeypatch.setattr("itemeval.runtime._driver.gate", lambda *args, **kwargs: "--yes")
    (tmp_path / "prices.yaml").write_text(
        "models:\n  sim/long: {input: 1.0, output: 200.0, max_output: 8192, "
        "long_context: {above: 20, input: 2, output: 1.5}}\n"
    )
    overrides = {
        **ONE,
        "endpoints.sim.sim": {"models": {"long": {"ability": 0.7, "verbosity": 60}}},
        "models": [{"id": "sim/long", "endpoint": "sim", "params": {"max_tokens": 64}}],
        "facets.prompt": ["builtin:cot"],
        "budget.dev_items": 20,
        "runtime.shard_size": 4,
        "runtime.shards_in_flight": 2,
        "pricing": str(tmp_path / "prices.yaml"),
    }
    price = 1.5 * 200.0 * 64 / 1e6  # the output of one call at the long tier
    study = load_study(write_study(tmp_path, **overrides, **{"budget.max_usd": 10.5 * price}))
    outcome = run_study(study, INLINE)
    assert outcome.status == "budget_cap", outcome.message
    stored = _stored_usd(study.store_url)
    assert outcome.spent_usd == pytest.approx(stored)
    assert stored <= 10.5 * price and stored > 5 * price


def test_attempts_abandoned_on_deadline_are_charged_and_the_cap_holds(tmp_path):
    # Every attempt runs past deadline_s; the server answers (and bills) each one anyway.
    # A call's worst case: 400 output tokens at $15/M ($0.006) plus its input (under $0.002).
    floor, max_usd = 400 * 15.0 / 1e6, 0.1
    with sim_server("--latency-ms", "300") as url:
        overrides = {
            **ONE,
            "endpoints.sim": {
                "kind": "sim",
                "base_url": url,
                "max_concurrency": 4,
                "deadline_s": 0.1,
                "max_attempts": 3,
                "backoff_initial_s": 0.01,
                "backoff_max_s": 0.02,
            },
            "models": [{"id": "sim/strong", "endpoint": "sim", "params": {"max_tokens": 400}}],
            "budget.dev_items": 20,
            "budget.max_usd": max_usd,
            "runtime.shard_size": 5,
        }
        study = load_study(write_study(tmp_path, **overrides))
        outcome = run_study(study, INLINE)
        deadline = time.monotonic() + 5
        while sim_stats(url)["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.05)
        stats = sim_stats(url)
    assert outcome.status == "budget_cap", outcome.message
    rows = StudyStore.open(study.store_url).read(
        "solutions", columns=["error_code", "attempts", "usd"], dedup=False
    )
    assert set(rows["error_code"].to_pylist()) == {"deadline"}
    # Every attempt the server saw is on a row, charged at least its worst case's output.
    assert sum(rows["attempts"].to_pylist()) == stats["requests"]
    for attempts, usd in zip(rows["attempts"].to_pylist(), rows["usd"].to_pylist(), strict=True):
        assert usd >= attempts * floor
    assert outcome.spent_usd == pytest.approx(_stored_usd(study.store_url))
    billed = (
        Pricing.load()
        .price("sim/strong")
        .cost(Usage(stats["usage"]["input_tokens"], stats["usage"]["output_tokens"]))
    )
    assert stats["ok"] == stats["requests"] and 0 < billed <= outcome.spent_usd <= max_usd
    assert stats["requests"] <= max_usd / floor  # never more attempts than the cap covers


#: Short answers: a call's worst case is a small part of the study's cost.
CHEAP = {
    **ONE,
    "models": [{"id": "sim/strong", "endpoint": "sim", "params": {"max_tokens": 16}}],
    "budget.dev_items": 30,
}


def _full_cost(tmp_path, overrides) -> float:
    """What the whole study costs, run on a store (and cache) of its own."""
    return run_study(load_study(write_study(tmp_path / "full", **overrides)), INLINE).spent_usd


def test_a_pilot_and_the_rest_share_one_allowance(tmp_path):
    total = _full_cost(tmp_path, CHEAP)
    max_usd = 0.75 * total  # the pilot (half) fits, the pilot and the rest do not
    study = load_study(write_study(tmp_path / "pilot", **CHEAP, **{"budget.max_usd": max_usd}))
    with pytest.raises(BudgetExceeded) as info:
        run_study(study, replace(INLINE, pilot=0.5))
    assert "of which this command's pilot spent $" in str(info.value)
    store = StudyStore.open(study.store_url)
    assert [read_manifest(store, r).outcome for r in list_manifests(store)] == ["completed"]
    assert 0 < _manifests_usd(study.store_url) <= max_usd
    assert _stored_usd(study.store_url) <= max_usd


def test_study_max_usd_caps_what_the_study_spends_across_runs(tmp_path, capsys):
    total = _full_cost(tmp_path, CHEAP)
    cap = 0.75 * total
    path = write_study(tmp_path / "study", **CHEAP, **{"budget.study_max_usd": cap})
    study = load_study(path)
    first = run_study(study, replace(INLINE, limit=15))  # half the items: it fits
    assert first.exit_code == ExitCode.OK, first.message
    with pytest.raises(BudgetExceeded) as info:  # the rest would cross what is left
        run_study(study, INLINE)
    assert f"the study had spent ${first.spent_usd:,.4f} of study_max_usd" in str(info.value)
    assert _manifests_usd(study.store_url) <= cap and _stored_usd(study.store_url) <= cap
    assert main(["status", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Paid by 1 run: $" in out and "The study has spent $" in out
    assert f"of budget.study_max_usd ${cap:,.4f}" in out


def test_study_max_usd_alone_holds_a_run_and_the_exit_4_message_shows_both(tmp_path):
    overrides = {
        **ONE,
        "endpoints.sim.sim": {"models": {"verbose": {"ability": 0.7, "verbosity": 60}}},
        "models": [{"id": "sim/verbose", "endpoint": "sim"}],
        "facets.prompt": ["builtin:cot"],
        "budget.dev_items": 30,
        "runtime.shard_size": 4,
        "runtime.shards_in_flight": 2,
    }
    study = load_study(write_study(tmp_path, **overrides))
    cap = 1.2 * sum(line.usd for line in make_plan(study).estimate.lines)
    study = load_study(write_study(tmp_path, **overrides, **{"budget.study_max_usd": cap}))
    outcome = run_study(study, INLINE)
    assert outcome.status == "budget_cap", outcome.message
    assert _stored_usd(study.store_url) <= outcome.spent_usd <= cap
    assert f"this run spent ${outcome.spent_usd:,.4f} of its allowance ${cap:,.4f}" in (
        outcome.message
    )
    assert f"the study has spent ${outcome.spent_usd:,.4f} in all" in outcome.message
    # Under max_usd alone, another model of the study: a fresh allowance, and the message says
    # what the study has spent in all (the first run's dollars too).
    again = {
        **overrides,
        "endpoints.sim.sim": {"models": {"verbose2": {"ability": 0.7, "verbosity": 60}}},
        "models": [{"id": "sim/verbose2", "endpoint": "sim"}],
        "budget.max_usd": cap,
    }
    second = run_study(load_study(write_study(tmp_path, **again)), INLINE)
    assert second.status == "budget_cap", second.message
    total = _manifests_usd(study.store_url)
    assert total == pytest.approx(outcome.spent_usd + second.spent_usd)
    assert f"the study has spent ${total:,.4f} in all" in second.message
    assert "raise budget.study_max_usd" in outcome.message
