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
* the cap at its edges, each printing the ledger's dollars, the stored `usd` and the server's own
  usage priced independently against `max_usd`:
  `unpriced` (a model id no price table knows: refused; then with a declared price),
  `longctx` (a model dearer past a long-context threshold, verbose beyond its estimate),
  `pilot` (`--pilot 0.5` under 0.75 x what the whole study costs),
  `deadline` (every attempt abandoned on `deadline_s` and retried; the server bills each).
* `shared`: two local runs at once, each declaring the whole of two endpoints' limits, against
  sim-servers that count every arrival over their own `--rpm` and `--max-concurrency`
  (`benchmarks/shared_limits.py`: its own setup, and the server's over-limit arrivals printed).

    .venv/bin/python benchmarks/paid_twice.py --cases unpriced longctx pilot deadline   # ~1 min

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
from dataclasses import replace
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
    from itemeval.runtime import RayExecutor, RunOptions, run_study, with_shares

    folder = root / "workers"
    kills = 0
    stop = threading.Event()

    def factory(context):
        executor = RayExecutor(
            with_shares(context, 2), workers=2, per_worker=2, shared_limiters=False
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
    from itemeval.runtime import RunOptions, run_study

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
        os.environ.setdefault("PAID_TWICE_S3_KEY", "testing")  # a study names the variables
        os.environ.setdefault("PAID_TWICE_S3_SECRET", "testing")
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
                        "key_env": "PAID_TWICE_S3_KEY",
                        "secret_env": "PAID_TWICE_S3_SECRET",
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
    from itemeval.runtime import RunOptions, run_study
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
        server = _server_usd(url, "sim/verbose")
    rows = StudyStore.open(study.store_url).read("solutions", columns=["usd"], dedup=False)
    stored = pc.sum(rows.column("usd")).as_py() or 0.0
    line = (
        f"cap      estimate ${estimate:.4f}  max_usd ${cap:.4f}  spent ${outcome.spent_usd:.4f} "
        f"({outcome.spent_usd / cap:.0%} of the cap)  stored usd ${stored:.4f}  rows "
        f"{rows.num_rows}/200  provider answers {answered}  exit {int(outcome.exit_code)} "
        f"({outcome.status})  server usage priced ${server:.4f}  "
        f"{'within' if max(outcome.spent_usd, server) <= cap else 'OVER'}"
    )
    print(line, flush=True)
    return {"case": "cap", "spent": outcome.spent_usd, "cap": cap, "stored": stored}


def _verbose_models(root: Path) -> Path:
    path = root / "models.yaml"
    path.write_text(
        "verbose: {ability: 0.7, verbosity: 60}\n"
        "long: {ability: 0.7, verbosity: 60}\n"
        "acme-ft: {ability: 0.6, verbosity: 60}\n"
    )
    return path


def case_shared_limits(root: Path) -> list[dict]:
    """Two local runs at once sharing one endpoint's limits (benchmarks/shared_limits.py)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from shared_limits import case_shared

    return case_shared(root / "shared")


# ---------------------------------------------------------------- the cap at its edges


def _server_usd(url: str, model: str, pricing_file: Path | None = None) -> float:
    """What the sim-server answered, priced independently of the run: its own token counts
    (answers to attempts the client abandoned included) at `model`'s price. The server counts
    totals, not calls: a long-context tier applies to the total when every call passed it."""
    from itemeval.providers.money import Pricing
    from itemeval.providers.types import Usage

    deadline = time.monotonic() + 10
    while sim_stats(url)["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.05)  # answers to abandoned attempts are still being billed
    usage = sim_stats(url)["usage"]
    price = Pricing.load(pricing_file).price(model)
    assert price is not None
    return price.cost(
        Usage(
            input_tokens=usage["input_tokens"],
            output_tokens=usage["output_tokens"],
            cached_input_tokens=usage["cache_read_input_tokens"],
            cache_write_input_tokens=usage["cache_creation_input_tokens"],
        )
    )


def _stored(store_url: str) -> float:
    import pyarrow.compute as pc

    from itemeval.store import StudyStore

    rows = StudyStore.open(store_url).read("solutions", columns=["usd"], dedup=False)
    return float(pc.sum(rows.column("usd")).as_py() or 0.0)


def _cap_line(case: str, max_usd: float, ledger: float, stored: float, server: float, how: str):
    over = max(ledger, server) > max_usd + 1e-12
    print(
        f"{case:<9} max_usd ${max_usd:.4f}  ledger ${ledger:.4f}  stored usd ${stored:.4f}  "
        f"server usage priced ${server:.4f}  {'OVER' if over else 'within'}  ({how})",
        flush=True,
    )
    return {"case": case, "max_usd": max_usd, "ledger": ledger, "server": server, "over": over}


def case_unpriced(root: Path) -> dict:
    """A capped run on a model id no price table knows (verbose beyond its estimate, under
    max_usd = 1.2 x the estimate at the price declared later): refused (exit 2) with nothing
    sent; with its price declared in a pricing file, capped at that price."""
    from itemeval.config import load_study
    from itemeval.errors import ConfigError
    from itemeval.planning import make_plan
    from itemeval.runtime import RunOptions, run_study

    overrides = {
        "models": [{"id": "acme-ft", "endpoint": "sim"}],
        "facets.prompt": ["builtin:cot"],
        "budget.policy": "dev",
        "budget.dev_items": 200,
    }
    options = RunOptions(no_ray=True, yes=True, quiet=True)
    prices = root / "acme-prices.yaml"
    prices.write_text("models:\n  acme-ft: {input: 2.0, output: 8.0, max_output: 8192}\n")
    models = str(_verbose_models(root))
    with sim_server("--latency-ms", "100", "--models", models) as url:
        declared = root / "unpriced-declared"
        plan = make_plan(load_study(_study(declared, url, **overrides, pricing=str(prices))))
        max_usd = 1.2 * sum(line.usd for line in plan.estimate.lines)
        capped = {**overrides, "budget.max_usd": max_usd}
        try:
            first = run_study(load_study(_study(root / "unpriced", url, **capped)), options)
            refused = (  # what a version without the check did: the ledger saw $0
                f"ran, exit {int(first.exit_code)}, ledger ${first.spent_usd:.4f}, server "
                f"usage ${_server_usd(url, 'acme-ft', prices):.4f} at the price declared below"
            )
        except ConfigError as exc:
            refused = f"exit {int(exc.exit_code)}, {sim_stats(url)['requests']} requests sent"
    with sim_server("--latency-ms", "100", "--models", models) as url:
        study = load_study(_study(declared, url, **capped, pricing=str(prices)))
        outcome = run_study(study, options)
        server = _server_usd(url, "acme-ft", prices)
    how = (
        f"without a price: {refused}; with one declared: exit {int(outcome.exit_code)} "
        f"({outcome.status}), {outcome.stages['generate'].counts.done} of 200 cells"
    )
    return _cap_line("unpriced", max_usd, outcome.spent_usd, _stored(study.store_url), server, how)


def case_longctx(root: Path) -> dict:
    """A model billed 2x input and 1.5x output past a (here small) long-context threshold,
    verbose beyond the estimate, under max_usd = 1.2 x the estimate."""
    import pyarrow.compute as pc

    from itemeval.config import load_study
    from itemeval.planning import make_plan
    from itemeval.runtime import RunOptions, run_study
    from itemeval.store import StudyStore

    folder = root / "longctx"
    folder.mkdir(parents=True, exist_ok=True)
    prices = folder / "prices.yaml"
    above = 20  # every call's input passes it (checked below): the server's total is exact
    prices.write_text(
        "models:\n  sim/long: {input: 3.0, cached_input: 0.3, output: 15.0, max_output: 8192, "
        f"long_context: {{above: {above}, input: 2, output: 1.5}}}}\n"
    )
    with sim_server("--latency-ms", "100", "--models", str(_verbose_models(root))) as url:
        overrides = {
            "models": [{"id": "sim/long", "endpoint": "sim"}],
            "facets.prompt": ["builtin:cot"],
            "budget.policy": "dev",
            "budget.dev_items": 200,
            "pricing": str(prices),
        }
        study = load_study(_study(folder, url, **overrides))
        max_usd = 1.2 * sum(line.usd for line in make_plan(study).estimate.lines)
        study = load_study(_study(folder, url, **overrides, **{"budget.max_usd": max_usd}))
        outcome = run_study(study, RunOptions(no_ray=True, yes=True, quiet=True))
        server = _server_usd(url, "sim/long", prices)
    rows = StudyStore.open(study.store_url).read("solutions", columns=["input_tokens"])
    long_rows = pc.sum(pc.greater(rows.column("input_tokens"), above)).as_py()
    how = (
        f"exit {int(outcome.exit_code)} ({outcome.status}); {long_rows} of {rows.num_rows} "
        f"stored calls past the {above}-token threshold, billed 2x input and 1.5x output"
    )
    return _cap_line("longctx", max_usd, outcome.spent_usd, _stored(study.store_url), server, how)


def case_pilot(root: Path) -> dict:
    """`run --pilot 0.5` under a max_usd the pilot fits and the pilot and the rest do not
    (below what the whole study costs, at least half its estimate)."""
    from itemeval.config import load_study
    from itemeval.errors import BudgetExceeded
    from itemeval.planning import make_plan
    from itemeval.runtime import RunOptions, run_study
    from itemeval.store import StudyStore, list_manifests, read_manifest

    overrides = {  # a verbose model cut at max_tokens: the estimate is close to the cost
        "models": [{"id": "sim/verbose", "endpoint": "sim", "params": {"max_tokens": 16}}],
        "facets.prompt": ["builtin:cot"],
        "budget.policy": "dev",
        "budget.dev_items": 400,
    }
    options = RunOptions(no_ray=True, yes=True, quiet=True)
    with sim_server("--latency-ms", "50", "--models", str(_verbose_models(root))) as url:
        full = load_study(_study(root / "pilot-full", url, **overrides))
        estimate = sum(line.usd for line in make_plan(full).estimate.lines)
        total = run_study(full, options).spent_usd
        requests_before = sim_stats(url)["requests"]
        server_before = _server_usd(url, "sim/verbose")
        max_usd = max(0.75 * total, 0.55 * estimate)
        study = load_study(_study(root / "pilot", url, **overrides, **{"budget.max_usd": max_usd}))
        try:
            outcome = run_study(study, replace(options, pilot=0.5))
            rest = f"exit {int(outcome.exit_code)} ({outcome.status})"
        except BudgetExceeded as exc:
            rest = f"exit {int(exc.exit_code)}: {str(exc)[:90]}..."
        server = _server_usd(url, "sim/verbose") - server_before
        sent = sim_stats(url)["requests"] - requests_before
    store = StudyStore.open(study.store_url)
    runs = [read_manifest(store, run) for run in list_manifests(store)]
    ledger = sum(m.spend.usd for m in runs)
    how = (
        f"whole study: estimate ${estimate:.4f}, cost ${total:.4f}; runs recorded "
        f"{[m.outcome for m in runs]}, {sent} requests for 400 cells; {rest}"
    )
    return _cap_line("pilot", max_usd, ledger, _stored(study.store_url), server, how)


def case_deadline(root: Path) -> dict:
    """Every attempt runs past `deadline_s` (the server answers in 300 ms, the deadline is
    0.1 s) and is retried; the server answers, and bills, each one anyway (a verbose model:
    each answer runs to max_tokens)."""
    from itemeval.config import load_study
    from itemeval.runtime import RunOptions, run_study

    folder = root / "deadline"
    max_usd = 0.25
    with sim_server("--latency-ms", "300", "--models", str(_verbose_models(root))) as url:
        overrides = {
            "endpoints.sim.deadline_s": 0.1,
            "endpoints.sim.max_attempts": 3,
            "endpoints.sim.backoff_initial_s": 0.02,
            "endpoints.sim.backoff_max_s": 0.05,
            "models": [{"id": "sim/verbose", "endpoint": "sim", "params": {"max_tokens": 400}}],
            "facets.prompt": ["builtin:cot"],
            "budget.policy": "dev",
            "budget.dev_items": 200,
            "budget.max_usd": max_usd,
        }
        study = load_study(_study(folder, url, **overrides))
        outcome = run_study(study, RunOptions(no_ray=True, yes=True, quiet=True))
        server = _server_usd(url, "sim/verbose")
        stats = sim_stats(url)
    how = (
        f"exit {int(outcome.exit_code)} ({outcome.status}); {stats['requests']} attempts sent, "
        f"{stats['ok']} answered by the server after the client gave up"
    )
    return _cap_line("deadline", max_usd, outcome.spent_usd, _stored(study.store_url), server, how)


CASES = {
    "kill": case_kill,
    "workers": case_workers,
    "writes": case_writes,
    "cap": case_cap,
    "unpriced": case_unpriced,
    "longctx": case_longctx,
    "pilot": case_pilot,
    "deadline": case_deadline,
    "shared": case_shared_limits,
}


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
