"""Two runs at once on one machine hold one endpoint's limits together (the machine's limiter).

Two `itemeval generate` commands, started together as a user starts them, each declaring the
whole of two endpoints' limits: `fast` (a sim-server enforcing `--rpm`) and `slow` (a sim-server
enforcing `--max-concurrency`, its answers slower). Each run alone would use all of either limit,
so together they would exceed both if each held its own: the demand is over the RPM (each run
could send faster than the limit) and over the slots (each run has more calls waiting than
slots). Physical truth is the servers' own count of arrivals over their limits: 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from runtime_files import physical_rows, sim_server, sim_stats, write_items, write_study

from itemeval.config import load_study

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


def test_two_local_runs_hold_one_endpoints_limits_together(tmp_path):
    items = write_items(tmp_path / "items" / "sums", ITEMS)
    # The server holds two seconds of its rate: a client held to the limit never exceeds it
    # (its own bucket holds one second, and a permit lapses one second after its grant), while
    # two clients that each take the whole limit empty it within about two seconds of their
    # overlap (each run's share of the fast endpoint takes about 7 s alone).
    fast_server = sim_server("--latency-ms", "20", "--rpm", str(RPM), "--burst-s", "2")
    slow_server = sim_server("--latency-ms", "50", "--max-concurrency", str(SLOTS))
    with fast_server as fast, slow_server as slow:
        paths = [_study(tmp_path / name, items, fast, slow) for name in ("one", "two")]
        env = {**os.environ, "ITEMEVAL_CACHE_DIR": str(tmp_path / "cache")}
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
