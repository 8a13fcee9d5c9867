"""What every worker of a run needs to know, sent once when the worker starts.

Plain, picklable data: the store and cache locations, the conditions (with their templates), the
endpoints' settings (variable names, never keys: workers read keys from their own environment),
the pricing table, whether the run has a budget cap, and this worker's share of each endpoint's
concurrency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from itemeval.planning import GenerateCondition, GradeCondition
from itemeval.providers import EndpointSettings
from itemeval.providers.money import Pricing


@dataclass(frozen=True)
class RunContext:
    run_id: str
    store_url: str
    endpoints: dict[str, EndpointSettings]
    generate: dict[str, GenerateCondition]
    grade: dict[str, GradeCondition]
    pricing: Pricing
    storage_options: dict[str, Any] | None = None
    #: The response cache (also the journal of paid answers); None only in unit tests.
    cache_url: str | None = None
    cache_storage_options: dict[str, Any] | None = None
    #: Under --force, only answers paid since this moment (by this run) are reused.
    reuse_since: datetime | None = None
    #: A worker's view of the response cache holds what was cached before this (the run's id,
    #: a sortable id): what the run itself pays is found by a fresh listing, when a shard is
    #: dispatched again or repeats a request (`store.ResponseCache`, `indexed_before`). None:
    #: everything, the worker's own answers included.
    cache_indexed_before: str | None = None
    capped: bool = False  # budget.max_usd is set: every call reserves its worst case first
    #: Verifiable scorer conditions whose grades generate shards write with their solutions
    #: (the run grades too, without --force): the grade stage then has nothing left for them.
    score_inline: tuple[str, ...] = ()
    concurrency: dict[str, int] = field(default_factory=dict)  # endpoint -> this worker's share
    #: The machine's limiter files (`providers/limits/_machine.py`): set for a run on this
    #: machine (in-process or on a local Ray of its own), so that its limits hold together with
    #: every other run on the machine; None on a cluster (its limiter actors hold them).
    limits_dir: str | None = None
