"""Run every benchmark in turn and print their figures (what `make bench` does; it takes hours:
each benchmark's own time is in its section of `docs/performance.md`).

Each benchmark is a script of its own that can run alone; see `docs/performance.md` for what
each measures and the figures recorded on this machine kind.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

BENCHMARKS = [
    ("the whole command vs the bare loop, 2,000 and 20,000 items", ["whole_command.py"]),
    ("client CPU per request vs bare aiohttp and httpx", ["client_throughput.py"]),
    ("parquet encodings of a run's fragments: dictionary pages vs plain", ["fragment_encoding.py"]),
    ("rate-limit adherence, one client, 6,000/min", ["rate_limit.py", "--rpm", "6000"]),
    ("dispatch phase on Ray vs the bare loop", ["e2e_throughput.py", "--items", "15000"]),
    ("rate-limit adherence through the pipeline, 6,000/min", ["pipeline_rate_limit.py"]),
    (
        "pending sets and dedup reads, 1M and 10M rows",
        ["pending_set.py", "--sizes", "1000000", "10000000", "--compact"],
    ),
    ("verifiable grading throughput", ["grading_throughput.py"]),
    ("export throughput", ["export_throughput.py"]),
    ("estimate over real GSM8K + MMLU items", ["estimate_real.py"]),
    (
        "estimate over real items, calibrating from 36,000 cached answers",
        ["estimate_real.py", "--cached-epochs", "3"],
    ),
    ("estimate accuracy before and after a 5% pilot", ["estimate_accuracy.py"]),
    ("peak memory of driver and workers, 100k and 1M items x 2 models", ["memory_sweep.py"]),
    ("planning's memory by phase, 100k and 1M items x 2 models", ["planning_memory.py"]),
    ("a heavy-tailed provider, with and without hedging", ["stragglers.py"]),
    ("judge calibration: interval coverage over 500 simulated studies", ["judge_calibration.py"]),
    ("a 3-judge panel over 5,000 stored answers, counted at the server", ["panel_cost.py"]),
    ("a million cells through HTTP", ["million_cells.py"]),
    (
        "calls paid twice under faults",
        ["paid_twice.py", "--cases", "kill", "workers", "writes", "cap"],
    ),
    (
        "the budget cap at its edges",
        ["paid_twice.py", "--cases", "cap", "unpriced", "longctx", "pilot", "deadline"],
    ),
    ("two runs holding one endpoint's limits", ["shared_limits.py"]),
    ("identical calls within a run, cache on S3", ["identical_calls.py", "--runs", "2"]),
    ("importing results", ["import_throughput.py", "--records", "250000"]),
    ("the real tools' logs imported, scores against the tools' own", ["import_real.py"]),
    ("the viewer on a big store", ["viewer.py", "--compact"]),
    ("statistics: speed over 1,000,000 grades", ["stat_speed.py"]),
    (
        "statistics: calibration over 1,000 simulated studies",
        ["stat_calibration.py", "--studies", "1000"],
    ),
    ("item response theory: fitting 50 x 20,000", ["irt_fit.py"]),
    (
        "adaptive runs over 50 simulated banks",
        ["adaptive.py", "--seeds", "50", "--thin", "--no-server"],
    ),
    ("adaptive runs counted at the sim-server", ["adaptive.py"]),
    (
        "the demo's weakest model adaptive, at the sim-server",
        ["adaptive_study.py", "--seeds", "20"],
    ),
]


def main() -> int:
    failed = []
    for title, command in BENCHMARKS:
        print(f"\n=== {title}: {' '.join(command)}", flush=True)
        code = subprocess.call([sys.executable, str(HERE / command[0]), *command[1:]])
        if code:
            failed.append(title)
    if failed:
        print("\nfailed: " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
