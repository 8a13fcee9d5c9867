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

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _pricing: ModelPrice Pricing
    _bounds: input_token_bound output_token_bound
    _attempts: ATTEMPTS AttemptMeter NotSent
    """,
)


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from itemeval.providers.money._attempts import ATTEMPTS as ATTEMPTS
    from itemeval.providers.money._attempts import AttemptMeter as AttemptMeter
    from itemeval.providers.money._attempts import NotSent as NotSent
    from itemeval.providers.money._bounds import input_token_bound as input_token_bound
    from itemeval.providers.money._bounds import output_token_bound as output_token_bound
    from itemeval.providers.money._pricing import ModelPrice as ModelPrice
    from itemeval.providers.money._pricing import Pricing as Pricing
