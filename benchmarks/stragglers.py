"""Stage wall time and cost on a heavy-tailed provider, with and without hedging.

    .venv/bin/python benchmarks/stragglers.py               # ~3 minutes
    .venv/bin/python benchmarks/stragglers.py --repeats 1 --items 500

One generate condition over generated items against `itemeval sim-server --latency-distribution
lognormal --latency-ms 200 --latency-spread 1.5` (median 0.2 s; p99 about 6.6 s; the slowest of
1,000 calls typically 15 to 30 s), `max_concurrency: 64`, shards of 256 items, run
in-process (`--no-ray`), each run on a fresh store and cache, for three settings of the endpoint's
`hedge:`, and a reference without the tail:

* `no tail`: every call takes the median (sigma 0), no hedging: the floor;
* `off`: no hedging (the default);
* `default`: `enabled: true` and the defaults (after 90% of a shard's calls ended, a call out for
  3 x the median latency and at least 2 s; at most 5% hedges);
* `eager`: after 50% of a shard, at least 0.5 s, at most 10% hedges.

Each setting runs `--repeats` times with the server's seed 1, 2, ... (the same seeds for every
setting). For each run: the run's wall time (`run_study`, planning and the store included), the
requests the server received and answered (`/_sim/stats`, once nothing is in flight: a cancelled
loser is still answered, as a provider bills it), the hedges (the ledger's settled calls minus the
cells), what the run recorded (the ledger's USD) and the most the server's answers can have cost
(its token counts at the model's input and output prices). Writes
`benchmarks/results/stragglers.json` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "runtime")]

from runtime_files import sim_server, sim_stats, write_items, write_study  # noqa: E402

from itemeval.config import load_study  # noqa: E402
from itemeval.runtime._driver import RunOptions, run_study  # noqa: E402

PRICE_IN, PRICE_OUT = 3.00 / 1e6, 15.00 / 1e6  # sim/strong in the packaged price table
SETTINGS = {
    "no tail": {"enabled": False},  # reference: every call takes the median (sigma 0)
    "off": {"enabled": False},
    "default": {"enabled": True},
    "eager": {"enabled": True, "after_done": 0.5, "min_wait_s": 0.5, "max_share": 0.1},
}


def _settled(url: str) -> dict:
    deadline = time.monotonic() + 120
    stats = sim_stats(url)
    while stats["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.2)
        stats = sim_stats(url)
    return stats


def one_run(root: Path, name: str, seed: int, items: Path, count: int, args) -> dict:
    folder = root / f"{name.replace(' ', '-')}-{seed}"
    tail = ("--latency-distribution", "lognormal", "--latency-ms", str(args.median_ms))
    sigma = 0.0 if name == "no tail" else args.sigma
    with sim_server(*tail, "--latency-spread", str(sigma), "--seed", str(seed)) as url:
        path = write_study(
            folder,
            **{
                "datasets": [{"name": "sums", "path": str(items)}],
                "models": [{"id": "sim/strong", "endpoint": "sim"}],
                "endpoints.sim": {
                    "kind": "sim",
                    "base_url": url,
                    "max_concurrency": 64,
                    "hedge": SETTINGS[name],
                },
                "facets.model_config": [{"name": "short", "max_tokens": 64}],
                "facets.grader": [],
                "facets.prompt": ["builtin:direct"],
                "facets.replications": 1,
                "budget.policy": "full",
                "runtime.shard_size": 256,
                "cache.location": str(folder / "cache"),
            },
        )
        study = load_study(path)
        started = time.monotonic()
        outcome = run_study(study, RunOptions(no_ray=True, yes=True, quiet=True))
        wall = time.monotonic() - started
        stats = _settled(url)
    usage = stats["usage"]
    billed = usage["input_tokens"] * PRICE_IN + usage["output_tokens"] * PRICE_OUT
    assert outcome.ledger is not None
    row = {
        "setting": name,
        "seed": seed,
        "cells": count,
        "done": outcome.stages["generate"].counts.done,
        "errors": outcome.stages["generate"].counts.errors,
        "wall_s": round(wall, 2),
        "requests": stats["requests"],
        "answered": stats["ok"],
        "hedges": outcome.ledger.calls - count,
        "recorded_usd": round(outcome.ledger.spent, 5),
        "billed_usd_at_most": round(billed, 5),
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--median-ms", type=float, default=200.0)
    parser.add_argument("--sigma", type=float, default=1.5)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/stragglers.json")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        items = write_items(root / "sums", args.items)
        for seed in range(1, args.repeats + 1):
            for name in SETTINGS:
                runs.append(one_run(root, name, seed, items, args.items, args))
    result = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "setup": {
            "items": args.items,
            "latency": f"lognormal, median {args.median_ms:g} ms, sigma {args.sigma:g}",
            "max_concurrency": 64,
            "shard_size": 256,
        },
        "runs": runs,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        "\n| setting | runs | wall s (each) | hedges | requests | answered | recorded $ | "
        "billed $ at most |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for name in SETTINGS:
        mine = [r for r in runs if r["setting"] == name]
        walls = ", ".join(f"{r['wall_s']:.1f}" for r in mine)
        print(
            f"| {name} | {len(mine)} | {walls} | "
            f"{statistics.fmean(r['hedges'] for r in mine):.1f} | "
            f"{statistics.fmean(r['requests'] for r in mine):.0f} | "
            f"{statistics.fmean(r['answered'] for r in mine):.0f} | "
            f"{statistics.fmean(r['recorded_usd'] for r in mine):.4f} | "
            f"{statistics.fmean(r['billed_usd_at_most'] for r in mine):.4f} |"
        )


if __name__ == "__main__":
    main()
