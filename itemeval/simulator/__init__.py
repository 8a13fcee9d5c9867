"""The simulator: simulated models `sim/<name>`: calibrated answers, judge outputs, latency, faults.

Over HTTP as `itemeval sim-server` (`server.start_server`: OpenAI, Anthropic and Gemini wire
formats, both batch APIs, `/_sim/stats`); in-process through the provider client
`itemeval.providers._simulated.SimProvider` (endpoint kind `sim` without `base_url`).
"""

from __future__ import annotations

from typing import Any

from itemeval.simulator.engine import SimReply, Simulator
from itemeval.simulator.model import (
    DEFAULT_CATALOG,
    SLOPE,
    item_difficulty,
    p_correct,
    stable_unit,
)

__all__ = [
    "DEFAULT_CATALOG",
    "SLOPE",
    "SimProvider",
    "SimReply",
    "Simulator",
    "item_difficulty",
    "p_correct",
    "stable_unit",
]


def __getattr__(name: str) -> Any:
    """`SimProvider` is the provider client's (`itemeval.providers._simulated`), kept here too."""
    if name == "SimProvider":
        from itemeval.providers import SimProvider

        return SimProvider
    raise AttributeError(f"module 'itemeval.simulator' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "SimProvider"])
