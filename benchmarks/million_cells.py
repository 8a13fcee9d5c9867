"""A million cells through HTTP: 500,000 items x 2 models against `itemeval sim-server`.

    .venv/bin/python benchmarks/million_cells.py                     # ~10-15 minutes
    .venv/bin/python benchmarks/million_cells.py --items 50000      # a quick look

`itemeval run` (generate + the `auto` scorer) as a user runs it, a subprocess with a fresh store
and cache, against one sim-server subprocess answering after `--latency-ms` with `--in-flight`
calls in flight per model endpoint. Reports the whole command's wall time and rate, the server's
count of calls answered, and the peak RSS of the driver and of every other process the command
started (Ray's workers and daemons when they join), sampled from /proc every 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from client_throughput import start_server  # noqa: E402
from generated_data import write_dataset  # noqa: E402
from whole_command import Tree, command_env, stats, write_study  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=500_000)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--local-ray", default="auto", choices=["auto", "always", "never"])
    args = parser.parse_args()
    server, url = start_server(args.latency_ms)
    try:
        with tempfile.TemporaryDirectory(prefix="itemeval-million-") as tmp:
            folder = Path(tmp)
            write_dataset(folder / "bench", args.items, kind="unique")
            path = write_study(folder, url, args.in_flight, args.local_ray, models=2)
            stats(url, reset=True)
            env = command_env(tmp, ITEMEVAL_TIMINGS="1")
            command = [sys.executable, "-m", "itemeval", "run", str(path), "--yes", "--quiet"]
            started = time.time()
            proc = subprocess.Popen(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            tree = Tree(proc.pid, marker=tmp, every_s=0.5)
            tree.start()
            _, err = proc.communicate(timeout=4 * 3600)
            wall = time.time() - started
            tree.stop()
            if proc.returncode != 0:
                raise SystemExit(f"itemeval run failed ({proc.returncode}): {err.decode()[-3000:]}")
            answered = stats(url).get("ok", 0)
    finally:
        server.terminate()
    cells = 2 * args.items
    others = sorted(
        (
            (rss, tree.names.get(pid, "?"))
            for pid, rss in tree.peak_by_pid.items()
            if pid != proc.pid
        ),
        reverse=True,
    )
    print(
        f"{cells:,} cells ({args.items:,} items x 2 models), local_ray: {args.local_ray}, "
        f"{args.latency_ms:g} ms, {args.in_flight} in flight, {os.cpu_count()} CPUs"
    )
    print(
        f"  wall {wall:,.0f} s, {cells / wall:,.0f} samples/s; server answered {answered:,} calls"
    )
    print(
        f"  peak RSS: driver {tree.peak_driver_rss / 2**20:,.0f} MB; all processes together "
        f"{tree.peak_rss / 2**20:,.0f} MB"
    )
    for rss, name in others[:6]:
        print(f"    {name}: {rss / 2**20:,.0f} MB")
    print(err.decode()[-1500:])


if __name__ == "__main__":
    main()
