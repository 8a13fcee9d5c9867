"""Two runs at once on one machine hold one endpoint's limits together (the machine's limiter).

Two `itemeval generate` commands, started together as a user starts them, each declaring the
whole of two endpoints' limits: `fast` (a sim-server enforcing `--rpm`) and `slow` (a sim-server
enforcing `--max-concurrency`, its answers slower). Each run alone would use all of either limit,
so together they would exceed both if each held its own: the demand is over the RPM (each run
could send faster than the limit) and over the slots (each run has more calls waiting than
slots). Physical truth is the servers' own count of arrivals over their limits: 0, with the
server's bucket holding one second of the rate (twice), two seconds and half a second, while the
RPM is still filled to 90% or more. (`benchmarks/shared_limits.py --reps 10` repeats it ten times.)
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from runtime_files import physical_rows, sim_server, sim_stats, write_items, write_study

from itemeval.config import load_study
from itemeval.providers import EndpointSettings
from itemeval.providers.limits._machine import machine_limiter

#: The fill (90% of the RPM) is counted against the wall clock: `make test` runs these alone.
pytestmark = pytest.mark.serial

ITEMS = 200
RPM = 1800  # 30 requests/s for both runs together
SLOTS = 4


def _study(folder: Path, items: Path, fast: str, slow: str) -> Path:
    return write_study(
        folder,
        study=folder.name,
        datasets=[{"name": "sums", "path": str(items)}],
        endpoints={
            "fast": {
                "kind": "sim",
                "base_url": fast,
                "requests_per_minute": RPM,
                "max_concurrency": 64,
                "backoff_initial_s": 0.1,
                "backoff_max_s": 1.0,
            },
            "slow": {
                "kind": "sim",
                "base_url": slow,
                "max_concurrency": SLOTS,
                "backoff_initial_s": 0.1,
                "backoff_max_s": 1.0,
            },
        },
        models=[
            {"id": "sim/strong", "endpoint": "fast"},
            {"id": "sim/weak", "endpoint": "slow"},
        ],
        **{
            "facets.prompt": ["builtin:direct"],
            "facets.replications": 1,
            "facets.grader": [],
            "graders": {},
            "budget.policy": "full",
            "runtime.shard_size": 50,
        },
    )


def _used_a_while_ago(fast: str, limits: Path) -> None:
    """The endpoint's limiter was used, then sat idle for longer than a second: as for a run
    started after an earlier one. (A limiter that banked the idle second's permits would send
    them at once: more than a provider holding half a second of the rate takes.)"""
    settings = EndpointSettings(
        kind="sim", base_url=fast, requests_per_minute=RPM, max_concurrency=64
    )
    limiter = machine_limiter(settings, limits)
    limiter.call(lambda state: state.exchange(1, 0))
    limiter.close()
    time.sleep(1.5)


def _longest_gaps(base_url: str) -> list[tuple[float, float]]:
    """The longest pauses between arrivals (seconds, and when), to tell a slow limiter from a
    demand that paused."""
    with urllib.request.urlopen(f"{base_url.removesuffix('/v1')}/_sim/stats?arrivals=1") as answer:
        arrivals = json.loads(answer.read())["arrivals_s"]
    pauses = [(b - a, a - arrivals[0]) for a, b in itertools.pairwise(arrivals)]
    return [(round(g, 3), round(at, 1)) for g, at in sorted(pauses)[-8:]]


@pytest.mark.parametrize(
    ("burst_s", "repetition"),
    [(1, 1), (1, 2), (2, 1), (0.5, 1)],
    ids=["1s-a", "1s-b", "2s", "0.5s"],
)
def test_two_local_runs_hold_one_endpoints_limits_together(tmp_path, burst_s, repetition):
    items = write_items(tmp_path / "items" / "sums", ITEMS)
    # The server holds `burst_s` seconds of its rate: a client whose sends keep to the limit
    # never empties it, while two clients that each take the whole limit empty it within a few
    # seconds of their overlap (each run's share of the fast endpoint takes about 7 s alone).
    fast_server = sim_server("--latency-ms", "20", "--rpm", str(RPM), "--burst-s", str(burst_s))
    slow_server = sim_server("--latency-ms", "50", "--max-concurrency", str(SLOTS))
    with fast_server as fast, slow_server as slow:
        paths = [_study(tmp_path / name, items, fast, slow) for name in ("one", "two")]
        limits = tmp_path / "limits"
        _used_a_while_ago(fast, limits)
        env = {
            **os.environ,
            "ITEMEVAL_CACHE_DIR": str(tmp_path / "cache"),
            "ITEMEVAL_LIMITS_DIR": str(limits),
        }
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "itemeval", "generate", str(path), "--yes"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for path in paths
        ]
        started = time.monotonic()
        ended = [(run.communicate(timeout=240)[1], run.returncode) for run in runs]
        took = time.monotonic() - started
        fast_stats, slow_stats = sim_stats(fast), sim_stats(slow)
        gaps = _longest_gaps(fast)
    # Nothing over either limit, from both runs together ...
    assert fast_stats["over_limit"] == 0, fast_stats
    assert slow_stats["over_limit"] == 0, slow_stats
    for (err, code), path in zip(ended, paths, strict=True):
        assert code == 0, err[-3000:]
        assert physical_rows(str(load_study(path).store_url)) == 2 * ITEMS
    assert fast_stats["ok"] == slow_stats["ok"] == 2 * ITEMS
    # ... while the demand was over both: every slot was used, and the fast endpoint's answers
    # took as long as its limit makes them (2 x ITEMS at RPM/60 a second, less one bucket).
    assert slow_stats["max_concurrent"] == SLOTS
    span = fast_stats["last_arrival_s"] - fast_stats["first_arrival_s"]
    assert span >= (2 * ITEMS - RPM / 60) / (RPM / 60) * 0.9, (span, took)
    # ... and the limit was used: at least 90% of the RPM from the first arrival to the last.
    assert (fast_stats["admitted"] - 1) / span >= 0.9 * RPM / 60, (span, took, gaps)
