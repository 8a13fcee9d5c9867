"""`make_provider`: from an endpoint's settings to a ready `Provider` (keys read here, at the end).

The runtime calls it once per endpoint per worker process, passing the permit source that makes
the limits hold across the cluster (its Ray actor adapter) and this worker's share of the
endpoint's concurrency. Without a source, a process-local `RateBucket` enforces the limits (the
no-Ray case).

A provider plugin (an endpoint whose `kind` is not built in, see `itemeval.plugins`) is called
exactly as the built-in client classes are, so it gets what they get:

    plugin(settings, limiter=limiter, api_key=key_or_None, extra_headers={name: Secret | str})

`limiter` is this process's `RateLimiter` (its permit source and concurrency share already
attached): the endpoint's limits hold only if every request goes through `limiter.acquire`,
which `HttpProvider` subclasses do. It must return a `Provider` (`complete`, `aclose`).
"""

from __future__ import annotations

from itemeval.errors import ConfigError, Problem
from itemeval.plugins import PROVIDER_GROUP, load_plugin
from itemeval.providers._anthropic_messages import AnthropicMessagesProvider
from itemeval.providers._gemini import GeminiProvider
from itemeval.providers._openai_chat import OpenAIChatProvider
from itemeval.providers._settings import BUILTIN_KINDS, EndpointSettings
from itemeval.providers._simulated import SimProvider
from itemeval.providers._transport import HttpProvider
from itemeval.providers.limits import (
    LocalPermitSource,
    PermitSource,
    RateBucket,
    RateLimiter,
    SlotSource,
)
from itemeval.providers.types import Provider
from itemeval.secrets import Secret, read_key

_WIRES: dict[str, type[HttpProvider]] = {
    "openai": OpenAIChatProvider,
    "anthropic": AnthropicMessagesProvider,
    "gemini": GeminiProvider,
}


def make_bucket(settings: EndpointSettings) -> RateBucket:
    """The authoritative bucket for an endpoint's limits (without a declared requests limit,
    one found from its 429s)."""
    return RateBucket(settings.requests_per_minute, settings.tokens_per_minute)


def make_limiter(
    settings: EndpointSettings,
    *,
    permit_source: PermitSource | None = None,
    max_concurrency: int | None = None,
    slot_source: SlotSource | None = None,
) -> RateLimiter:
    """This process's limiter for the endpoint: rate permits from the source (a process-local
    bucket without one; an endpoint that declares no requests limit finds one from its 429s,
    so it draws permits too), and concurrency leased from `slot_source` (the endpoint's pool shared
    by every worker and driver) or, without one, `max_concurrency` slots of its own."""
    if permit_source is None:
        permit_source = LocalPermitSource(make_bucket(settings))
    return RateLimiter(
        permit_source,
        max_concurrency=max_concurrency or settings.max_concurrency,
        track_tokens=settings.tokens_per_minute is not None,
        slots=slot_source,
    )


def make_provider(
    settings: EndpointSettings,
    *,
    permit_source: PermitSource | None = None,
    max_concurrency: int | None = None,
    slot_source: SlotSource | None = None,
    field: str | None = None,
) -> Provider:
    """A client for the endpoint. Reads the API key and secret headers from the environment
    (a missing variable is a `ConfigError` naming it; `field` says where in the study it was)."""
    limiter = make_limiter(
        settings,
        permit_source=permit_source,
        max_concurrency=max_concurrency,
        slot_source=slot_source,
    )
    if settings.in_process:
        return SimProvider(settings, limiter=limiter)
    key: Secret | None = None
    if settings.api_key_env is not None:
        key = read_key(settings.api_key_env, field=_join(field, "api_key_env"))
    secret_headers: dict[str, Secret | str] = {}
    for header, env in settings.headers_env.items():
        value = read_key(env, field=_join(field, f"headers_env.{header}"))
        assert value is not None
        secret_headers[header] = value
    if settings.kind == "sim":
        wire = _WIRES[settings.sim_settings.wire_format]
        return wire(
            settings,
            limiter=limiter,
            api_key=key,
            extra_headers=secret_headers,
            send_sim_hints=True,
        )
    if settings.kind in _WIRES:
        return _WIRES[settings.kind](
            settings, limiter=limiter, api_key=key, extra_headers=secret_headers
        )
    where = _join(field, "kind")
    plugin = load_plugin(
        PROVIDER_GROUP, settings.kind, what="provider", field=where, builtin=BUILTIN_KINDS
    )
    provider = plugin.obj(settings, limiter=limiter, api_key=key, extra_headers=secret_headers)
    if not isinstance(provider, Provider):
        raise ConfigError(
            Problem(
                f"provider plugin {settings.kind!r} made a {type(provider).__name__}, which is "
                "not a Provider (it needs async complete(request) and aclose())",
                field=where,
            )
        )
    return provider


def _join(prefix: str | None, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name
