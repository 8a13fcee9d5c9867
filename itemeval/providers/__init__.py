"""Model providers: one interface, HTTP clients, limits, retries, pricing, and the simulator's
in-process client (`_simulated`; the simulator itself, and its settings, are `itemeval.simulator`,
a floor below).

    from itemeval.providers import EndpointSettings, ModelRequest, make_provider
    provider = make_provider(EndpointSettings(kind="openai", api_key_env="OPENAI_API_KEY"))
    result = await provider.complete(ModelRequest("gpt-4o-mini", ({"role": "user", ...},)))

See docs/providers.md. The public names are `__all__` below, imported on first use. The modules
are private (`_settings`, `_factory`, the wire clients `_openai_chat`, `_anthropic_messages`,
`_gemini`, `_transport`, the batch clients, `_retry`, ...), and so are those of `limits/` and
`money/`, which export their own names. One module stays public: `types`, the light contract
(`ModelRequest`, `ModelResult`, `Provider`, `ErrorCode`, `Usage`) that other packages and
provider plugins code against; `import itemeval.providers.types` loads neither aiohttp, tenacity
nor the simulator.
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
    "EndpointSettings": "_settings",
    "FaultSettings": "itemeval.simulator._settings",
    "LatencySettings": "itemeval.simulator._settings",
    "SimModelSpec": "itemeval.simulator._settings",
    "SimSettings": "itemeval.simulator._settings",
    "make_bucket": "_factory",
    "make_limiter": "_factory",
    "make_provider": "_factory",
    "failure_result": "_failures",
    # clients
    "AnthropicMessagesProvider": "_anthropic_messages",
    "GeminiProvider": "_gemini",
    "HttpProvider": "_transport",
    "OpenAIChatProvider": "_openai_chat",
    "estimate_tokens": "_transport",
    # limits and retries
    "BucketState": "limits._ratebucket",
    "Grant": "limits._ratebucket",
    "RateBucket": "limits._ratebucket",
    "ConcurrencyPool": "limits._concurrency",
    "LeasedSlots": "limits._concurrency",
    "LocalSlotSource": "limits._concurrency",
    "PermitsUnavailable": "limits._concurrency",
    "SlotSource": "limits._concurrency",
    "LocalPermitSource": "limits._ratelimiter",
    "Permit": "limits._ratelimiter",
    "PermitSource": "limits._ratelimiter",
    "RateLimiter": "limits._ratelimiter",
    "RetryPolicy": "_retry",
    "TransientFailure": "_retry",
    "retry_after_from_headers": "_retry",
    # pricing
    "ModelPrice": "money._pricing",
    "Pricing": "money._pricing",
    # batch APIs, deadlines and hedging, reachability (the batch tier, the call path, the run)
    "BatchApiError": "_batch_client",
    "BatchClient": "_batch_client",
    "BatchResult": "_batch_client",
    "BatchStatus": "_batch_client",
    "UncertainCreate": "_batch_client",
    "make_batch_client": "_batch_client",
    "BatchSettings": "itemeval.simulator._settings",
    "BUILTIN_KINDS": "_settings",
    "PromptCacheSettings": "itemeval.simulator._settings",
    "ATTEMPT_SENT": "_deadline",
    "AttemptDeadline": "_deadline",
    "HedgeSettings": "_hedge_settings",
    "EndpointProbe": "_reachability",
    # the simulator (`itemeval.simulator`) and its in-process client
    "SimProvider": "_simulated",
    "Simulator": "itemeval.simulator",
    "item_difficulty": "itemeval.simulator",
    "p_correct": "itemeval.simulator",
}

__all__ = [
    "ATTEMPT_SENT",
    "BUILTIN_KINDS",
    "TRANSIENT_CODES",
    "AnthropicMessagesProvider",
    "AttemptDeadline",
    "BatchApiError",
    "BatchClient",
    "BatchResult",
    "BatchSettings",
    "BatchStatus",
    "BucketState",
    "ConcurrencyPool",
    "EndpointProbe",
    "EndpointSettings",
    "ErrorCode",
    "FaultSettings",
    "GeminiProvider",
    "Grant",
    "HedgeSettings",
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
    "PromptCacheSettings",
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
    "UncertainCreate",
    "Usage",
    "estimate_tokens",
    "failure_result",
    "item_difficulty",
    "make_batch_client",
    "make_bucket",
    "make_limiter",
    "make_provider",
    "p_correct",
    "retry_after_from_headers",
]


_, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from itemeval.providers._anthropic_messages import AnthropicMessagesProvider
    from itemeval.providers._batch_client import (
        BatchApiError,
        BatchClient,
        BatchResult,
        BatchStatus,
        UncertainCreate,
        make_batch_client,
    )
    from itemeval.providers._deadline import ATTEMPT_SENT, AttemptDeadline
    from itemeval.providers._factory import make_bucket, make_limiter, make_provider
    from itemeval.providers._failures import failure_result
    from itemeval.providers._gemini import GeminiProvider
    from itemeval.providers._hedge_settings import HedgeSettings
    from itemeval.providers._openai_chat import OpenAIChatProvider
    from itemeval.providers._reachability import EndpointProbe
    from itemeval.providers._retry import RetryPolicy, TransientFailure, retry_after_from_headers
    from itemeval.providers._settings import BUILTIN_KINDS, EndpointSettings
    from itemeval.providers._simulated import SimProvider
    from itemeval.providers._transport import HttpProvider, estimate_tokens
    from itemeval.providers.limits import (
        BucketState,
        ConcurrencyPool,
        Grant,
        LeasedSlots,
        LocalPermitSource,
        LocalSlotSource,
        Permit,
        PermitSource,
        PermitsUnavailable,
        RateBucket,
        RateLimiter,
        SlotSource,
    )
    from itemeval.providers.money import ModelPrice, Pricing
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
    from itemeval.simulator._settings import (
        BatchSettings,
        FaultSettings,
        LatencySettings,
        PromptCacheSettings,
        SimModelSpec,
        SimSettings,
    )
