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

from typing import TYPE_CHECKING

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


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from itemeval.providers.limits._concurrency import ConcurrencyPool as ConcurrencyPool
    from itemeval.providers.limits._concurrency import LeasedSlots as LeasedSlots
    from itemeval.providers.limits._concurrency import LocalSlotSource as LocalSlotSource
    from itemeval.providers.limits._concurrency import PermitsUnavailable as PermitsUnavailable
    from itemeval.providers.limits._concurrency import SlotSource as SlotSource
    from itemeval.providers.limits._endpoint import EndpointLimiter as EndpointLimiter
    from itemeval.providers.limits._endpoint import EndpointLimits as EndpointLimits
    from itemeval.providers.limits._endpoint import endpoint_identity as endpoint_identity
    from itemeval.providers.limits._endpoint import endpoint_limits as endpoint_limits
    from itemeval.providers.limits._machine import MachineLimiterSource as MachineLimiterSource
    from itemeval.providers.limits._machine import attached as attached
    from itemeval.providers.limits._machine import limits_dir as limits_dir
    from itemeval.providers.limits._machine import machine_source as machine_source
    from itemeval.providers.limits._ratebucket import BucketState as BucketState
    from itemeval.providers.limits._ratebucket import Grant as Grant
    from itemeval.providers.limits._ratebucket import RateBucket as RateBucket
    from itemeval.providers.limits._ratelimiter import LocalPermitSource as LocalPermitSource
    from itemeval.providers.limits._ratelimiter import Permit as Permit
    from itemeval.providers.limits._ratelimiter import PermitSource as PermitSource
    from itemeval.providers.limits._ratelimiter import RateLimiter as RateLimiter
