"""What calls cost: prices, the most a call can use, and its attempts as the bill sees them.

- `_pricing` and the packaged table `pricing.yaml`: `Pricing` (prices, cache-read and
  cache-write prices, batch share, long-context tiers, user overrides), cost and worst-case
  cost of a call
- `_bounds`: the most tokens a call can use, what the budget cap reserves
- `_attempts`: `AttemptMeter`, one call's attempts as the bill sees them (sent, in flight,
  abandoned: charged at the worst case)

The public names are `__all__`, imported on first use; the modules are private.
"""

from __future__ import annotations

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _pricing: ModelPrice Pricing
    _bounds: input_token_bound output_token_bound
    _attempts: ATTEMPTS AttemptMeter NotSent
    """,
)
