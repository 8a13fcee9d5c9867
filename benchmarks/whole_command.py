"""The whole command, as a user times it: from pressing Enter to getting the prompt back.

    .venv/bin/python benchmarks/whole_command.py                    # N = 2,000 and 20,000
    .venv/bin/python benchmarks/whole_command.py --items 20000 --modes ray

In one run, against one `itemeval sim-server` answering after 50 ms (a subprocess):

1. a bare aiohttp loop, 256 requests in flight: the ceiling on this machine;
2. `itemeval run` (generate + the `auto` scorer) as a subprocess, fresh store and cache, one
   model, 256 in flight, in three modes: `default` (what a user gets: `runtime.local_ray: auto`,
   which starts in the command's process and brings Ray in only when it helps), `ray`
   (`runtime.local_ray: always`: local Ray's workers join as soon as a shard waits for a place;
   at 2,000 items, four shards of 512, none waits and Ray does not start) and `no-ray`
   (`--no-ray`).

For each: wall time and samples/s of the whole command; time to first request (the server's
first arrival, from its own clock, minus the moment the command started); the exit lag (from the
newest file the run wrote in the store to the command's exit); client CPU per sample, measured
two ways: the CPU of every process the command started (sampled from /proc every 50 ms, Ray's
daemons included, which are not children of the command once it exits) and the machine's busy
CPU minus the server's; and the peak RSS of the driver and of all its processes together. The
ratio to the bare loop is printed beside each, measured in the same run, and beside each the
machine's steal: the share of its CPUs' time the hypervisor gave to others meanwhile (a run on
a shared VM that reads slow with steal beside it was not given the CPUs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from client_throughput import bench_bare, start_server  # noqa: E402
from generated_data import write_dataset  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def machine_cpu_s() -> tuple[float, float]:
    """The whole machine's CPU seconds since boot, from one reading of /proc/stat: (busy,
    stolen). Busy is user, nice, system, irq and softirq (not idle, not waiting on I/O, not
    `steal`, the time the hypervisor ran others on this VM's CPUs, which ran no code of ours).
    A run that reads slower than its neighbours with steal beside it was not given the CPUs."""
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    idle, steal = fields[3] + fields[4], fields[7]
    return (sum(fields[:8]) - idle - steal) / TICKS, steal / TICKS


def steal_share(steal_s: float, wall_s: float) -> float:
    """Steal as a share of the CPU time the machine's CPUs had over `wall_s`."""
    return steal_s / (wall_s * (os.cpu_count() or 1)) if wall_s > 0 else 0.0


def process_cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass
class Tree:
    """What the processes of one command did: CPU (the last reading of every pid seen) and
    peak RSS, sampled every `every_s` from /proc. A process counts when it descends from the
    command, or when its command line names this run's temporary directory (Ray's daemons
    name their session directory, which the command's environment points there)."""

    root: int
    marker: str
    every_s: float = 0.05
    #: pids that ran before the command started: never the command's, so never read. Reading
    #: every process of the machine took 3.5 ms a sample (123 processes), 7% of a CPU beside the
    #: command; a pid freed and handed to one of the command's processes within a run would be
    #: missed (pids are handed out in increasing order up to `pid_max` before they wrap).
    foreign: frozenset[int] = frozenset()
    cpu: dict[int, float] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    peak_rss: int = 0
    peak_driver_rss: int = 0
    peak_by_pid: dict[int, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._loop, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self._sample()

    def _sample(self) -> None:
        parents: dict[int, int] = {}
        readings: dict[int, tuple[float, int, str]] = {}
        marked: set[int] = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            if pid in self.foreign:
                continue
            try:
                with open(f"/proc/{pid}/stat") as handle:
                    raw = handle.read()
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            fields = raw.rsplit(")", 1)[1].split()
            parents[pid] = int(fields[1])
            cpu = (int(fields[11]) + int(fields[12])) / TICKS
            name = cmdline.split()[0].rsplit("/", 1)[-1] if cmdline.strip() else "?"
            if name.startswith("python") and " -m " in cmdline:
                name = "python -m " + cmdline.split(" -m ", 1)[1].split()[0]
            elif name.startswith("python"):
                name = "python " + (cmdline.split()[1:2] or ["?"])[0].rsplit("/", 1)[-1]
            readings[pid] = (cpu, int(fields[21]) * PAGE, name)
            if self.marker in cmdline:
                marked.add(pid)
        # The command, Ray's daemons of this run, everything seen before, and their children.
        mine = {self.root} | marked | (set(self.names) & set(readings))
        grew = True
        while grew:
            before = len(mine)
            mine |= {pid for pid, parent in parents.items() if parent in mine}
            grew = len(mine) > before
        total_rss = 0
        for pid in mine:
            if pid not in readings:
                continue
            cpu, rss, name = readings[pid]
            self.cpu[pid] = max(self.cpu.get(pid, 0.0), cpu)
            if name != "?" or pid not in self.names:  # an exited process reads as "?"
                self.names[pid] = name  # the latest (Ray's workers rename themselves)
            total_rss += rss
            self.peak_by_pid[pid] = max(self.peak_by_pid.get(pid, 0), rss)
            if pid == self.root:
                self.peak_driver_rss = max(self.peak_driver_rss, rss)
        self.peak_rss = max(self.peak_rss, total_rss)

    def by_name(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, cpu in self.cpu.items():
            name = self.names.get(pid, "?")
            out[name] = out.get(name, 0.0) + cpu
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def write_study(
    folder: Path, url: str, in_flight: int, local_ray: str = "auto", models: int = 1
) -> Path:
    """The benchmark's study: `models` simulated models (strong, then weak) on one endpoint."""
    study = {
        "study": "whole",
        "store": str(folder / "store"),
        "datasets": [{"name": "bench", "path": str(folder / "bench")}],
        "endpoints": {
            "sim": {
                "kind": "sim",
                "base_url": f"{url}/v1",
                "max_concurrency": in_flight,
            }
        },
        "models": [{"id": f"sim/{m}", "endpoint": "sim"} for m in ("strong", "weak")[:models]],
        "sampling": {"temperature": 0.0, "max_tokens": 16},
        "facets": {"scorer": ["auto"]},
        "cache": {"location": str(folder / "cache")},
        "budget": {"policy": "full"},
        "runtime": {"local_ray": local_ray},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def stats(url: str, reset: bool = False) -> dict:
    if reset:
        request = urllib.request.Request(f"{url}/_sim/reset", method="POST")
        urllib.request.urlopen(request, timeout=10).read()
        return {}
    with urllib.request.urlopen(f"{url}/_sim/stats?arrivals=1", timeout=30) as response:
        return json.loads(response.read())


def newest_write(root: Path) -> float:
    newest = 0.0
    for folder in ("solutions", "grades"):
        for path in (root / folder).rglob("*.parquet"):
            newest = max(newest, path.stat().st_mtime)
    return newest


def command_env(tmp: str, **extra: str) -> dict[str, str]:
    """The command's environment, as a user's shell gives it: its own Ray session directory
    under `tmp`, no Ray address, bytecode cached after the first start and output buffered
    (this machine's environment turns both off; that cost 0.3-0.8 s of imports per start)."""
    env = {**os.environ, "RAY_TMPDIR": tmp, **extra}
    for name in ("RAY_ADDRESS", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"):
        env.pop(name, None)
    return env


def run_command(url: str, server_pid: int, items: int, mode: str, in_flight: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="itemeval-whole-") as tmp:
        folder = Path(tmp)
        write_dataset(folder / "bench", items, kind="unique")  # every item is a call
        path = write_study(folder, url, in_flight, "always" if mode == "ray" else "auto")
        stats(url, reset=True)
        env = command_env(tmp)
        command = [sys.executable, "-m", "itemeval", "run", str(path), "--yes", "--quiet"]
        if mode == "no-ray":
            command.append("--no-ray")
        before = frozenset(int(entry) for entry in os.listdir("/proc") if entry.isdigit())
        (busy0, steal0), server0 = machine_cpu_s(), process_cpu_s(server_pid)
        started = time.time()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        tree = Tree(proc.pid, marker=tmp, foreign=before)
        tree.start()
        _, err = proc.communicate(timeout=3600)
        ended = time.time()
        tree.stop()
        (busy1, steal1), server1 = machine_cpu_s(), process_cpu_s(server_pid)
        busy = busy1 - busy0 - (server1 - server0)
        steal = steal1 - steal0
        if proc.returncode != 0:
            raise SystemExit(f"itemeval run failed ({proc.returncode}): {err.decode()[-2000:]}")
        seen = stats(url)
        first = seen.get("first_arrival_epoch") or started
        return {
            "wall_s": ended - started,
            "rate": items / (ended - started),
            "first_request_s": first - started,
            "exit_lag_s": ended - newest_write(folder / "store"),
            "cpu_ms_processes": sum(tree.cpu.values()) * 1000 / items,
            "cpu_ms_machine": busy * 1000 / items,
            "driver_peak_mb": tree.peak_driver_rss / 2**20,
            "all_peak_mb": tree.peak_rss / 2**20,
            "by_process": tree.by_name(),
            "requests": seen.get("ok", 0),
            "steal": steal_share(steal, ended - started),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["default", "ray", "no-ray"],
        choices=["default", "ray", "no-ray"],
    )
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--breakdown", action="store_true", help="CPU by process name")
    args = parser.parse_args()
    server, url = start_server(args.latency_ms)
    try:
        print(
            f"server {url} ({args.latency_ms:g} ms), {args.in_flight} in flight, "
            f"{os.cpu_count()} CPUs"
        )
        for items in args.items:
            _, steal0 = machine_cpu_s()
            done, wall, cpu = asyncio.run(bench_bare(url, items, args.in_flight))
            steal = steal_share(machine_cpu_s()[1] - steal0, wall)
            bare = done / wall
            print(
                f"\nN = {items:,}: bare aiohttp loop {bare:,.0f} samples/s ({wall:.1f} s), "
                f"{cpu * 1000 / done:.2f} ms CPU/sample; steal {steal:.1%}"
            )
            for mode in args.modes:
                r = run_command(url, server.pid, items, mode, args.in_flight)
                print(
                    f"  itemeval run ({mode:<7}) {r['rate']:>7,.0f} samples/s "
                    f"({r['wall_s']:5.1f} s, {r['rate'] / bare:.2f} of the bare loop); first "
                    f"request {r['first_request_s']:.2f} s; "
                    f"exit {r['exit_lag_s']:.2f} s after the last write; CPU/sample "
                    f"{r['cpu_ms_processes']:.2f} ms (processes) / {r['cpu_ms_machine']:.2f} ms "
                    f"(machine - server); peak RSS driver {r['driver_peak_mb']:.0f} MB, all "
                    f"{r['all_peak_mb']:.0f} MB; steal {r['steal']:.1%}"
                )
                if args.breakdown:
                    top = list(r["by_process"].items())[:8]
                    print("    CPU s by process: " + ", ".join(f"{n} {s:.1f}" for n, s in top))
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
