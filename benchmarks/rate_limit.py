"""Rate-limit adherence: our client against `itemeval sim-server` enforcing the same limit.

    .venv/bin/python benchmarks/rate_limit.py [--rpm 6000] [--seconds 30] [--latency-ms 50]

The server enforces `--rpm` itself (a token bucket holding one second's worth, 429s with
Retry-After, as providers do); the client is configured with the same requests-per-minute limit
and keeps `--concurrency` requests in flight for `--seconds`. Prints the achieved rate over the
configured limit (as the server counted arrivals) and how many 429s the server had to send.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from client_throughput import BODY, start_server


def server_stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/_sim/stats", timeout=10) as response:
        return json.loads(response.read())


async def run(url: str, rpm: int, seconds: float, concurrency: int) -> tuple[int, int, float]:
    from itemeval.providers import EndpointSettings, ModelRequest, SamplingParams, make_provider

    provider = make_provider(
        EndpointSettings(
            kind="sim",
            base_url=f"{url}/v1",
            requests_per_minute=rpm,
            max_concurrency=concurrency,
        )
    )
    request = ModelRequest(
        BODY["model"], tuple(BODY["messages"]), SamplingParams(temperature=0.0, max_tokens=16)
    )
    ok = failed = 0
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal ok, failed
        while time.monotonic() < deadline:
            result = await provider.complete(request)
            if result.ok:
                ok += 1
            else:
                failed += 1

    start = time.monotonic()
    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        await provider.aclose()
    return ok, failed, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=int, default=6000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()

    proc, url = start_server(args.latency_ms, "--rpm", str(args.rpm))
    try:
        ok, failed, wall = asyncio.run(run(url, args.rpm, args.seconds, args.concurrency))
        stats = server_stats(url)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    span = (stats["last_arrival_s"] or 0) - (stats["first_arrival_s"] or 0)
    arrivals = stats["requests"]
    achieved = (arrivals - 1) / span * 60 if span > 0 else 0.0
    print(f"limit {args.rpm} requests/min, {args.concurrency} in flight, {wall:.1f} s")
    print(f"results: {ok} ok, {failed} failed")
    print(f"server: {arrivals} arrivals, {stats['ok']} answered, {stats['rate_limited']} 429s")
    print(f"achieved {achieved:.0f} requests/min = {achieved / args.rpm:.1%} of the limit")


if __name__ == "__main__":
    main()
