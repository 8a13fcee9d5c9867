"""Provider plugins: an endpoint `kind` naming a class or function outside itemeval gets what
the built-in clients get (settings, the limiter with its permit source and concurrency share,
the key and secret headers read from the environment), and bad references fail at load time."""

from __future__ import annotations

import asyncio

import pytest
from plugin_files import write_module, write_study

from itemeval.config import load_study
from itemeval.errors import ConfigError
from itemeval.providers import EndpointSettings, LocalPermitSource, RateBucket, make_provider
from itemeval.providers.types import ModelRequest

PLUGIN = '''
from itemeval.providers import ModelResult, Usage


class Echo:
    """Not an HttpProvider: a Provider by protocol, keeping what it was given."""

    def __init__(self, settings, *, limiter, api_key, extra_headers):
        self.settings, self.limiter = settings, limiter
        self.api_key, self.extra_headers = api_key, extra_headers

    async def complete(self, request):
        async with self.limiter.acquire(10) as permit:
            permit.settle(3)
            prefix = self.settings.options.get("prefix", "")
            return ModelResult(ok=True, text=prefix + request.messages[-1]["content"],
                               usage=Usage(1, 2))

    async def aclose(self):
        await self.limiter.aclose()


def not_a_provider(settings, *, limiter, api_key, extra_headers):
    return object()
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch) -> str:
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    return write_module(tmp_path / "code", PLUGIN)


def test_a_plugin_gets_settings_limiter_and_secrets(plugin, monkeypatch):
    monkeypatch.setenv("ITEMEVAL_TEST_GATEWAY_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("ITEMEVAL_TEST_TENANT", "tenant-7")
    settings = EndpointSettings(
        kind=f"{plugin}:Echo",
        base_url="https://gateway.example.com/v1",
        api_key_env="ITEMEVAL_TEST_GATEWAY_KEY",
        headers_env={"X-Tenant": "ITEMEVAL_TEST_TENANT"},
        max_concurrency=8,
        requests_per_minute=600,
        options={"prefix": "echo: "},
    )
    source = LocalPermitSource(RateBucket(600, None))
    provider = make_provider(settings, permit_source=source, max_concurrency=3)
    assert type(provider).__name__ == "Echo"
    assert provider.settings is settings
    assert provider.limiter.max_concurrency == 3  # this worker's share, as built-ins get
    assert provider.api_key.reveal() == "sk-test-not-a-real-key"
    assert "sk-test" not in repr(provider.api_key)
    assert provider.extra_headers["X-Tenant"].reveal() == "tenant-7"

    async def call() -> str:
        try:
            result = await provider.complete(
                ModelRequest("m", ({"role": "user", "content": "hi"},))
            )
            return result.text
        finally:
            await provider.aclose()

    assert asyncio.run(call()) == "echo: hi"
    # Its permits came from the endpoint's bucket, as every client's do.
    assert source.bucket.state().granted_requests >= 1


def test_a_plugin_that_makes_no_provider_is_refused(plugin):
    settings = EndpointSettings(kind=f"{plugin}:not_a_provider", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigError, match="not a Provider"):
        make_provider(settings, field="endpoints.gw")


def test_a_study_with_a_plugin_kind_loads_and_checks_it(plugin, tmp_path):
    endpoint = {"kind": f"{plugin}:Echo", "base_url": "https://gateway.example.com/v1"}
    study = load_study(write_study(tmp_path / "ok", **{"endpoints.gw": endpoint}))
    assert study.endpoints["gw"].is_plugin
    missing = {"kind": f"{plugin}:Ehco", "base_url": "https://gateway.example.com/v1"}
    with pytest.raises(ConfigError) as caught:
        load_study(write_study(tmp_path / "typo", **{"endpoints.gw": missing}))
    text = str(caught.value)
    assert "endpoints.gw.kind" in text and "did you mean 'Echo'" in text


def test_an_unknown_kind_names_the_built_in_ones(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_study(write_study(tmp_path, **{"endpoints.sim.kind": "opneai"}))
    text = str(caught.value)
    assert "unknown provider 'opneai'" in text and "endpoints.sim.kind" in text
    assert "did you mean 'openai'" in text and "built-in providers" in text


def test_options_are_for_plugins_only(tmp_path):
    with pytest.raises(ConfigError, match="`options` are for provider plugins"):
        load_study(write_study(tmp_path, **{"endpoints.sim.options": {"x": 1}}))
