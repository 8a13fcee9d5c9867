"""`endpoints.X.batch`: what it accepts and refuses (with the field named), that it never enters
a condition id, the deadline's two spellings, and the batch prices of the price table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml
from batch_files import DATASETS

from itemeval.config import load_study
from itemeval.errors import ConfigError
from itemeval.planning import build_design
from itemeval.providers._settings import BatchTierSettings, EndpointSettings
from itemeval.providers.money import Pricing
from itemeval.providers.types import Usage


def _study(tmp_path, endpoint: dict) -> dict:
    return {
        "study": "settings",
        "store": str(tmp_path / "store"),
        "datasets": [{"name": "arithmetic", "path": str(DATASETS / "arithmetic")}],
        "endpoints": {"main": endpoint},
        "models": [{"id": "sim/strong", "endpoint": "main"}],
        "facets": {"prompt": ["builtin:direct"]},
    }


def _load(tmp_path, endpoint: dict):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(_study(tmp_path, endpoint), sort_keys=False))
    return load_study(path)


@pytest.mark.parametrize(
    ("endpoint", "words"),
    [
        ({"kind": "sim"}, "the in-process simulator has no batch API"),
        (
            {"kind": "gemini", "base_url": "http://127.0.0.1:9/v1beta"},
            "a gemini endpoint has no batch API",
        ),
    ],
)
def test_endpoints_without_a_batch_api_are_refused(tmp_path, endpoint, words):
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, endpoint | {"batch": {"enabled": True}})
    text = str(info.value)
    assert words in text and "endpoints.main" in text and "study.yaml" in text


def test_a_bad_deadline_names_its_field(tmp_path):
    endpoint = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1"}
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, endpoint | {"batch": {"enabled": True, "deadline": "tomorrow"}})
    assert "endpoints.main.batch.deadline" in str(info.value)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, endpoint | {"batch": {"enabled": True, "completion_window": "1h"}})
    assert "completion_window" in str(info.value)


def test_the_batch_tier_never_enters_a_condition_id(tmp_path):
    base = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1"}
    live = build_design(_load(tmp_path, base))
    batched = build_design(_load(tmp_path, base | {"batch": {"enabled": True, "deadline": "6h"}}))
    assert [c.id for c in live.generate] == [c.id for c in batched.generate]


def test_anthropic_and_sim_server_endpoints_take_the_batch_tier():
    anthropic = EndpointSettings(
        kind="anthropic", base_url="http://127.0.0.1:9", batch={"enabled": True}
    )
    sim = EndpointSettings(
        kind="sim",
        base_url="http://127.0.0.1:9",
        sim={"wire_format": "anthropic"},
        batch={"enabled": True},
    )
    assert anthropic.batch_enabled and sim.batch_enabled and sim.wire == "anthropic"
    assert not EndpointSettings(kind="openai", base_url="http://127.0.0.1:9/v1").batch_enabled


def test_the_deadline_is_a_duration_or_a_moment():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert BatchTierSettings().deadline_after(start) == start + timedelta(hours=24)
    assert BatchTierSettings(deadline="90m").deadline_after(start) == start + timedelta(minutes=90)
    assert BatchTierSettings(deadline="1.5d").deadline_after(start) == start + timedelta(hours=36)
    fixed = BatchTierSettings(deadline="2026-01-02T09:00:00+02:00")
    assert fixed.deadline_after(start) == datetime(2026, 1, 2, 7, tzinfo=UTC)
    with pytest.raises(ValueError, match="time with its zone"):
        BatchTierSettings(deadline="2026-01-02T09:00:00")


def test_batch_prices_are_the_providers_share(tmp_path):
    pricing = Pricing.load()
    usage = Usage(input_tokens=1000, output_tokens=500, cached_input_tokens=200)
    for model in ("gpt-4o", "claude-sonnet-4-5", "gemini-2.5-pro", "sim/strong"):
        live, batch = pricing.price(model), pricing.price(model, "batch")
        assert batch is not None and live is not None and batch.tier == "batch"
        assert batch.cost(usage) == pytest.approx(0.5 * live.cost(usage))
        assert batch.worst_case(1000, 500) == pytest.approx(0.5 * live.worst_case(1000, 500))
    mine = tmp_path / "prices.yaml"
    mine.write_text(
        "models:\n  house-model: {input: 1.0, output: 2.0}\n  cheap: {input: 1.0, "
        "output: 2.0, batch: 0.25}\n"
    )
    custom = Pricing.load(mine)
    # Without a batch share, the batch tier is priced live (never an underestimate).
    assert custom.price("house-model", "batch").cost(usage) == custom.price("house-model").cost(
        usage
    )
    assert custom.price("cheap", "batch").cost(usage) == pytest.approx(
        0.25 * custom.price("cheap").cost(usage)
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  m: {input: 1.0, output: 2.0, batch: 1.5}\n")
    with pytest.raises(ConfigError) as info:
        Pricing.load(bad)
    assert "models.m.batch" in str(info.value)
