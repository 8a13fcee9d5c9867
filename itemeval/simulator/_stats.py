"""What the sim-server saw, for tests to check physical truth against (`GET /_sim/stats`).

Every update on the live path is O(1): counters, two dictionary increments per answer, and one
float and one integer appended per admitted request (16 bytes: a million requests hold 16 MB).
Windows over the arrival times are computed only when asked (`?window_s=`), vectorised.
docs/providers.md documents every field.
"""

from __future__ import annotations

import time
from array import array
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from itemeval.simulator._engine import ReplyTokens
from itemeval.simulator._prompt_cache import CacheUsage

#: The live routes, as `ok_by_route` names them.
ROUTE_OPENAI = "/v1/chat/completions"
ROUTE_ANTHROPIC = "/v1/messages"
ROUTE_GEMINI = "/v1beta/models/{model}:generateContent"


@dataclass(slots=True)
class TokenTotals:
    """Tokens billed, as the providers count them (input includes the cached part)."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0  # part of output_tokens
    cache_read_input_tokens: int = 0  # part of input_tokens
    cache_creation_input_tokens: int = 0  # part of input_tokens (Anthropic's cache writes)

    def add(self, usage: ReplyTokens, cache: CacheUsage) -> None:
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.reasoning_tokens += usage.reasoning_tokens
        self.cache_read_input_tokens += cache.read
        self.cache_creation_input_tokens += cache.written


@dataclass(slots=True)
class BatchStats:
    """Batches (OpenAI and Anthropic together) and the requests they answered."""

    submitted: int = 0
    completed: int = 0  # ended with every request done (succeeded or errored)
    expired: int = 0
    cancelled: int = 0
    failed: int = 0  # OpenAI: the input file did not validate
    ok: int = 0  # requests answered successfully
    errored: int = 0  # requests that ended in an error (injected, or an invalid request)
    expired_requests: int = 0
    cancelled_requests: int = 0
    ok_by_model: dict[str, int] = field(default_factory=dict)
    usage: TokenTotals = field(default_factory=TokenTotals)


class ServerStats:
    """Counters of the live routes and the batches; see the module docstring."""

    def __init__(self, in_flight: int = 0) -> None:
        self.requests = 0  # arrivals on the live routes, refused ones included
        self.ok = 0
        self.rate_limited = 0  # 429s from the server's own limits (the three below)
        # Arrivals over each of the server's own limits (refused with a 429): what a client's
        # limiter must never cause. Counted before anything else is done with the request.
        self.over_rpm = 0
        self.over_tpm = 0
        self.over_concurrency = 0
        self.faults: dict[str, int] = {}
        self.errors = 0  # 400/404 for bad requests
        self.first_arrival_s: float | None = None  # monotonic seconds since the server started
        self.last_arrival_s: float | None = None
        self.ok_by_model: dict[str, int] = {}
        self.ok_by_route: dict[str, int] = {}
        # A gauge, not a counter: a reset keeps the requests still in flight.
        self.in_flight = in_flight
        self.max_concurrent = in_flight
        self.usage = TokenTotals()
        # Admitted requests: when each reached the limiter (seconds since the server started,
        # non-decreasing by construction) and the tokens it was charged.
        self.arrivals = array("d")
        self.arrival_tokens = array("q")
        self.first_arrival_epoch: float | None = None
        self.admitted_tokens = 0
        self.batch = BatchStats()

    # ---------------------------------------------------------------- the live path

    def admitted(self, at_s: float, tokens: int) -> None:
        if not self.arrivals:
            self.first_arrival_epoch = time.time()
        self.arrivals.append(at_s)
        self.arrival_tokens.append(tokens)
        self.admitted_tokens += tokens

    def answered(self, model: str, route: str, usage: ReplyTokens, cache: CacheUsage) -> None:
        self.ok += 1
        by_model, by_route = self.ok_by_model, self.ok_by_route
        by_model[model] = by_model.get(model, 0) + 1
        by_route[route] = by_route.get(route, 0) + 1
        self.usage.add(usage, cache)

    # ---------------------------------------------------------------- the report

    def to_json(
        self, *, window_s: float | None = None, arrivals: bool = False, cpu_s: float = 0.0
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "requests": self.requests,
            "ok": self.ok,
            "ok_by_model": dict(self.ok_by_model),
            "ok_by_route": dict(self.ok_by_route),
            "rate_limited": self.rate_limited,
            "over_limit": self.over_rpm + self.over_tpm + self.over_concurrency,
            "over_rpm": self.over_rpm,
            "over_tpm": self.over_tpm,
            "over_concurrency": self.over_concurrency,
            "faults": dict(self.faults),
            "errors": self.errors,
            "first_arrival_s": self.first_arrival_s,
            "last_arrival_s": self.last_arrival_s,
            "in_flight": self.in_flight,
            "max_concurrent": self.max_concurrent,
            "admitted": len(self.arrivals),
            "admitted_tokens": self.admitted_tokens,
            "usage": asdict(self.usage),
            "batch": asdict(self.batch),
            "cpu_s": cpu_s,
        }
        if window_s is not None:
            times = np.frombuffer(self.arrivals, dtype=np.float64)
            tokens = np.frombuffer(self.arrival_tokens, dtype=np.int64)
            out["window_s"] = window_s
            out["max_in_window"] = max_in_window(times, window_s)
            out["max_tokens_in_window"] = max_tokens_in_window(times, tokens, window_s)
        if arrivals:
            out["first_arrival_epoch"] = self.first_arrival_epoch
            out["arrivals_s"] = self.arrivals.tolist()
            out["arrival_tokens"] = self.arrival_tokens.tolist()
        return out


def _window_starts(times: np.ndarray, window_s: float) -> np.ndarray:
    """For each arrival i, the first arrival j with times[j] > times[i] - window_s: arrivals
    j..i are those in the window of length `window_s` ending at arrival i."""
    return np.searchsorted(times, times - window_s, side="right")


def max_in_window(times: np.ndarray, window_s: float) -> int:
    """The most arrivals in any window of `window_s` seconds (`times` sorted)."""
    if len(times) == 0:
        return 0
    counts = np.arange(len(times)) - _window_starts(times, window_s) + 1
    return int(counts.max())


def max_tokens_in_window(times: np.ndarray, tokens: np.ndarray, window_s: float) -> int:
    """The most tokens admitted in any window of `window_s` seconds."""
    if len(times) == 0:
        return 0
    cumulative = np.concatenate(([0], np.cumsum(tokens)))
    ends = np.arange(1, len(times) + 1)
    sums = cumulative[ends] - cumulative[_window_starts(times, window_s)]
    return int(sums.max())
