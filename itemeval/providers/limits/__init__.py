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

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    ratebucket: BucketState Grant RateBucket
    ratelimiter: LocalPermitSource Permit PermitSource RateLimiter
    concurrency: ConcurrencyPool LeasedSlots LocalSlotSource PermitsUnavailable SlotSource
    endpoint: EndpointLimiter EndpointLimits endpoint_identity
    machine: MachineLimiterSource attached
    """,
)
