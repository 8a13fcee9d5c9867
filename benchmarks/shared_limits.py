"""Two local runs at once against one endpoint: the server's arrivals over its own limits.

    .venv/bin/python benchmarks/shared_limits.py                  # ~2 minutes, three variants
    .venv/bin/python benchmarks/shared_limits.py --variants shared --burst-s 1 2 --reps 10
    .venv/bin/python benchmarks/shared_limits.py --probe          # CPU of one limiter call
    .venv/bin/python benchmarks/paid_twice.py --cases shared      # the same, from paid_twice

Two `itemeval generate` commands started together on this machine, each a study of `--items`
(200) generated items x 2 models declaring the whole of two endpoints' limits:

* `fast`: `itemeval sim-server --rpm 1200 --burst-s B` (B = 1 by default: the server's bucket
  holds one second of the rate) answering after 50 ms (the setup in which two runs each holding
  the whole RPM were turned away 14 of 800 times); the studies declare
  `requests_per_minute: 1200`, and each could send 20 times that;
* `slow`: `itemeval sim-server --max-concurrency 8` answering after 400 ms; the studies declare
  `max_concurrency: 8`, and each has more calls waiting than that.

Before the two runs start, the endpoint's limiter is used once and left idle for 1.5 s, as when
a run follows an earlier one on the machine. Variants: `shared` (as a user runs them: both hold
the limits through the machine's limiter),
`separate` (each run given a limiter folder of its own, `ITEMEVAL_LIMITS_DIR`: as before the
machine's limiter, each holds the whole limit) and `ray` (as `shared`, one of the runs on a local
Ray of its own, `runtime.local_ray: always` with two workers). For each it prints, per server,
the arrivals over its limit (`over_limit` in `/_sim/stats`), the answers, the most requests in
flight, the achieved rate against the limit (admitted a minute, and as a share of the RPM over
the span from first to last arrival), the most arrivals the server admitted in any 1 s window
(the limit's share of one is 20), and the runs' exit codes. `--reps` repeats each variant and
burst window; the last line sums the arrivals over the RPM.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "runtime"), str(REPO / "tests")]

from runtime_files import sim_server, sim_stats, write_items, write_study  # noqa: E402

ITEMS, RPM, SLOTS = 200, 1200, 8
SLOW = ("--latency-ms", "400", "--max-concurrency", str(SLOTS))
VARIANTS = ("shared", "separate", "ray")


def _study(folder: Path, items: Path, fast: str, slow: str, **overrides: object) -> Path:
    retry = {"backoff_initial_s": 0.2, "backoff_max_s": 2.0}
    return write_study(
        folder,
        study=folder.name,
        datasets=[{"name": "sums", "path": str(items)}],
        endpoints={
            "fast": {"kind": "sim", "base_url": fast, "requests_per_minute": RPM, **retry},
            "slow": {"kind": "sim", "base_url": slow, "max_concurrency": SLOTS, **retry},
        },
        models=[
            {"id": "sim/strong", "endpoint": "fast"},
            {"id": "sim/weak", "endpoint": "slow"},
        ],
        **{
            "facets.prompt": ["builtin:direct"],
            "facets.replications": 1,
            "facets.grader": [],
            "graders": {},
            "budget.policy": "full",
            "runtime.shard_size": 50,
            "cache.location": str(folder / "cache"),
            **overrides,
        },
    )


def _used_a_while_ago(fast: str, limits: Path) -> None:
    """The endpoint's limiter was used, then sat idle for more than a second (a run started
    after an earlier one): a limiter that banks idle permits sends them at once."""
    from itemeval.providers import EndpointSettings
    from itemeval.providers.limits._machine import machine_limiter

    settings = EndpointSettings(kind="sim", base_url=fast, requests_per_minute=RPM)
    limiter = machine_limiter(settings, limits)
    limiter.call(lambda state: state.exchange(1, 0))
    limiter.close()
    time.sleep(1.5)


def run_variant(
    root: Path, variant: str, burst_s: float = 1.0, rep: int = 0, items_per_run: int = ITEMS
) -> dict:
    """Two runs at once; the servers' counts."""
    folder = root / f"{variant}-{burst_s:g}-{rep}"
    items = root / f"items-{items_per_run}" / "sums"
    if not items.exists():
        write_items(items, items_per_run)
    fast_args = ("--latency-ms", "50", "--rpm", str(RPM), "--burst-s", f"{burst_s:g}")
    with sim_server(*fast_args) as fast, sim_server(*SLOW) as slow:
        ray = {"runtime.local_ray": "always", "runtime.workers": 2}
        paths = [
            _study(folder / "one", items, fast, slow),
            _study(folder / "two", items, fast, slow, **(ray if variant == "ray" else {})),
        ]
        shared_limits = folder / "limits"
        if variant != "separate":
            _used_a_while_ago(fast, shared_limits)
        started = time.monotonic()
        runs = []
        for number, path in enumerate(paths):
            env = {**os.environ, "ITEMEVAL_LIMITS_DIR": str(shared_limits)}
            env.pop("RAY_ADDRESS", None)
            if variant == "separate":
                env["ITEMEVAL_LIMITS_DIR"] = str(folder / f"limits-{number}")
            command = [sys.executable, "-m", "itemeval", "generate", str(path), "--yes", "--quiet"]
            runs.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL))
        codes = [run.wait(timeout=900) for run in runs]
        took = time.monotonic() - started
        fast_stats, slow_stats = sim_stats(fast, window_s=1.0), sim_stats(slow)
    span = (fast_stats["last_arrival_s"] or 0) - (fast_stats["first_arrival_s"] or 0)
    # admitted requests after the first, over the time between first and last arrival
    rate = 60 * (fast_stats["admitted"] - 1) / span if span > 0 else 0.0
    print(
        f"{variant:<9} --burst-s {burst_s:g} fast (--rpm {RPM}): over the limit "
        f"{fast_stats['over_limit']:>3} of {fast_stats['requests']:>4} arrivals, "
        f"{fast_stats['ok']:>4} answers, {rate:,.0f} a minute admitted ({rate / RPM:.1%}), "
        f"most in 1 s {fast_stats['max_in_window']:>2} | slow (--max-concurrency {SLOTS}): "
        "over the limit "
        f"{slow_stats['over_limit']:>4} of {slow_stats['requests']:>4} arrivals, "
        f"{slow_stats['ok']:>4} answers, most in flight {slow_stats['max_concurrent']:>2} | "
        f"{took:.0f} s, exits {codes}",
        flush=True,
    )
    return {
        "case": f"shared/{variant}",
        "burst_s": burst_s,
        "fast_over": fast_stats["over_limit"],
        "slow_over": slow_stats["over_limit"],
        "fill": rate / RPM,
        "most_in_1s": fast_stats["max_in_window"],
        "codes": codes,
    }


def case_shared(
    root: Path,
    variants: tuple[str, ...] = VARIANTS,
    bursts: tuple[float, ...] = (1.0,),
    reps: int = 1,
    items_per_run: int = ITEMS,
) -> list[dict]:
    """Every variant, one after the other (the `shared` case of paid_twice.py)."""
    print(os.getloadavg(), "load (1, 5, 15 min)", flush=True)  # the figures' caveat
    print(
        f"two local runs at once, {items_per_run} items x 2 models each; fast: --rpm {RPM} "
        f"--burst-s {' | '.join(f'{b:g}' for b in bursts)}, 50 ms; slow: --max-concurrency "
        f"{SLOTS}, 400 ms; {reps} repetition(s)",
        flush=True,
    )
    results = [
        run_variant(root, variant, burst, rep, items_per_run)
        for variant in variants
        for burst in bursts
        for rep in range(reps)
    ]
    for variant in variants:
        for burst in bursts:
            case = f"shared/{variant}"
            mine = [r for r in results if r["case"] == case and r["burst_s"] == burst]
            clean = sum(1 for r in mine if r["fast_over"] == 0)
            fills = [r["fill"] for r in mine]
            print(
                f"{variant} --burst-s {burst:g}: 0 over the RPM in {clean} of {len(mine)}; "
                f"arrivals over it {sum(r['fast_over'] for r in mine)}; RPM filled "
                f"{min(fills):.1%}-{max(fills):.1%}; most in 1 s "
                f"{max(r['most_in_1s'] for r in mine)}",
                flush=True,
            )
    print(os.getloadavg(), "load (1, 5, 15 min)", flush=True)
    return results


def probe_call_cpu(calls: int = 2000, repeats: int = 5) -> None:
    """CPU per call to the machine's limiter file, as a busy process makes them: a limit of
    1,200 a minute asked for 64 waiting requests (a few booked per call), and one of 60,000 a
    minute asked for 256 (a quarter of a second of it booked per call)."""
    from itemeval.providers.limits._endpoint import EndpointLimits
    from itemeval.providers.limits._machine import MachineLimiter

    for rpm, asked in ((1200, 64), (60_000, 256)):
        figures = []
        for repeat in range(repeats):
            with tempfile.TemporaryDirectory(prefix="itemeval-probe-") as folder:
                limiter = MachineLimiter(f"probe{repeat}", EndpointLimits(rpm, None, 64), folder)
                limiter.call(lambda state: state.exchange(1, 0))
                started = time.process_time()
                for _ in range(calls):
                    limiter.call(lambda state, n=asked: state.exchange(n, 0, 0, 1))
                figures.append((time.process_time() - started) / calls * 1e6)
                limiter.close()
        print(
            f"one call to the machine's limiter, {rpm:,}/min asked for {asked}: "
            f"{min(figures):.0f}-{max(figures):.0f} us of CPU ({calls:,} calls, {repeats} repeats)",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", action="store_true", help="only the CPU cost of one call")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--burst-s", nargs="+", type=float, default=[1.0])
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--items", type=int, default=ITEMS, help="items per run (x 2 models)")
    args = parser.parse_args()
    if args.probe:
        probe_call_cpu()
        return 0
    with tempfile.TemporaryDirectory(prefix="itemeval-shared-limits-") as tmp:
        case_shared(Path(tmp), tuple(args.variants), tuple(args.burst_s), args.reps, args.items)
    return 0


if __name__ == "__main__":
    sys.exit(main())
