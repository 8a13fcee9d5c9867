"""An endpoint's limits: requests and tokens per minute, and concurrency, held across processes.

- `_ratebucket`: `RateBucket`, the authoritative per-endpoint token bucket (batch grants,
  AIMD on 429)
- `_ratelimiter`: `RateLimiter` per process (permits that lapse batch by batch), the
  `PermitSource` protocol, `LocalPermitSource`
- `_concurrency`: `ConcurrencyPool` (an endpoint's concurrency as leases) and `LeasedSlots`
- `_endpoint`: `EndpointLimiter`, an endpoint's bucket, pool and jobs in one object; the
  endpoint identity that names its limiter
- `_machine`: the machine's limiter, an `EndpointLimiter` in a file under `flock` shared by
  every itemeval process on the machine (`MachineLimiterSource`, `attached`)

On a cluster the runtime holds each `EndpointLimiter` in an actor. The public names are `__all__`,
imported on first use; the modules are private.
"""

from __future__ import annotations

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _ratebucket: BucketState Grant RateBucket
    _ratelimiter: LocalPermitSource Permit PermitSource RateLimiter
    _concurrency: ConcurrencyPool LeasedSlots LocalSlotSource PermitsUnavailable SlotSource
    _endpoint: EndpointLimiter EndpointLimits endpoint_identity endpoint_limits
    _machine: MachineLimiterSource attached limits_dir machine_source
    """,
)
