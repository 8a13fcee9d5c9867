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

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "ModelPrice": "pricing",
    "Pricing": "pricing",
    "input_token_bound": "bounds",
    "output_token_bound": "bounds",
    "ATTEMPTS": "attempts",
    "AttemptMeter": "attempts",
}

__all__ = [
    "ATTEMPTS",
    "AttemptMeter",
    "ModelPrice",
    "Pricing",
    "input_token_bound",
    "output_token_bound",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'itemeval.providers.money' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"itemeval.providers.money.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # pragma: no cover
    from itemeval.providers.money.attempts import ATTEMPTS, AttemptMeter
    from itemeval.providers.money.bounds import input_token_bound, output_token_bound
    from itemeval.providers.money.pricing import ModelPrice, Pricing
