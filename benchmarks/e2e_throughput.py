"""End-to-end generate throughput through the whole pipeline, beside the bare-loop ceiling.

    .venv/bin/python benchmarks/e2e_throughput.py [--items 5000] [--models 2] [--in-flight 256]

In one run, against one `itemeval sim-server` answering after 50 ms (a subprocess, so its CPU is
not counted):

1. a bare aiohttp loop with the same number of requests in flight: the ceiling on this machine;
2. `itemeval generate` on local Ray (2 worker actors), through everything: planning, items
   snapshot, shards, rate limiter (a limit far above the rate, so it is in the path but never
   the bottleneck), OpenAI wire client, response cache lookups and writes, parquet fragments.

Prints samples/s and client CPU ms per sample. Client CPU is the CPU time of this process and
every process it started except the server (Ray's raylet, GCS, workers and agents), from
/proc, over the generate stage only (Ray's start-up is reported separately).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from client_throughput import bench_bare, start_server  # noqa: E402
from generated_data import write_dataset  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int, exclude: set[int]) -> float:
    """utime + stime of `root` and its live descendants (not `exclude` nor theirs), seconds."""
    children: dict[int, list[int]] = {}
    stats: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        stats[pid] = (int(fields[11]) + int(fields[12])) / TICKS
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in exclude:
            continue
        total += stats.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


def write_study(folder: Path, url: str, models: int, in_flight: int, shard_size: int) -> Path:
    names = ["strong", "medium", "weak"]
    study = {
        "study": "bench",
        "store": str(folder / "store"),
        "datasets": [{"name": "bench", "path": str(folder / "bench")}],
        "endpoints": {
            "sim": {
                "kind": "sim",
                "base_url": f"{url}/v1",
                "requests_per_minute": 10_000_000,
                "max_concurrency": in_flight,
            }
        },
        "models": [
            {"id": f"sim/{names[i % 3]}", "endpoint": "sim", "name": f"m{i}"} for i in range(models)
        ],
        "sampling": {"temperature": 0.0, "max_tokens": 16},
        "facets": {"scorer": [], "grader": ["judge"], "rubric": ["builtin:correctness"]},
        "graders": {"judge": {"model": "sim/judge", "endpoint": "sim"}},
        "cache": {"location": str(folder / "cache")},
        "runtime": {"shard_size": shard_size, "workers": int(os.environ.get("BENCH_WORKERS", "2"))},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--shard-size", type=int, default=256)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()

    server, url = start_server(args.latency_ms)
    try:
        cells = args.items * args.models
        print(
            f"server {url}, {args.latency_ms:g} ms; {args.in_flight} in flight; "
            f"{os.cpu_count()} CPUs; {cells:,} samples ({args.items:,} items x {args.models})"
        )
        done, wall, cpu = asyncio.run(bench_bare(url, cells, args.in_flight))
        bare_rate = done / wall
        print(
            f"{'bare aiohttp loop':<28} {bare_rate:>8.0f} samples/s {cpu * 1000 / done:>7.3f} "
            "ms CPU/sample"
        )
        ours = run_pipeline(args, url, server.pid)
        print(
            f"{'itemeval generate (Ray)':<28} {ours['rate']:>8.0f} samples/s "
            f"{ours['cpu_ms']:>7.3f} ms CPU/sample  ({ours['rate'] / bare_rate:.0%} of the "
            f"bare loop; Ray start {ours['startup_s']:.1f} s, plan {ours['plan_s']:.1f} s)"
        )
    finally:
        server.terminate()
        server.wait(timeout=10)


def run_pipeline(args: argparse.Namespace, url: str, server_pid: int) -> dict[str, float]:
    import ray

    from itemeval.config import load_study
    from itemeval.runtime import _driver as driver

    with tempfile.TemporaryDirectory(prefix="itemeval-bench-") as tmp:
        folder = Path(tmp)
        write_dataset(folder / "bench", args.items, kind="arithmetic")
        study = load_study(write_study(folder, url, args.models, args.in_flight, args.shard_size))
        started = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        startup_s = time.perf_counter() - started
        marks: dict[str, float] = {}
        original = driver.dispatch

        def timed_dispatch(executor, shards, *rest):  # type: ignore[no-untyped-def]
            stage = "generate"  # the only stage this benchmark runs
            marks[f"{stage}_cpu0"] = tree_cpu_s(os.getpid(), {server_pid})
            marks[f"{stage}_wall0"] = time.perf_counter()
            result = original(executor, shards, *rest)
            marks[f"{stage}_wall1"] = time.perf_counter()
            marks[f"{stage}_cpu1"] = tree_cpu_s(os.getpid(), {server_pid})
            return result

        driver.dispatch = timed_dispatch  # measurement only: the stage runs unchanged
        try:
            t0 = time.perf_counter()
            # The Ray path itself (not a local run's in-process start): name the cluster.
            address = ray.get_runtime_context().gcs_address
            outcome = driver.run_study(
                study,
                driver.RunOptions(yes=True, quiet=True, stages=("generate",), address=address),
            )
        finally:
            driver.dispatch = original
            ray.shutdown()
        assert outcome.exit_code == 0, outcome.message
        cells = outcome.stages["generate"].counts.done
        wall = marks["generate_wall1"] - marks["generate_wall0"]
        cpu = marks["generate_cpu1"] - marks["generate_cpu0"]
        return {
            "rate": cells / wall,
            "cpu_ms": cpu * 1000 / cells,
            "startup_s": startup_s,
            "plan_s": marks["generate_wall0"] - t0,
        }


if __name__ == "__main__":
    main()
