"""Two local runs at once against one endpoint: the server's arrivals over its own limits.

    .venv/bin/python benchmarks/shared_limits.py                  # ~2 minutes, three variants
    .venv/bin/python benchmarks/paid_twice.py --cases shared      # the same, from paid_twice

Two `itemeval generate` commands started together on this machine, each a study of 200
generated items x 2 models declaring the whole of two endpoints' limits:

* `fast`: `itemeval sim-server --rpm 1200 --burst-s 1` answering after 50 ms (the setup in which
  two runs each holding the whole RPM were turned away 14 of 800 times); the studies declare
  `requests_per_minute: 1200`, and each could send 20 times that;
* `slow`: `itemeval sim-server --max-concurrency 8` answering after 400 ms; the studies declare
  `max_concurrency: 8`, and each has more calls waiting than that.

Variants: `shared` (as a user runs them: both hold the limits through the machine's limiter),
`separate` (each run given a limiter folder of its own, `ITEMEVAL_LIMITS_DIR`: as before the
machine's limiter, each holds the whole limit) and `ray` (as `shared`, one of the runs on a local
Ray of its own, `runtime.local_ray: always` with two workers). For each it prints, per server,
the arrivals over its limit (`over_limit` in `/_sim/stats`), the answers, the most requests in
flight, the achieved rate against the limit, and the runs' exit codes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "runtime"), str(REPO / "tests")]

from runtime_files import sim_server, sim_stats, write_items, write_study  # noqa: E402

ITEMS, RPM, SLOTS = 200, 1200, 8
FAST = ("--latency-ms", "50", "--rpm", str(RPM), "--burst-s", "1")
SLOW = ("--latency-ms", "400", "--max-concurrency", str(SLOTS))
VARIANTS = ("shared", "separate", "ray")


def _study(folder: Path, items: Path, fast: str, slow: str, **overrides: object) -> Path:
    retry = {"backoff_initial_s": 0.2, "backoff_max_s": 2.0}
    return write_study(
        folder,
        study=folder.name,
        datasets=[{"name": "sums", "path": str(items)}],
        endpoints={
            "fast": {"kind": "sim", "base_url": fast, "requests_per_minute": RPM, **retry},
            "slow": {"kind": "sim", "base_url": slow, "max_concurrency": SLOTS, **retry},
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
            "cache.location": str(folder / "cache"),
            **overrides,
        },
    )


def run_variant(root: Path, variant: str) -> dict:
    """Two runs at once; the servers' counts."""
    folder = root / variant
    items = root / "sums"
    if not items.exists():
        write_items(items, ITEMS)
    with sim_server(*FAST) as fast, sim_server(*SLOW) as slow:
        ray = {"runtime.local_ray": "always", "runtime.workers": 2}
        paths = [
            _study(folder / "one", items, fast, slow),
            _study(folder / "two", items, fast, slow, **(ray if variant == "ray" else {})),
        ]
        started = time.monotonic()
        runs = []
        for number, path in enumerate(paths):
            env = {**os.environ}
            env.pop("RAY_ADDRESS", None)
            if variant == "separate":
                env["ITEMEVAL_LIMITS_DIR"] = str(folder / f"limits-{number}")
            command = [sys.executable, "-m", "itemeval", "generate", str(path), "--yes", "--quiet"]
            runs.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL))
        codes = [run.wait(timeout=900) for run in runs]
        took = time.monotonic() - started
        fast_stats, slow_stats = sim_stats(fast), sim_stats(slow)
    span = (fast_stats["last_arrival_s"] or 0) - (fast_stats["first_arrival_s"] or 0)
    rate = 60 * fast_stats["admitted"] / span if span > 0 else 0.0
    print(
        f"{variant:<9} fast (--rpm {RPM}): over the limit {fast_stats['over_limit']:>3} of "
        f"{fast_stats['requests']:>4} arrivals, {fast_stats['ok']:>4} answers, "
        f"{rate:,.0f} a minute admitted | slow (--max-concurrency {SLOTS}): over the limit "
        f"{slow_stats['over_limit']:>4} of {slow_stats['requests']:>4} arrivals, "
        f"{slow_stats['ok']:>4} answers, most in flight {slow_stats['max_concurrent']:>2} | "
        f"{took:.0f} s, exits {codes}",
        flush=True,
    )
    return {
        "case": f"shared/{variant}",
        "fast_over": fast_stats["over_limit"],
        "slow_over": slow_stats["over_limit"],
        "codes": codes,
    }


def case_shared(root: Path, variants: tuple[str, ...] = VARIANTS) -> list[dict]:
    """Every variant, one after the other (the `shared` case of paid_twice.py)."""
    print(
        f"two local runs at once, {ITEMS} items x 2 models each; fast: --rpm {RPM} --burst-s 1, "
        f"50 ms; slow: --max-concurrency {SLOTS}, 400 ms",
        flush=True,
    )
    return [run_variant(root, variant) for variant in variants]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="itemeval-shared-limits-") as tmp:
        case_shared(Path(tmp), tuple(args.variants))
    return 0


if __name__ == "__main__":
    sys.exit(main())
