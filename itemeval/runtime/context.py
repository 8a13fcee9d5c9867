"""What every worker of a run needs to know, sent once when the worker starts.

Plain, picklable data: the store and cache locations, the conditions (with their templates), the
endpoints' settings (variable names, never keys: workers read keys from their own environment),
the pricing table, and this worker's share of each endpoint's concurrency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from itemeval.design import GenerateCondition, GradeCondition
from itemeval.providers.pricing import Pricing
from itemeval.providers.settings import EndpointSettings


@dataclass(frozen=True)
class RunContext:
    run_id: str
    store_url: str
    endpoints: dict[str, EndpointSettings]
    generate: dict[str, GenerateCondition]
    grade: dict[str, GradeCondition]
    pricing: Pricing
    storage_options: dict[str, Any] | None = None
    cache_url: str | None = None  # None: the response cache is off
    cache_lookup: bool = True  # False under --force: redo the calls (the answers are re-cached)
    concurrency: dict[str, int] = field(default_factory=dict)  # endpoint -> this worker's share
