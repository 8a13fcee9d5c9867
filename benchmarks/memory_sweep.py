"""Peak memory of the driver and of each worker during a sweep of N items x M models.

    .venv/bin/python benchmarks/memory_sweep.py --items 100000 1000000
    .venv/bin/python benchmarks/memory_sweep.py --paths ray --items 1250000 --models 4  # 10M cells
    .venv/bin/python benchmarks/memory_sweep.py --paths ray --items 250000 --trace t.log  # where

For each N: writes a dataset of N items (item format, under /tmp), then runs the study as
`itemeval run` does (`run_study` in the sweep's own process, started as the command starts it
unless `--driver library`: generate with two simulated models (`--models`: up to four), then
verifiable grading, then the run's compaction of what it wrote), with
the simulator in-process (no
HTTP, no latency: the sweep is as fast as the pipeline, and memory is what is measured), along
two paths:

* `local` (the default a user gets): no Ray is started beforehand, so a local run serves its
  shards in the driver's own process (`runtime.local_ray: auto` on a 2-core machine stays there):
  the driver's peak includes the work itself;
* `ray`: a local Ray with 2 CPUs is started first and named by address, so the shards run in two
  worker actors and the driver only plans, dispatches and records.
 A sampler reads the resident set size (RSS) of the
driver process and of every `ray::WorkerActor` process from /proc every 0.5 s and keeps each
one's peak. Worker memory must not grow with N; the driver's grows only with the compact
per-cell keys it plans with (item ids and pending sets as arrow columns).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from generated_data import write_dataset

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb(pid: int) -> tuple[float, float]:
    """The process's resident set (MB), and the part of it that is its own (anonymous and
    file pages): the rest is shared memory, for a Ray process the object store's pages it
    touched (shard arguments and results), which are counted once for the machine, in Ray's
    object store, and are bounded by its size."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            fields = dict(line.split(":", 1) for line in handle if line.startswith("Rss"))
    except OSError:
        return 0.0, 0.0
    kb = {key: int(value.split()[0]) for key, value in fields.items()}
    total = kb.get("RssAnon", 0) + kb.get("RssFile", 0) + kb.get("RssShmem", 0)
    own = kb.get("RssAnon", 0) + kb.get("RssFile", 0)
    return total / 1024, own / 1024


def worker_pids(session: str) -> list[int]:
    """This sweep's worker actors: `ray::WorkerActor` processes whose parent (the raylet)
    names this sweep's Ray session (other Rays on the machine, say a test run's, are not ours)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if not handle.read().startswith(b"ray::WorkerActor"):
                        continue
                with open(f"/proc/{entry}/stat") as handle:
                    parent = handle.read().rsplit(")", 1)[1].split()[1]
                with open(f"/proc/{parent}/cmdline", "rb") as handle:
                    if session.encode() in handle.read():
                        pids.append(int(entry))
            except (OSError, IndexError):
                continue
    return pids


def compaction_pids() -> list[int]:
    """The run's compaction processes (children of this driver)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if b"itemeval.runtime._compaction_process" not in handle.read():
                        continue
                with open(f"/proc/{entry}/stat") as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                        pids.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return pids


def main_stack(depth: int = 7) -> list[str]:
    """The innermost frames of the main thread: where the driver is."""
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    if frame is None:
        return []
    frames = traceback.extract_stack(frame)[-depth:]
    return [f"{f.filename.rsplit('/itemeval/', 1)[-1]}:{f.lineno} {f.name}" for f in frames]


class Sampler(threading.Thread):
    def __init__(self, session: str, trace: Path | None = None) -> None:
        super().__init__(daemon=True)
        self.session = session
        #: `--trace`: every 5 s the driver's and workers' resident sets, and at each new peak of
        #: the driver's (+20 MB) the main thread's stack: where its memory came from.
        self.trace = trace.open("w") if trace is not None else None
        self._traced_peak = 0.0
        self._traced_at = -math.inf
        self._t0 = time.monotonic()
        self.driver_peak = self.driver_own_peak = 0.0
        self.compaction_peak = 0.0  # a compaction process's, when the run starts one
        self.worker_peaks: dict[int, float] = {}
        self.worker_own_peaks: dict[int, float] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.5):
            total, own = rss_mb(os.getpid())
            self.driver_peak = max(self.driver_peak, total)
            self.driver_own_peak = max(self.driver_own_peak, own)
            for pid in compaction_pids():
                self.compaction_peak = max(self.compaction_peak, rss_mb(pid)[0])
            for pid in worker_pids(self.session) if self.session else []:
                total, own = rss_mb(pid)
                self.worker_peaks[pid] = max(self.worker_peaks.get(pid, 0.0), total)
                self.worker_own_peaks[pid] = max(self.worker_own_peaks.get(pid, 0.0), own)
            if self.trace is not None:
                self._write_trace(total)

    def _write_trace(self, driver_mb: float) -> None:
        assert self.trace is not None
        now = time.monotonic() - self._t0
        if driver_mb > self._traced_peak + 20:
            self._traced_peak = driver_mb
            stack = "\n    ".join(main_stack())
            self.trace.write(f"peak {now:8.1f} s driver {driver_mb:.0f} MB\n    {stack}\n")
        if now - self._traced_at >= 5:
            self._traced_at = now
            workers = ", ".join(
                f"{rss_mb(pid)[0]:.0f}" for pid in worker_pids(self.session) if self.session
            )
            where = (main_stack(1) or ["?"])[0]
            self.trace.write(
                f"{now:8.1f} s driver {driver_mb:.0f} MB, workers [{workers}] MB, at {where}\n"
            )
        self.trace.flush()

    def finish(self) -> None:
        self._halt.set()
        self.join()
        if self.trace is not None:
            self.trace.close()


MODELS = ("strong", "weak", "medium", "reasoner")


def sweep(
    items: int,
    path_kind: str,
    driver: str,
    models: int = 2,
    compact: bool = True,
    trace: Path | None = None,
) -> dict[str, Any]:
    if driver == "command":  # as `cli.main.entry` starts the command: pyarrow without pandas
        from itemeval._util.arrow_start import skip_pandas_probe

        skip_pandas_probe()
    import ray

    from itemeval.config import load_study
    from itemeval.runtime import RunOptions, run_study

    with tempfile.TemporaryDirectory(prefix="itemeval-sweep-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        write_dataset(folder / "sweep", items)
        study = {
            "study": "sweep",
            "store": str(folder / "store"),
            "datasets": [{"name": "sweep", "path": str(folder / "sweep")}],
            "endpoints": {"sim": {"kind": "sim", "max_concurrency": 512}},
            "models": [{"id": f"sim/{m}", "endpoint": "sim"} for m in MODELS[:models]],
            "facets": {"scorer": ["auto"]},
            "cache": {"enabled": False},
            "runtime": {"shard_size": 512, "workers": 2, "compact": compact},
        }
        path = folder / "study.yaml"
        path.write_text(yaml.safe_dump(study))
        written = time.perf_counter() - started
        address = None
        if path_kind == "ray":
            # a Ray of its own ("local"), never one already running on the machine
            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
            address = ray.get_runtime_context().gcs_address  # the Ray path: name the cluster
        session = ""
        if ray.is_initialized():  # its name is in our raylet's command line (no public API)
            session = Path(ray._private.worker._global_node.get_session_dir_path()).name
        sampler = Sampler(session, trace)
        sampler.start()
        try:
            t0 = time.perf_counter()
            outcome = run_study(load_study(path), RunOptions(yes=True, quiet=True, address=address))
            seconds = time.perf_counter() - t0
        finally:
            sampler.finish()
            if ray.is_initialized():
                ray.shutdown()
        assert outcome.exit_code == 0, outcome.message
        generate = outcome.stages["generate"].counts.done
        grade = outcome.stages["grade"].counts.done
        from itemeval.store import StudyStore, latest_manifest

        store = StudyStore.open(str(folder / "store"))
        compaction = latest_manifest(store).compaction
        fragments = [  # what the run leaves in each partition
            len(store.fragments(table, cid))
            for table in ("solutions", "grades")
            for cid in store.condition_ids(table)
        ]
        peaks = sorted(sampler.worker_peaks.values(), reverse=True)
        own = sorted(sampler.worker_own_peaks.values(), reverse=True)
        return {
            "path": path_kind,
            "items": items,
            "models": models,
            "samples": generate,
            "grades": grade,
            "seconds": seconds,
            "dataset_write_s": written,
            "driver_peak_mb": sampler.driver_peak,
            "driver_own_peak_mb": sampler.driver_own_peak,
            "worker_peak_mb": peaks[0] if peaks else 0.0,
            "workers": len(peaks),
            "worker_peaks": ", ".join(f"{p:.0f}" for p in peaks) or "-",
            "worker_own_peaks": ", ".join(f"{p:.0f}" for p in own) or "-",
            "compaction_s": compaction.end_seconds if compaction else 0.0,
            "compaction_total_s": compaction.seconds if compaction else 0.0,
            "fragments_merged": compaction.fragments_merged if compaction else 0,
            "compaction_peak_mb": sampler.compaction_peak,
            "partitions": len(fragments),
            "fragments_max": max(fragments, default=0),
            "fragments_total": sum(fragments),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--paths", nargs="+", choices=["local", "ray"], default=["local", "ray"])
    parser.add_argument("--models", type=int, default=2, choices=range(1, len(MODELS) + 1))
    parser.add_argument(
        "--driver",
        choices=["command", "library"],
        default="command",
        help="start the driver as the `itemeval` command does (pandas kept from pyarrow), or as "
        "a library user's process does (sweeps before commit 8509785 ran this way)",
    )
    parser.add_argument(
        "--no-compact", action="store_true", help="runtime.compact: false (what a run leaves)"
    )
    parser.add_argument(
        "--trace",
        type=Path,
        help="write the driver's and workers' resident sets every 5 s, and the driver's stack "
        "at each new peak, to this file (one size and path only)",
    )
    parser.add_argument("--one", nargs=2, metavar=("PATH", "ITEMS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # one sweep, in a fresh process: a peak must not include an earlier sweep's
        result = sweep(
            int(args.one[1]),
            args.one[0],
            args.driver,
            args.models,
            not args.no_compact,
            args.trace,
        )
        print(json.dumps(result))
        return
    results = []
    for kind in args.paths:
        for n in args.items:
            done = subprocess.run(
                [
                    *(sys.executable, __file__, "--one", kind, str(n)),
                    *("--driver", args.driver, "--models", str(args.models)),
                    *(("--no-compact",) if args.no_compact else ()),
                    *(("--trace", str(args.trace)) if args.trace else ()),
                ],
                capture_output=True,
                text=True,
            )
            lines = done.stdout.strip().splitlines()
            if done.returncode or not lines:  # say why: its own output is all a sweep leaves
                sys.exit(
                    f"the {kind} sweep of {n:,} items failed (exit {done.returncode}, "
                    f"{'no result printed' if not lines else 'see its errors'}):\n"
                    f"{done.stderr[-4000:]}"
                )
            results.append(json.loads(lines[-1]))
    print("peak RSS in MB; 'own' leaves out shared pages (Ray's object store); compaction: the")
    print("seconds the run's end spent compacting (of all its compaction), fragments merged, and")
    print("its process's peak; fragments: what the run leaves, most in a partition (in all)")
    header = ("path", "items", "samples", "seconds", "driver", "own", "workers", "own")
    header += ("compaction", "its MB", "fragments")
    print("{:>6} {:>10} {:>10} {:>8} {:>7} {:>7} {:>12} {:>12} {:>20} {:>6} {:>14}".format(*header))
    for r in results:
        compacted = (
            f"{r['compaction_s']:.0f} ({r['compaction_total_s']:.0f}) s, {r['fragments_merged']:,}"
        )
        fragments = f"{r['fragments_max']:,} ({r['fragments_total']:,})"
        print(
            f"{r['path']:>6} {r['items']:>10,} {r['samples']:>10,} {r['seconds']:>8.0f} "
            f"{r['driver_peak_mb']:>7.0f} {r['driver_own_peak_mb']:>7.0f} "
            f"{r['worker_peaks']:>12} {r['worker_own_peaks']:>12} {compacted:>20} "
            f"{r['compaction_peak_mb']:>6.0f} {fragments:>14}"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
