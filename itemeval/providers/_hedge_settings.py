"""`HedgeSettings`: an endpoint's `hedge:` entry (the logic is `calls/_hedging.py`).

A hedge is a second request for a cell whose call has run far past what its endpoint and model
usually take, sent only in the tail of a shard; the first answer wins and the other request is
cancelled. Both are paid for and both count against the budget cap. Off by default: a hedge is
money spent on speed (up to `max_share` more calls, each abandoned request charged at its worst
case), and on a rate-limited endpoint it takes a permit another cell could have used; a user
whose provider has a long tail opts in.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class HedgeSettings(BaseModel):
    """When a straggling call gets a second request (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(False, description="send hedges for this endpoint's straggling calls")
    after_done: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        0.9,
        description="the tail of a shard: hedges are sent once this share of its calls ended",
    )
    quantile: Annotated[float, Field(gt=0.0, lt=1.0)] = Field(
        0.5,
        description="the typical latency: this quantile of the latencies of the worker's recent "
        "answered calls to this endpoint and model",
    )
    factor: Annotated[float, Field(ge=1.0)] = Field(
        3.0, description="a call is straggling once it has run factor x the typical latency"
    )
    min_wait_s: Annotated[float, Field(ge=0.0)] = Field(
        2.0, description="and at least this long (a floor for fast endpoints)"
    )
    min_samples: Annotated[int, Field(ge=1)] = Field(
        20, description="answered calls a worker must have seen before it hedges at all"
    )
    max_share: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        0.05,
        description="hedges at most this share of the calls a worker sent (so of the run's)",
    )
