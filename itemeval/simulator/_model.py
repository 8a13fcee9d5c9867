"""The simulated models: a catalog of abilities, the chance of a correct answer, stable draws.

`p_correct(ability, difficulty)` is the one formula (exported so tests and users can compute the
true expected accuracy of a simulated model on a dataset):

    p_correct = 1 / (1 + exp(-8 * (ability - difficulty)))

An item whose difficulty equals the model's ability is answered correctly half the time; over
items of uniformly spread difficulty the expected accuracy is close to the ability (0.85 -> 0.82,
0.6 -> 0.60, 0.35 -> 0.36). An item's difficulty is its own `difficulty` when it has one, otherwise
`item_difficulty(item_id)`, a stable value in [0, 1) derived from the id.

Every random choice about an answer is a `stable_unit(seed, ...)` draw: a hash of the seed, the
model, the item, the epoch and what is being decided, so the same inputs always give the same
answer, in any process, in any order.
"""

from __future__ import annotations

import hashlib
import math
import struct

from itemeval.simulator._settings import SimModelSpec

#: Slope of the logistic link between (ability - difficulty) and the chance of a correct answer.
SLOPE = 8.0

DEFAULT_CATALOG: dict[str, SimModelSpec] = {
    "strong": SimModelSpec(ability=0.85, judge_accuracy=0.95),
    "medium": SimModelSpec(ability=0.6, judge_accuracy=0.85),
    "weak": SimModelSpec(ability=0.35, judge_accuracy=0.7),
    "judge": SimModelSpec(ability=0.9, judge_accuracy=0.95),
    # A reasoning model: hidden reasoning tokens on every call, even without reasoning params.
    "reasoner": SimModelSpec(ability=0.8, judge_accuracy=0.9, reasoning_tokens=1024),
}


def p_correct(ability: float, difficulty: float) -> float:
    """Chance that a model of `ability` answers an item of `difficulty` correctly (both 0..1)."""
    return 1.0 / (1.0 + math.exp(-SLOPE * (ability - difficulty)))


def stable_unit(*parts: object) -> float:
    """A uniform number in [0, 1) determined by `parts` alone (blake2b of their text)."""
    text = "\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass")
    digest = hashlib.blake2b(text, digest_size=8).digest()
    return (struct.unpack(">Q", digest)[0] >> 11) / float(1 << 53)


def item_difficulty(item_id: str, difficulty: float | None = None) -> float:
    """The item's difficulty: its own when given, else a stable value derived from its id
    (case-insensitive, as item ids are)."""
    if difficulty is not None:
        return min(1.0, max(0.0, float(difficulty)))
    return stable_unit("difficulty", item_id.lower())


def model_name(model: str) -> str:
    """`sim/strong` and `strong` both name the catalog entry `strong`."""
    return model.removeprefix("sim/")


def catalog(overrides: dict[str, SimModelSpec] | None = None) -> dict[str, SimModelSpec]:
    """The default catalog with `overrides` merged over it."""
    merged = dict(DEFAULT_CATALOG)
    merged.update(overrides or {})
    return merged
