"""What calls cost at the pricing table's prices, row by row: the response cache's answers.

A row answered from the response cache paid nothing (`usd` 0) and keeps the tokens of the call
that first produced the answer. What that call costs at its price is what the cache saved, and
what the condition would have paid alone: `call_usd` prices the tokens as the runtime prices a
call (`ModelPrice.cost`: input at the input price, prompt-cache reads at the cached-input price,
output at the output price; the batch API's share of each price for rows of the batch tier; a
model's long-context multipliers when a row's input passes its threshold). Rows keep no count
of tokens written to a provider's prompt cache, so a hit is priced as if none were (a write
premium the first call paid is in that call's own `usd`).

`ModelPrice.cost` is linear in the tokens within one price tier and one long-context tier: the
price per token of each kind is read from it once per tier, and the rows are priced with numpy.
"""

from __future__ import annotations

import numpy as np

from itemeval.providers.money import ModelPrice
from itemeval.providers.types import Usage


def call_usd(
    price: ModelPrice | None,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    cached_input_tokens: np.ndarray,
    batch: np.ndarray,
) -> np.ndarray:
    """USD of each call at `price` (live, or the batch tier's where `batch`); zeros for a model
    the table does not price (a scorer, an unknown model)."""
    n = len(input_tokens)
    out = np.zeros(n, dtype=np.float64)
    if price is None or n == 0:
        return out
    inputs = np.asarray(input_tokens, dtype=np.float64)
    outputs = np.asarray(output_tokens, dtype=np.float64)
    cached = np.minimum(np.asarray(cached_input_tokens, dtype=np.float64), inputs)
    batch = np.asarray(batch, dtype=bool)
    above = price.long_above
    long = inputs > above if above is not None else np.zeros(n, dtype=bool)
    for tier, in_tier in (("live", ~batch), ("batch", batch)):
        tiered = price.at_tier(tier)
        for is_long in (False, True):
            rows = in_tier & (long == is_long)
            if not rows.any():
                continue
            per_input, per_cached, per_output = _per_token(tiered, is_long)
            out[rows] = (
                (inputs[rows] - cached[rows]) * per_input
                + cached[rows] * per_cached
                + outputs[rows] * per_output
            )
    return out


def _per_token(price: ModelPrice, long: bool) -> tuple[float, float, float]:
    """USD of one uncached input token, one prompt-cached input token and one output token, at
    the long-context tier or below it, as `ModelPrice.cost` prices them."""
    # A call whose input reaches the tier asked for (`cost` reads the tier from the input).
    tokens = (price.long_above or 0) + 1 if long else 1
    fresh = price.cost(Usage(input_tokens=tokens))
    read = price.cost(Usage(input_tokens=tokens, cached_input_tokens=tokens))
    written = price.cost(Usage(input_tokens=tokens, output_tokens=tokens))
    return fresh / tokens, read / tokens, (written - fresh) / tokens
