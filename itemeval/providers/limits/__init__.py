"""An endpoint's limits: requests and tokens per minute, and concurrency, held across processes.

- `ratebucket.py`: `RateBucket`, the authoritative per-endpoint token bucket (batch grants,
  AIMD on 429)
- `ratelimiter.py`: `RateLimiter` per process (permits that lapse batch by batch), the
  `PermitSource` protocol, `LocalPermitSource`
- `concurrency.py`: `ConcurrencyPool` (an endpoint's concurrency as leases) and `LeasedSlots`
- `endpoint.py`: `EndpointLimiter`, an endpoint's bucket, pool and jobs in one object; the
  endpoint identity that names its limiter
- `machine.py`: the machine's limiter, an `EndpointLimiter` in a file under `flock` shared by
  every itemeval process on the machine (`MachineLimiterSource`, `attached`)

On a cluster the runtime holds each `EndpointLimiter` in an actor. Names are imported on first
use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "BucketState": "ratebucket",
    "Grant": "ratebucket",
    "RateBucket": "ratebucket",
    "LocalPermitSource": "ratelimiter",
    "Permit": "ratelimiter",
    "PermitSource": "ratelimiter",
    "RateLimiter": "ratelimiter",
    "ConcurrencyPool": "concurrency",
    "LeasedSlots": "concurrency",
    "LocalSlotSource": "concurrency",
    "PermitsUnavailable": "concurrency",
    "SlotSource": "concurrency",
    "EndpointLimiter": "endpoint",
    "EndpointLimits": "endpoint",
    "endpoint_identity": "endpoint",
    "MachineLimiterSource": "machine",
    "attached": "machine",
}

__all__ = [
    "BucketState",
    "ConcurrencyPool",
    "EndpointLimiter",
    "EndpointLimits",
    "Grant",
    "LeasedSlots",
    "LocalPermitSource",
    "LocalSlotSource",
    "MachineLimiterSource",
    "Permit",
    "PermitSource",
    "PermitsUnavailable",
    "RateBucket",
    "RateLimiter",
    "SlotSource",
    "attached",
    "endpoint_identity",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'itemeval.providers.limits' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"itemeval.providers.limits.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # pragma: no cover
    from itemeval.providers.limits.concurrency import (
        ConcurrencyPool,
        LeasedSlots,
        LocalSlotSource,
        PermitsUnavailable,
        SlotSource,
    )
    from itemeval.providers.limits.endpoint import (
        EndpointLimiter,
        EndpointLimits,
        endpoint_identity,
    )
    from itemeval.providers.limits.machine import MachineLimiterSource, attached
    from itemeval.providers.limits.ratebucket import BucketState, Grant, RateBucket
    from itemeval.providers.limits.ratelimiter import (
        LocalPermitSource,
        Permit,
        PermitSource,
        RateLimiter,
    )
