"""Calls paid twice under faults, and spend against the cap, counted at the provider.

    .venv/bin/python benchmarks/paid_twice.py                 # ~4 minutes, all four cases
    .venv/bin/python benchmarks/paid_twice.py --cases kill    # one case

A study of 2 models x 2,000 generated items (4,000 generate cells) against `itemeval sim-server`
answering after 400 ms with 3% 429s and 2% 500s, `max_concurrency: 64` (the setup of issue 12),
then in turn, each on a fresh store and cache:

* `kill`: `itemeval generate` SIGKILLed twice mid-run (after 1,000 more answers each time), then
  the same command run to the end;
* `workers`: one Ray worker process SIGKILLed every 6 s during one run, then a re-run if needed;
* `writes`: the store on S3 (moto) behind a proxy that fails 20% of solution-fragment PUTs
  (whatever botocore retries: each failing object fails every attempt);
* `cap`: a model 60x more verbose than the estimate, chain of thought, 200 items, and
  `max_usd` = 1.2 x the estimate;
* `shared`: two local runs at once, each declaring the whole of two endpoints' limits, against
  sim-servers that count every arrival over their own `--rpm` and `--max-concurrency`
  (`benchmarks/shared_limits.py`: its own setup, and the server's over-limit arrivals printed).

For each it prints cells, physical rows (read without deduplication), the provider's successful
answers (`/_sim/stats`), calls paid twice (answers minus the distinct calls the stored rows
needed), the bound of the durability contract, and the spend against the cap.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "runtime"), str(REPO / "tests" / "chaos"), str(REPO / "tests")]

from runtime_files import (  # noqa: E402
    distinct_calls,
    physical_rows,
    sim_server,
    sim_stats,
    write_items,
    write_study,
)

ITEMS, LATENCY_S, CONCURRENCY = 2000, 0.4, 64
FAULTS = [
    "--latency-ms",
    "400",
    "--fault-429",
    "0.03",
    "--fault-500",
    "0.02",
    "--retry-after",
    "0.5",
]
RATE = CONCURRENCY / LATENCY_S  # answers per second at full concurrency
PER_KILL = CONCURRENCY + RATE * 1.0  # the contract: calls in flight plus ~1 s of answers


def _study(folder: Path, url: str, **overrides: object) -> Path:
    items = folder.parent / "sums"
    if not items.exists():
        write_items(items, ITEMS)
    settings = {
        "datasets": [{"name": "sums", "path": str(items)}],
        "endpoints.sim.base_url": url,
        "endpoints.sim.max_concurrency": CONCURRENCY,
        "endpoints.sim.backoff_initial_s": 0.2,
        "facets.grader": [],
        "facets.prompt": ["builtin:direct"],
        "facets.replications": 1,
        "budget.policy": "full",
        "runtime.shard_size": 256,
        "cache.location": str(folder / "cache"),
        **overrides,
    }
    return write_study(folder, **settings)


def _report(case: str, store: str, answered: int, bound: float, extra: str = "") -> dict:
    rows = physical_rows(store)
    needed = distinct_calls(store)
    twice = answered - needed
    line = (
        f"{case:<8} cells {2 * ITEMS:>5,}  physical rows {rows:>5,}  provider answers "
        f"{answered:>5,}  paid twice {twice:>4,}  bound {bound:>5,.0f}  "
        f"{'within' if twice <= bound else 'OVER'}{extra}"
    )
    print(line, flush=True)
    return {"case": case, "rows": rows, "answered": answered, "twice": twice, "bound": bound}


def case_kill(root: Path) -> dict:
    """The driver SIGKILLed twice, then the same command to the end."""
    folder = root / "kill"
    with sim_server(*FAULTS) as url:
        path = _study(folder, url)
        env = {**os.environ}
        env.pop("RAY_ADDRESS", None)
        command = [sys.executable, "-m", "itemeval", "generate", str(path), "--yes", "--quiet"]
        for _ in range(2):
            proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
            target = sim_stats(url)["ok"] + 1000
            deadline = time.monotonic() + 300
            while sim_stats(url)["ok"] < target and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait(60)
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        answered = sim_stats(url)["ok"]
    if done.returncode not in (0, 1):
        print(done.stderr[-2000:])
    store = str(folder / "store")
    return _report("kill x2", store, answered, 2 * PER_KILL, f"  (re-run exit {done.returncode})")


def case_workers(root: Path) -> dict:
    """One worker process SIGKILLed every 6 s during a run on local Ray (2 workers)."""
    import ray

    from itemeval.config import load_study
    from itemeval.runtime.driver import RunOptions, _with_shares, run_study
    from itemeval.runtime.ray_executor import RayExecutor

    folder = root / "workers"
    kills = 0
    stop = threading.Event()

    def factory(context):
        executor = RayExecutor(
            _with_shares(context, 2), workers=2, per_worker=2, shared_limiters=False
        )

        def kill_loop() -> None:
            nonlocal kills
            rng = random.Random(5)
            while not stop.wait(6.0):
                try:
                    os.kill(rng.choice(executor.worker_pids()), signal.SIGKILL)
                    kills += 1
                except Exception:
                    continue

        threading.Thread(target=kill_loop, daemon=True).start()
        return executor

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        with sim_server(*FAULTS) as url:
            study = load_study(_study(folder, url))
            options = RunOptions(yes=True, quiet=True, stages=("generate",))
            first = run_study(study, options, executor_factory=factory)
            stop.set()
            if first.status != "completed" or first.exit_code:
                run_study(study, options)
            answered = sim_stats(url)["ok"]
    finally:
        ray.shutdown()
    per_worker = CONCURRENCY / 2 + RATE / 2 * 1.0
    return _report(
        "workers",
        str(folder / "store"),
        answered,
        kills * per_worker,
        f"  ({kills} kills; first run {first.status}, "
        f"{first.stages['generate'].redispatched} shards dispatched again)",
    )


def case_writes(root: Path) -> dict:
    """20% of solution-fragment writes fail on S3, whatever botocore retries."""
    from conftest import free_port, wait_for_port
    from s3_fault_proxy import s3_fault_proxy

    from itemeval.config import load_study
    from itemeval.runtime.driver import RunOptions, run_study

    folder = root / "writes"
    port = free_port()
    moto = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    upstream = f"http://127.0.0.1:{port}"
    try:
        wait_for_port(port, proc=moto)
        import s3fs

        creds = {"key": "testing", "secret": "testing"}
        s3fs.S3FileSystem(**creds, client_kwargs={"endpoint_url": upstream}).mkdir("bench")
        with (
            sim_server(*FAULTS) as url,
            s3_fault_proxy(upstream, fail_object_rate=0.2, only_paths="/solutions/") as proxy,
        ):
            study = load_study(
                _study(
                    folder,
                    url,
                    store="s3://bench/studies/writes",
                    storage_options={
                        **creds,
                        "client_kwargs": {"endpoint_url": proxy["url"], "region_name": "us-east-1"},
                    },
                )
            )
            options = RunOptions(yes=True, quiet=True, stages=("generate",))
            outcome = run_study(study, options)
            first = outcome.status
            for _ in range(3):  # a shard can fail 4 times in a row: the same command finishes
                if outcome.status == "completed":
                    break
                outcome = run_study(study, options)
            answered = sim_stats(url)["ok"]
            failed = proxy["failed"]
        os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
        os.environ["AWS_ENDPOINT_URL"] = upstream
        return _report(
            "writes",
            "s3://bench/studies/writes",
            answered,
            0,
            f"  ({failed} PUTs failed; {outcome.stages['generate'].redispatched} shards "
            f"dispatched again; first run {first}, last {outcome.status})",
        )
    finally:
        moto.terminate()


def case_cap(root: Path) -> dict:
    """A verbose model under max_usd = 1.2 x the estimate."""
    import pyarrow.compute as pc

    from itemeval.config import load_study
    from itemeval.planning import make_plan
    from itemeval.runtime.driver import RunOptions, run_study
    from itemeval.store import StudyStore

    folder = root / "cap"
    with sim_server("--latency-ms", "400", "--models", str(_verbose_models(root))) as url:
        overrides = {
            "models": [{"id": "sim/verbose", "endpoint": "sim"}],
            "facets.prompt": ["builtin:cot"],
            "budget.policy": "dev",
            "budget.dev_items": 200,
        }
        study = load_study(_study(folder, url, **overrides))
        estimate = sum(line.usd for line in make_plan(study).estimate.lines)
        cap = 1.2 * estimate
        study = load_study(_study(folder, url, **overrides, **{"budget.max_usd": cap}))
        outcome = run_study(study, RunOptions(no_ray=True, yes=True, quiet=True))
        answered = sim_stats(url)["ok"]
    rows = StudyStore.open(study.store_url).read("solutions", columns=["usd"], dedup=False)
    stored = pc.sum(rows.column("usd")).as_py() or 0.0
    line = (
        f"cap      estimate ${estimate:.4f}  max_usd ${cap:.4f}  spent ${outcome.spent_usd:.4f} "
        f"({outcome.spent_usd / cap:.0%} of the cap)  stored usd ${stored:.4f}  rows "
        f"{rows.num_rows}/200  provider answers {answered}  exit {int(outcome.exit_code)} "
        f"({outcome.status})  {'within' if outcome.spent_usd <= cap else 'OVER'}"
    )
    print(line, flush=True)
    return {"case": "cap", "spent": outcome.spent_usd, "cap": cap, "stored": stored}


def _verbose_models(root: Path) -> Path:
    path = root / "models.yaml"
    path.write_text("verbose: {ability: 0.7, verbosity: 60}\n")
    return path


def case_shared_limits(root: Path) -> list[dict]:
    """Two local runs at once sharing one endpoint's limits (benchmarks/shared_limits.py)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from shared_limits import case_shared

    return case_shared(root / "shared")


CASES = {"kill": case_kill, "workers": case_workers, "writes": case_writes, "cap": case_cap}
CASES["shared"] = case_shared_limits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    args = parser.parse_args()
    print(
        f"{2 * ITEMS:,} generate cells; sim-server 400 ms, 3% 429, 2% 500; max_concurrency "
        f"{CONCURRENCY}; bound per driver kill {PER_KILL:.0f} (in flight + 1 s of answers)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="itemeval-paid-twice-") as tmp:
        for name in args.cases:
            CASES[name](Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
