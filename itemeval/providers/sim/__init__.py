"""The simulated provider `sim/<name>`: calibrated answers, judge outputs, latency and faults.

In-process as `SimProvider`, over HTTP as `itemeval sim-server` (`server.start_server`).
"""

from itemeval.providers.sim.engine import SimReply, Simulator
from itemeval.providers.sim.model import (
    DEFAULT_CATALOG,
    SLOPE,
    item_difficulty,
    p_correct,
    stable_unit,
)
from itemeval.providers.sim.provider import SimProvider

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
