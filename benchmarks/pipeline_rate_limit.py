"""Rate-limit adherence through the whole pipeline: two Ray workers share one limiter actor.

    .venv/bin/python benchmarks/pipeline_rate_limit.py [--rpm 6000] [--items 2500]

`itemeval sim-server --rpm RPM` enforces the limit itself (429 with Retry-After beyond it, as a
provider does); the study's endpoint declares the same `requests_per_minute`. `itemeval generate`
runs on a local Ray with two worker actors, each with half the endpoint's concurrency, drawing
permits in batches from the endpoint's `LimiterActor`. Prints the achieved rate over the limit
(server arrivals between the first and the last request) and the number of 429s the server sent.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import urllib.request
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from client_throughput import start_server  # noqa: E402
from generated_data import write_dataset  # noqa: E402


def stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/_sim/stats", timeout=10) as response:
        return json.loads(response.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=float, default=6000)
    parser.add_argument("--items", type=int, default=2500, help="x 2 models = requests")
    args = parser.parse_args()

    import ray

    from itemeval.config import load_study
    from itemeval.runtime import RunOptions, run_study

    server, url = start_server(50, "--rpm", str(args.rpm))
    try:
        with tempfile.TemporaryDirectory(prefix="itemeval-rate-") as tmp:
            folder = Path(tmp)
            write_dataset(folder / "sweep", args.items)
            study = {
                "study": "rate",
                "store": str(folder / "store"),
                "datasets": [{"name": "sweep", "path": str(folder / "sweep")}],
                "endpoints": {
                    "sim": {
                        "kind": "sim",
                        "base_url": f"{url}/v1",
                        "requests_per_minute": args.rpm,
                        "max_concurrency": 128,
                    }
                },
                "models": [
                    {"id": "sim/strong", "endpoint": "sim"},
                    {"id": "sim/weak", "endpoint": "sim"},
                ],
                "facets": {"scorer": ["auto"]},
                "cache": {"enabled": False},
                "runtime": {"shard_size": 128, "workers": 2},
            }
            path = folder / "study.yaml"
            path.write_text(yaml.safe_dump(study))
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            try:
                address = ray.get_runtime_context().gcs_address  # the Ray path
                outcome = run_study(
                    load_study(path),
                    RunOptions(yes=True, quiet=True, stages=("generate",), address=address),
                )
            finally:
                ray.shutdown()
        seen = stats(url)
    finally:
        server.terminate()
        server.wait(timeout=10)
    span = seen["last_arrival_s"] - seen["first_arrival_s"]
    rate = (seen["requests"] - 1) / span * 60
    result = outcome.stages["generate"]
    print(f"limit {args.rpm:,.0f}/min; {seen['requests']:,} requests arrived in {span:.1f} s")
    print(
        f"achieved {rate:,.0f}/min = {rate / args.rpm:.1%} of the limit; "
        f"server 429s: {seen['rate_limited']}; cells ok {result.counts.done:,}, "
        f"errors {result.counts.errors}"
    )


if __name__ == "__main__":
    main()
