"""Model providers: one interface, HTTP clients, limits, retries, pricing, and the simulator's
in-process client (`simulated.py`; the simulator itself is `itemeval.simulator`).

    from itemeval.providers import EndpointSettings, ModelRequest, make_provider
    provider = make_provider(EndpointSettings(kind="openai", api_key_env="OPENAI_API_KEY"))
    result = await provider.complete(ModelRequest("gpt-4o-mini", ({"role": "user", ...},)))

See docs/providers.md. The names below are imported on first use, so that `import
itemeval.providers.types` (the contract other packages code against) stays light and does not
load aiohttp, tenacity or the simulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    # the interface
    "ErrorCode": "types",
    "ModelRequest": "types",
    "ModelResult": "types",
    "Provider": "types",
    "SamplingParams": "types",
    "TRANSIENT_CODES": "types",
    "Usage": "types",
    # configuration and construction
    "EndpointSettings": "settings",
    "FaultSettings": "settings",
    "LatencySettings": "settings",
    "SimModelSpec": "settings",
    "SimSettings": "settings",
    "make_bucket": "factory",
    "make_limiter": "factory",
    "make_provider": "factory",
    # clients
    "AnthropicMessagesProvider": "anthropic_messages",
    "GeminiProvider": "gemini",
    "HttpProvider": "transport",
    "OpenAIChatProvider": "openai_chat",
    "estimate_tokens": "transport",
    # limits and retries
    "BucketState": "limits.ratebucket",
    "Grant": "limits.ratebucket",
    "RateBucket": "limits.ratebucket",
    "ConcurrencyPool": "limits.concurrency",
    "LeasedSlots": "limits.concurrency",
    "LocalSlotSource": "limits.concurrency",
    "PermitsUnavailable": "limits.concurrency",
    "SlotSource": "limits.concurrency",
    "LocalPermitSource": "limits.ratelimiter",
    "Permit": "limits.ratelimiter",
    "PermitSource": "limits.ratelimiter",
    "RateLimiter": "limits.ratelimiter",
    "RetryPolicy": "retry",
    "TransientFailure": "retry",
    "retry_after_from_headers": "retry",
    # pricing
    "ModelPrice": "money.pricing",
    "Pricing": "money.pricing",
    # the simulator (`itemeval.simulator`) and its in-process client
    "SimProvider": "simulated",
    "Simulator": "itemeval.simulator",
    "item_difficulty": "itemeval.simulator",
    "p_correct": "itemeval.simulator",
}

__all__ = [
    "TRANSIENT_CODES",
    "AnthropicMessagesProvider",
    "BucketState",
    "ConcurrencyPool",
    "EndpointSettings",
    "ErrorCode",
    "FaultSettings",
    "GeminiProvider",
    "Grant",
    "HttpProvider",
    "LatencySettings",
    "LeasedSlots",
    "LocalPermitSource",
    "LocalSlotSource",
    "ModelPrice",
    "ModelRequest",
    "ModelResult",
    "OpenAIChatProvider",
    "Permit",
    "PermitSource",
    "PermitsUnavailable",
    "Pricing",
    "Provider",
    "RateBucket",
    "RateLimiter",
    "RetryPolicy",
    "SamplingParams",
    "SimModelSpec",
    "SimProvider",
    "SimSettings",
    "Simulator",
    "SlotSource",
    "TransientFailure",
    "Usage",
    "estimate_tokens",
    "item_difficulty",
    "make_bucket",
    "make_limiter",
    "make_provider",
    "p_correct",
    "retry_after_from_headers",
]


_, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from itemeval.providers.anthropic_messages import AnthropicMessagesProvider
    from itemeval.providers.factory import make_bucket, make_limiter, make_provider
    from itemeval.providers.gemini import GeminiProvider
    from itemeval.providers.limits.concurrency import (
        ConcurrencyPool,
        LeasedSlots,
        LocalSlotSource,
        PermitsUnavailable,
        SlotSource,
    )
    from itemeval.providers.limits.ratebucket import BucketState, Grant, RateBucket
    from itemeval.providers.limits.ratelimiter import (
        LocalPermitSource,
        Permit,
        PermitSource,
        RateLimiter,
    )
    from itemeval.providers.money.pricing import ModelPrice, Pricing
    from itemeval.providers.openai_chat import OpenAIChatProvider
    from itemeval.providers.retry import RetryPolicy, TransientFailure, retry_after_from_headers
    from itemeval.providers.settings import (
        EndpointSettings,
        FaultSettings,
        LatencySettings,
        SimModelSpec,
        SimSettings,
    )
    from itemeval.providers.simulated import SimProvider
    from itemeval.providers.transport import HttpProvider, estimate_tokens
    from itemeval.providers.types import (
        TRANSIENT_CODES,
        ErrorCode,
        ModelRequest,
        ModelResult,
        Provider,
        SamplingParams,
        Usage,
    )
    from itemeval.simulator import Simulator, item_difficulty, p_correct
