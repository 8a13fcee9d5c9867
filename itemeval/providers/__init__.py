"""Model providers: one interface, HTTP clients, limits, retries, pricing and the simulator.

    from itemeval.providers import EndpointSettings, ModelRequest, make_provider
    provider = make_provider(EndpointSettings(kind="openai", api_key_env="OPENAI_API_KEY"))
    result = await provider.complete(ModelRequest("gpt-4o-mini", ({"role": "user", ...},)))

See docs/providers.md.
"""

from itemeval.providers.anthropic_messages import AnthropicMessagesProvider
from itemeval.providers.factory import make_bucket, make_limiter, make_provider
from itemeval.providers.gemini import GeminiProvider
from itemeval.providers.openai_chat import OpenAIChatProvider
from itemeval.providers.pricing import ModelPrice, Pricing
from itemeval.providers.ratebucket import BucketState, Grant, RateBucket
from itemeval.providers.ratelimiter import LocalPermitSource, Permit, PermitSource, RateLimiter
from itemeval.providers.retry import RetryPolicy, TransientFailure, retry_after_from_headers
from itemeval.providers.settings import (
    EndpointSettings,
    FaultSettings,
    LatencySettings,
    SimModelSpec,
    SimSettings,
)
from itemeval.providers.sim import SimProvider, Simulator, item_difficulty, p_correct
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

__all__ = [
    "TRANSIENT_CODES",
    "AnthropicMessagesProvider",
    "BucketState",
    "EndpointSettings",
    "ErrorCode",
    "FaultSettings",
    "GeminiProvider",
    "Grant",
    "HttpProvider",
    "LatencySettings",
    "LocalPermitSource",
    "ModelPrice",
    "ModelRequest",
    "ModelResult",
    "OpenAIChatProvider",
    "Permit",
    "PermitSource",
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
