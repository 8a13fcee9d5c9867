"""What calls cost: prices, the most a call can use, and its attempts as the bill sees them.

- `pricing.py` and the packaged table `pricing.yaml`: `Pricing` (prices, cache-read and
  cache-write prices, batch share, long-context tiers, user overrides), cost and worst-case
  cost of a call
- `bounds.py`: the most tokens a call can use, what the budget cap reserves
- `attempts.py`: `AttemptMeter`, one call's attempts as the bill sees them (sent, in flight,
  abandoned: charged at the worst case)

Names are imported on first use.
"""

from __future__ import annotations

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    pricing: ModelPrice Pricing
    bounds: input_token_bound output_token_bound
    attempts: ATTEMPTS AttemptMeter
    """,
)
