"""Replies that bill more than their reservation: the worst usage each model has shown.

The budget cap reserves each call's worst case from the request alone: its input bytes (at least
a byte a token under every common tokenizer) and what it lets the model write (`max_tokens`).
A backend that bills more than that (a gateway's mock reporting 503 output tokens for
`max_tokens: 64`, a provider's own accounting) would let a capped run pass its cap by every call
it sends. So the first reply that bills more than its bound is recorded here, per model, as the
worst usage seen: from then on that model's reservations cover it (input scaled by the worst
ratio seen, output the most seen), and every call of the model that reserved before is topped up
to it before it is sent, or not sent (`providers/money/_attempts.py`, `AttemptMeter.top_up`).
What stays possible is what was already in flight when the reply came.

One worker process's view: on a cluster each worker learns from the replies it gets itself.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from itemeval.providers.types import Usage

log = logging.getLogger("itemeval.budget")


@dataclass(frozen=True, slots=True)
class WorstUsage:
    """The most a model's replies billed against their bounds: input as a ratio of the bound,
    output in tokens."""

    input_ratio: float = 1.0
    output_tokens: int = 0

    def input_bound(self, bound: int) -> int:
        return math.ceil(bound * self.input_ratio)

    def output_bound(self, bound: int) -> int:
        return max(bound, self.output_tokens)


class OverBilling:
    """The worst usage seen per model, and a count that moves each time it grows (a call that
    reserved before compares its count with the model's)."""

    def __init__(self) -> None:
        self._worst: dict[str, WorstUsage] = {}
        self._changes: dict[str, int] = {}

    def worst(self, model: str) -> WorstUsage | None:
        return self._worst.get(model)

    def changes(self, model: str) -> int:
        return self._changes.get(model, 0)

    def observe(self, model: str, usage: Usage, input_bound: int, output_bound: int) -> bool:
        """A reply's usage against the bounds it was reserved for; True when it billed more
        (the model's worst usage grew)."""
        over_input = usage.input_tokens > input_bound
        over_output = usage.output_tokens > output_bound
        if not (over_input or over_output):
            return False
        before = self._worst.get(model, WorstUsage())
        after = WorstUsage(
            max(before.input_ratio, usage.input_tokens / max(1, input_bound)),
            max(before.output_tokens, usage.output_tokens),
        )
        if after == before:
            return False
        self._worst[model] = after
        self._changes[model] = self.changes(model) + 1
        log.warning(
            "%s billed %d input and %d output tokens for a call reserved for at most %d and %d: "
            "its calls now reserve the worst usage seen (input x%.2f, %d output tokens); calls "
            "not yet sent wait for that reservation, or are not sent when it does not fit",
            model,
            usage.input_tokens,
            usage.output_tokens,
            input_bound,
            output_bound,
            after.input_ratio,
            after.output_tokens,
        )
        return True
