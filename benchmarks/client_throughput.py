"""Client throughput and client CPU per request, against one local server, in one run.

    .venv/bin/python benchmarks/client_throughput.py [--requests 10000] [--concurrency 256]

Starts `itemeval sim-server --latency-ms 50` as a subprocess (as `python -m itemeval.cli.sim`, the
same command), so only the client's CPU is counted in this process. Then runs, one after the
other, against it:

1. a bare aiohttp loop (POST the body, read the answer): the ceiling on this machine;
2. our client (`make_provider`, OpenAI wire format, JSON encode/parse, rate limiter with a
   requests-per-minute limit, tenacity retries, result objects);
3. httpx with one AsyncClient, for reference (time-capped: it is much slower).

Prints requests/s and client CPU milliseconds per request (process CPU time / requests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BODY = {
    "model": "sim/medium",
    "messages": [
        {"role": "system", "content": "Answer with the letter of the correct option."},
        {"role": "user", "content": "Which is a prime number?\nA) 4\nB) 6\nC) 7\nD) 9"},
    ],
    "temperature": 0.0,
    "max_tokens": 16,
}


def start_server(latency_ms: float, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """`itemeval sim-server --port 0` in a subprocess; returns it and its base URL."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "itemeval.cli.sim",  # = `itemeval sim-server`
            "--port",
            "0",
            "--latency-ms",
            str(latency_ms),
            *extra,
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("listening on "):
            return proc, line.split("listening on ", 1)[1].strip()
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("sim-server did not start")


async def drive(
    call: Callable[[], Awaitable[None]], requests: int, concurrency: int, max_s: float
) -> tuple[int, float, float]:
    """Run `requests` calls with `concurrency` in flight; returns (done, wall s, cpu s)."""
    remaining = requests
    done = 0
    deadline = time.monotonic() + max_s

    async def worker() -> None:
        nonlocal remaining, done
        while remaining > 0 and time.monotonic() < deadline:
            remaining -= 1
            await call()
            done += 1

    wall0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, time.perf_counter() - wall0, time.process_time() - cpu0


async def bench_bare(url: str, n: int, concurrency: int) -> tuple[int, float, float]:
    import aiohttp

    payload = json.dumps(BODY).encode()
    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def call() -> None:
            async with session.post(
                f"{url}/v1/chat/completions", data=payload, headers=headers
            ) as response:
                await response.read()

        await drive(call, concurrency, concurrency, 30)  # warm-up: open the connections
        return await drive(call, n, concurrency, 60)


async def bench_ours(url: str, n: int, concurrency: int) -> tuple[int, float, float]:
    from itemeval.providers import EndpointSettings, ModelRequest, SamplingParams, make_provider

    settings = EndpointSettings(
        kind="openai",
        base_url=f"{url}/v1",
        requests_per_minute=10_000_000,  # the limiter is in the path, never the bottleneck
        max_concurrency=concurrency,
    )
    provider = make_provider(settings)
    request = ModelRequest(
        model=BODY["model"],
        messages=tuple(BODY["messages"]),
        params=SamplingParams(temperature=0.0, max_tokens=16),
    )
    failures = 0

    async def call() -> None:
        nonlocal failures
        result = await provider.complete(request)
        if not result.ok:
            failures += 1

    try:
        await drive(call, concurrency, concurrency, 30)
        out = await drive(call, n, concurrency, 60)
    finally:
        await provider.aclose()
    if failures:
        print(f"  (our client: {failures} failed results)")
    return out


async def bench_httpx(url: str, n: int, concurrency: int, max_s: float) -> tuple[int, float, float]:
    import httpx

    payload = json.dumps(BODY).encode()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def call() -> None:
            response = await client.post(
                f"{url}/v1/chat/completions",
                content=payload,
                headers={"Content-Type": "application/json"},
            )
            response.read()

        await drive(call, concurrency, concurrency, 30)
        return await drive(call, n, concurrency, max_s)


def server_cpu_s(url: str) -> float:
    with urllib.request.urlopen(f"{url}/_sim/stats", timeout=10) as response:
        return float(json.loads(response.read())["cpu_s"])


def measure(name: str, url: str, run: Callable[[], tuple[int, float, float]]) -> None:
    """Run one phase and print requests/s, client CPU and server CPU per request."""
    server0 = server_cpu_s(url)
    done, wall, cpu = run()
    server_ms = (server_cpu_s(url) - server0) * 1000 / done if done else float("nan")
    rate = done / wall if wall else 0.0
    cpu_ms = cpu * 1000 / done if done else float("nan")
    print(f"{name:<32} {done:>8} {rate:>8.0f} {cpu_ms:>11.3f} {server_ms:>11.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--httpx-seconds", type=float, default=15.0, help="cap for httpx")
    parser.add_argument("--skip-httpx", action="store_true")
    args = parser.parse_args()

    proc, url = start_server(args.latency_ms)
    try:
        print(
            f"server {url} answering after {args.latency_ms:g} ms; "
            f"{args.concurrency} in flight; {os.cpu_count()} CPUs"
        )
        print(f"{'client':<32} {'requests':>8} {'req/s':>8} {'client CPU':>11} {'server CPU':>11}")
        print(f"{'':<32} {'':>8} {'':>8} {'ms/req':>11} {'ms/req':>11}")
        n, c = args.requests, args.concurrency
        measure("bare aiohttp loop", url, lambda: asyncio.run(bench_bare(url, n, c)))
        measure("itemeval client (OpenAI wire)", url, lambda: asyncio.run(bench_ours(url, n, c)))
        if not args.skip_httpx:
            measure(
                "httpx AsyncClient (reference)",
                url,
                lambda: asyncio.run(bench_httpx(url, n, c, args.httpx_seconds)),
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
