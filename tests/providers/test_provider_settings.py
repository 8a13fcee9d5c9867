"""EndpointSettings validation, make_provider (keys from the environment) and pricing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import ValidationError

from itemeval.errors import ConfigError
from itemeval.providers import (
    AnthropicMessagesProvider,
    EndpointSettings,
    GeminiProvider,
    OpenAIChatProvider,
    Pricing,
    Provider,
    SimProvider,
    Usage,
    make_provider,
)


def error_fields(exc: ValidationError) -> set[str]:
    return {".".join(str(p) for p in err["loc"]) for err in exc.errors()}


def test_defaults_per_kind() -> None:
    openai = EndpointSettings(kind="openai", api_key_env="OPENAI_API_KEY")
    assert openai.url == "https://api.openai.com/v1"
    assert EndpointSettings(kind="anthropic", api_key_env="K").url == "https://api.anthropic.com"
    gemini = EndpointSettings(kind="gemini", api_key_env="K")
    assert gemini.url == "https://generativelanguage.googleapis.com/v1beta"
    sim = EndpointSettings(kind="sim")
    assert sim.in_process and sim.url == ""
    assert not EndpointSettings(kind="sim", base_url="http://127.0.0.1:1/v1").in_process


def test_unknown_keys_are_rejected_with_their_name() -> None:
    with pytest.raises(ValidationError) as info:
        EndpointSettings(kind="openai", api_key_env="K", requests_per_minut=10)
    assert "requests_per_minut" in error_fields(info.value)


def test_hosted_kinds_need_a_key_variable_unless_loopback() -> None:
    with pytest.raises(ValidationError, match="api_key_env is required"):
        EndpointSettings(kind="openai")
    for url in ("http://127.0.0.1:8000/v1", "http://localhost:11434/v1", "http://[::1]:8000/v1"):
        assert EndpointSettings(kind="openai", base_url=url).is_loopback


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        ({"api_key_env": "sk-live-abc"}, "api_key_env", "NAME of an environment variable"),
        ({"base_url": "ftp://x"}, "base_url", "http(s) URL"),
        ({"base_url": "https://user:pw@host/v1"}, "base_url", "credentials"),
        ({"headers": {"Authorization": "Bearer x"}}, "headers", "headers_env"),
        ({"headers_env": {"X-Key": "not a name"}}, "headers_env", "NAME"),
        ({"max_concurrency": 0}, "max_concurrency", "greater than 0"),
        ({"timeout_s": 0}, "timeout_s", "greater than 0"),
        ({"max_attempts": 0}, "max_attempts", "greater than or equal to 1"),
        ({"requests_per_minute": -5}, "requests_per_minute", "greater than 0"),
    ],
)
def test_invalid_values_name_the_field(values: dict, field: str, words: str) -> None:
    with pytest.raises(ValidationError) as info:
        EndpointSettings(kind="openai", **{"api_key_env": "K", **values})
    text = str(info.value)
    assert field in text and words in text


def test_sim_settings_only_on_sim_endpoints_and_validated() -> None:
    with pytest.raises(ValidationError, match="only allowed on endpoints of kind 'sim'"):
        EndpointSettings(kind="openai", api_key_env="K", sim={})
    with pytest.raises(ValidationError) as info:
        EndpointSettings(kind="sim", sim={"faults": {"rate_limit": 0.7, "server_error": 0.6}})
    assert "at most 1" in str(info.value)
    with pytest.raises(ValidationError) as info:
        EndpointSettings(kind="sim", sim={"models": {"sim/x": {"ability": 0.5}}})
    assert "without the 'sim/' prefix" in str(info.value)
    with pytest.raises(ValidationError) as info:
        EndpointSettings(kind="sim", sim={"models": {"x": {"ability": 2}}})
    assert "sim.models.x.ability" in error_fields(info.value)


def test_make_provider_picks_the_client_and_reads_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITEMEVAL_TEST_FACTORY_KEY", "sk-factory-secret-123")
    kinds = {
        "openai": OpenAIChatProvider,
        "anthropic": AnthropicMessagesProvider,
        "gemini": GeminiProvider,
    }
    for kind, cls in kinds.items():
        provider = make_provider(
            EndpointSettings(kind=kind, api_key_env="ITEMEVAL_TEST_FACTORY_KEY")
        )
        assert isinstance(provider, cls) and isinstance(provider, Provider)
        assert "sk-factory-secret-123" not in repr(provider.__dict__.get("settings"))
    assert isinstance(make_provider(EndpointSettings(kind="sim")), SimProvider)
    wire = make_provider(
        EndpointSettings(
            kind="sim", base_url="http://127.0.0.1:9/", sim={"wire_format": "anthropic"}
        )
    )
    assert isinstance(wire, AnthropicMessagesProvider)


def test_providers_holding_keys_refuse_to_be_pickled(monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    monkeypatch.setenv("ITEMEVAL_TEST_FACTORY_KEY", "sk-factory-secret-123")
    provider = make_provider(
        EndpointSettings(kind="openai", api_key_env="ITEMEVAL_TEST_FACTORY_KEY")
    )
    with pytest.raises(TypeError, match="not serialisable"):
        pickle.dumps(provider)
    assert "sk-factory-secret-123" not in repr(provider)


def test_a_missing_key_variable_is_a_config_error_naming_it(monkeypatch) -> None:
    monkeypatch.delenv("ITEMEVAL_TEST_UNSET_KEY", raising=False)
    settings = EndpointSettings(kind="openai", api_key_env="ITEMEVAL_TEST_UNSET_KEY")
    with pytest.raises(ConfigError) as info:
        make_provider(settings, field="endpoints.main")
    assert "ITEMEVAL_TEST_UNSET_KEY" in str(info.value)
    assert "endpoints.main.api_key_env" in str(info.value)
    headers = EndpointSettings(
        kind="openai",
        base_url="http://127.0.0.1:9/v1",
        headers_env={"X-Org": "ITEMEVAL_TEST_UNSET_KEY"},
    )
    with pytest.raises(ConfigError, match=r"headers_env\.X-Org"):
        make_provider(headers)


def test_the_runtime_share_of_concurrency_is_enforced() -> None:
    provider = make_provider(EndpointSettings(kind="sim", max_concurrency=64), max_concurrency=5)
    assert provider.limiter.max_concurrency == 5
    asyncio.run(provider.aclose())


# --------------------------------------------------------------------------- pricing


def test_packaged_prices_and_lookup_order() -> None:
    pricing = Pricing.load()
    assert pricing.prices_as_of
    assert pricing.price("gpt-4o").key == "gpt-4o"
    assert pricing.price("gpt-4o-2024-08-06").key == "gpt-4o"  # prefix
    assert pricing.price("gpt-4o-mini-2024-07-18").key == "gpt-4o-mini"  # longest prefix
    assert pricing.price("claude-opus-4-5-20251101").key == "claude-opus-4-5"
    assert pricing.price("claude-opus-4-20250514").key == "claude-opus-4"
    assert pricing.price("openai/gpt-4.1-mini").key == "gpt-4.1-mini"  # vendor/ stripped
    # a preview is not a snapshot: its price is its own (unpriced here)
    assert pricing.price("gemini-2.5-flash-preview-05-20") is None
    assert pricing.price("sim/strong").key == "sim/strong"
    assert pricing.price("sim/custom-model").key == "sim/*"  # pattern
    assert pricing.price("gpt-4oo") is None  # a prefix must end at a separator
    assert pricing.price("llama-3-70b") is None  # unknown: the caller warns and counts $0
    for family in (
        "gpt-5",
        "o3",
        "o4-mini",
        "claude-3-5-haiku",
        "claude-3-7-sonnet",
        "claude-sonnet-4",
        "claude-haiku-4-5",
        "gemini-2.0-flash",
        "gemini-2.5-pro",
    ):
        assert pricing.price(family) is not None, family


def test_cost_bills_cached_input_and_output() -> None:
    pricing = Pricing.load()
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=100_000,
        cached_input_tokens=400_000,
        reasoning_tokens=50_000,
    )
    # gpt-4o: 2.50 input, 1.25 cached input, 10.00 output per million
    assert pricing.cost("gpt-4o", usage) == pytest.approx(0.6 * 2.5 + 0.4 * 1.25 + 0.1 * 10)
    # no cached price given: cached input is billed as input
    assert pricing.cost("gpt-5-pro", Usage(1_000_000, 0, 500_000)) == pytest.approx(15.0)
    with pytest.raises(KeyError, match="llama"):
        pricing.cost("llama", usage)


def test_override_file_replaces_and_adds(tmp_path: Path) -> None:
    override = tmp_path / "prices.yaml"
    override.write_text(
        "prices_as_of: '2030-01-01'\nmodels:\n"
        "  gpt-4o: {input: 1.0, output: 2.0}\n"
        "  my-local-llama: {input: 0, output: 0}\n",
        encoding="utf-8",
    )
    pricing = Pricing.load(override)
    assert pricing.prices_as_of == "2030-01-01"
    assert pricing.price("gpt-4o-2024-08-06").input_per_m == 1.0
    assert pricing.price("my-local-llama").cost(Usage(10, 10)) == 0.0
    assert pricing.price("claude-3-5-sonnet") is not None  # the rest is kept


def test_bad_override_file_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "prices.yaml"
    bad.write_text("models:\n  gpt-4o: {input: -1, outptu: 2}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        Pricing.load(bad)
    text = str(info.value)
    assert "prices.yaml" in text and "models.gpt-4o.input" in text
    assert "models.gpt-4o.outptu" in text
    broken = tmp_path / "broken.yaml"
    broken.write_text("models: {gpt-4o: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml"):
        Pricing.load(broken)
    with pytest.raises(ConfigError, match="cannot read"):
        Pricing.load(tmp_path / "missing.yaml")
