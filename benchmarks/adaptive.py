"""Adaptive runs on simulated banks: how few items give how good a prediction.

    .venv/bin/python benchmarks/adaptive.py [--items 2000] [--models 10] [--seed 0]
        [--seeds 1] [--target-se 0.015] [--max-share 0.2] [--shard 20]
        [--weight 1pl|2pl] [--floor 0.5] [--thin 3 ...] [--no-server] [--concurrency 64]

The bank: `--items` items in 8 subjects; each item has a discrimination (lognormal), a
difficulty, and, for the multiple-choice half of the subjects, a guessing floor of 0.25. Each of
`--models` models has an ability (spread evenly from -1.5 to 2) and a skill per subject (its
ability plus N(0, 0.4)). A model's answer to an item is drawn once from this 3PL model with
per-subject skill, which is richer than the 2PL model with one ability that is fitted.

For each of `--seeds` banks, for each model in turn: calibrate the 2PL on the other models'
full runs (`fit_irt`), then run it adaptively (`itemeval.irt._adaptive`, the draw weighted by
`--weight` mixed with a uniform `--floor`; `--floor 1` is a uniform draw within strata),
answering with the same draws as its full run. Prints, per bank and over all of them, the share
of items used, the mean absolute error of the predicted full accuracy against the actual
full-run accuracy, how many 95% intervals hold the full-run accuracy, their mean half-width,
Kendall's tau between the predicted and the full ranking, and the calls and dollars saved.

The calls are counted at a real `itemeval sim-server` that this script starts (127.0.0.1,
`--port 0`, the models `sim/bank-0`.. in its catalog): each model's adaptive run sends every
item of each shard before recording the shard, then its full run sends every item, all as HTTP
requests through itemeval's own provider client (`make_provider`, kind `sim`: the OpenAI wire;
the full runs `--concurrency` at a time). The answers the estimator reads stay the bank's draws:
the server is the provider that counts and bills. Calls and tokens are read from
`/_sim/stats` before and after each phase, and priced with the package's price table
(`Pricing.load()`: `sim/bank-K` is priced as `sim/*`, $1 input and $4 output per million
tokens). `--no-server` counts the calls in this process instead, at a nominal $0.0039 a call
(300 input and 200 output tokens at $3 and $15 per million). The `--thin` runs send nothing.

Then, for each `--thin K`, the same with K calibrating models drawn at random: the IRT prediction
made whatever `MIN_CALIBRATION` says, and, below it, the stratified sample the run falls back to.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from itemeval.irt import FLOOR, MIN_CALIBRATION, WEIGHT, Adaptive, Bank, Estimate, fit_irt
from itemeval.providers import (
    EndpointSettings,
    ModelRequest,
    Pricing,
    Provider,
    SamplingParams,
    Usage,
    make_provider,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_server import sim_server, stats

USD_PER_CALL = 300 * 3e-6 + 200 * 15e-6  # --no-server's nominal price of a call
SUBJECTS = 8
LETTERS = "ABCD"


def simulate(items: int, models: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Answers (models x items, 0/1) and each item's subject."""
    rng = np.random.default_rng(seed)
    subject = rng.integers(0, SUBJECTS, items)
    a = rng.lognormal(0.0, 0.5, items)
    b = rng.normal(0.0, 1.2, items)
    guess = np.where(subject % 2 == 0, 0.25, 0.0)[np.arange(items)]
    ability = np.linspace(-1.5, 2.0, models)
    skill = ability[:, None] + rng.normal(0.0, 0.4, (models, SUBJECTS))
    theta = skill[:, subject]  # models x items
    p = guess + (1 - guess) / (1 + np.exp(-a * (theta - b)))
    return (rng.random(p.shape) < p).astype(np.float64), subject


def run_one(
    answers: np.ndarray,
    subject: np.ndarray,
    model: int,
    calibration: list[int],
    args: argparse.Namespace,
    seed: int,
    min_calibration: int = MIN_CALIBRATION,
    send: Callable[[np.ndarray], None] | None = None,
) -> tuple[Estimate, int, float]:
    """Calibrate on `calibration`, run `model` adaptively: its estimate, items used, and the
    slowest choice of a shard (seconds). `send(shard)`, when given, makes the shard's calls
    before the shard's answers are recorded."""
    ones = np.ones_like(answers[calibration])
    fit = fit_irt(answers[calibration], ones, "2pl")
    bank = Bank(fit.a, fit.d, subject, len(calibration), min_calibration)
    run = Adaptive(
        bank,
        target_se=args.target_se,
        max_share=args.max_share,
        shard_size=args.shard,
        floor=args.floor,
        weight=args.weight,
        seed=seed * 1000 + model,
    )
    slowest = 0.0
    while not run.done:
        started = time.perf_counter()
        shard = run.next_shard()
        slowest = max(slowest, time.perf_counter() - started)
        if not len(shard):
            break
        if send is not None:
            send(shard)
        run.record(shard, answers[model, shard], np.ones(len(shard)))
    assert run.last is not None
    return run.last, int(run.answered.sum()), slowest


class Caller:
    """Calls to the sim-server through itemeval's provider client: one request per item, the
    model `sim/bank-K`, a four-option question of the item's subject."""

    def __init__(self, url: str, concurrency: int) -> None:
        settings = EndpointSettings(
            kind="sim",  # the OpenAI wire, with the simulator's hints in the body
            base_url=f"{url}/v1",
            requests_per_minute=10_000_000,  # the limiter is in the path, never the bottleneck
            max_concurrency=concurrency,
        )
        self.runner = asyncio.Runner()
        self.provider = self.runner.run(_make(settings))
        self.limit = asyncio.Semaphore(concurrency)
        self.failed = 0

    def send(self, seed: int, model: int, items: np.ndarray, subject: np.ndarray) -> None:
        """Every item's call, at most `concurrency` in flight; waits for all of them."""
        self.runner.run(self._send(seed, model, items, subject))

    async def _send(self, seed: int, model: int, items: np.ndarray, subject: np.ndarray) -> None:
        results = await asyncio.gather(
            *(self._one(seed, model, int(i), int(subject[i])) for i in items)
        )
        self.failed += sum(not ok for ok in results)

    async def _one(self, seed: int, model: int, item: int, topic: int) -> bool:
        gold = LETTERS[int(np.random.default_rng([seed, item]).integers(4))]
        prompt = (
            f"Subject {topic}, question {item} of bank {seed}. Which of the options below "
            "follows from the definitions given in the course notes? Think step by step, then "
            "give your final answer on a line of its own as 'ANSWER: <letter>'.\n"
            + "".join(f"{c}. Statement {c.lower()} about item {item}.\n" for c in LETTERS)
        )
        request = ModelRequest(
            model=f"sim/bank-{model}",
            messages=({"role": "user", "content": prompt},),
            params=SamplingParams(temperature=0.0, max_tokens=512),
            sim_hints={
                "item_id": f"bank-{seed}-{item}",
                "target": gold,
                "modality": "multiple-choice",
            },
        )
        async with self.limit:
            result = await self.provider.complete(request)
        return result.ok

    def close(self) -> None:
        self.runner.run(self.provider.aclose())
        self.runner.close()


async def _make(settings: EndpointSettings) -> Provider:
    return make_provider(settings)  # made inside the loop that will use it


@contextmanager
def server(models: int, concurrency: int) -> Iterator[tuple[str, Caller]]:
    """A sim-server whose catalog holds `sim/bank-0`.., and a `Caller` to it."""
    with tempfile.TemporaryDirectory(prefix="adaptive-bench-") as folder:
        catalog = Path(folder) / "models.yaml"
        catalog.write_text("".join(f"bank-{m}: {{ability: 0.5}}\n" for m in range(models)))
        with sim_server("--models", str(catalog)) as url:
            caller = Caller(url, concurrency)
            try:
                yield url, caller
            finally:
                caller.close()


@dataclass
class Meter:
    """What the server counted in one phase (adaptive or full), over every seed."""

    calls: int = 0
    by_model: dict[str, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    def add(self, before: dict, after: dict) -> None:
        self.calls += after["ok"] - before["ok"]
        for name, n in after["ok_by_model"].items():
            got = n - before["ok_by_model"].get(name, 0)
            self.by_model[name] = self.by_model.get(name, 0) + got
        b, a = before["usage"], after["usage"]
        self.usage = Usage(
            input_tokens=self.usage.input_tokens + a["input_tokens"] - b["input_tokens"],
            output_tokens=self.usage.output_tokens + a["output_tokens"] - b["output_tokens"],
            cached_input_tokens=self.usage.cached_input_tokens
            + a["cache_read_input_tokens"]
            - b["cache_read_input_tokens"],
            reasoning_tokens=self.usage.reasoning_tokens
            + a["reasoning_tokens"]
            - b["reasoning_tokens"],
            cache_write_input_tokens=self.usage.cache_write_input_tokens
            + a["cache_creation_input_tokens"]
            - b["cache_creation_input_tokens"],
        )


@dataclass
class Tally:
    """Predictions against the full runs' accuracies, over models and seeds."""

    errors: list[float] = field(default_factory=list)
    inside: list[bool] = field(default_factory=list)
    half: list[float] = field(default_factory=list)
    taus: list[float] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"MAE {100 * np.mean(self.errors):.2f} points, intervals holding the full accuracy "
            f"{sum(self.inside)}/{len(self.inside)} ({np.mean(self.inside):.0%}), mean 95% "
            f"half-width {100 * np.mean(self.half):.2f} points, tau {np.mean(self.taus):.3f} "
            f"(min {min(self.taus):.3f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--seeds", type=int, default=1, help="banks simulated, seed after seed")
    parser.add_argument("--target-se", type=float, default=0.015)
    parser.add_argument("--max-share", type=float, default=0.2)
    parser.add_argument("--shard", type=int, default=20)
    parser.add_argument(
        "--floor", type=float, default=FLOOR, help="uniform part of the draw (1: uniform)"
    )
    parser.add_argument("--weight", choices=["1pl", "2pl"], default=WEIGHT)
    parser.add_argument(
        "--thin",
        type=int,
        nargs="*",
        default=[3],
        help="also calibrate on this many other models (the IRT prediction made anyway)",
    )
    parser.add_argument(
        "--no-server",
        action="store_true",
        help="count the calls in this process (nominal dollars) instead of at a sim-server",
    )
    parser.add_argument(
        "--concurrency", type=int, default=64, help="calls in flight to the sim-server"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    if args.no_server:
        run(args, None)
    else:
        with server(args.models, args.concurrency) as (url, caller):
            run(args, (url, caller))
    print(f"wall time: {time.perf_counter() - started:.1f} s")


def run(args: argparse.Namespace, at: tuple[str, Caller] | None) -> None:
    print(
        f"bank: {args.items:,} items, {SUBJECTS} subjects, {args.models} models; target SE "
        f"{args.target_se}, max share {args.max_share:.0%}, shards of {args.shard}, "
        f"weight {args.weight}, floor {args.floor}; seeds {args.seed}..{args.seed + args.seeds - 1}"
    )
    tally = Tally()
    thin = {k: Tally() for k in args.thin}
    fallback = {k: Tally() for k in args.thin if k < MIN_CALIBRATION}
    slowest = 0.0
    used_all = calls_full = 0
    metered = {"adaptive": Meter(), "full": Meter()}
    used_by: dict[str, int] = {}  # items each model's adaptive runs answered
    for seed in range(args.seed, args.seed + args.seeds):
        answers, subject = simulate(args.items, args.models, seed)
        actual = answers.mean(1)
        rng = np.random.default_rng(seed)
        rows = []
        before = stats(at[0]) if at else None
        for m in range(args.models):
            others = [o for o in range(args.models) if o != m]
            send = None
            if at:
                send = _sender(at[1], seed, m, subject)
            rows.append(run_one(answers, subject, m, others, args, seed, send=send))
        if at:
            assert before is not None
            middle = stats(at[0])
            metered["adaptive"].add(before, middle)
            for m in range(args.models):  # the full runs: every item of every model
                at[1].send(seed, m, np.arange(args.items), subject)
            metered["full"].add(middle, stats(at[0]))
        ests, used = [r[0] for r in rows], [r[1] for r in rows]
        _add(tally, ests, actual)
        slowest = max([slowest, *(r[2] for r in rows)])
        used_all += sum(used)
        for m, n in enumerate(used):
            used_by[f"sim/bank-{m}"] = used_by.get(f"sim/bank-{m}", 0) + n
        calls_full += args.items * args.models
        if args.seeds == 1:
            print("\nmodel  full acc.  predicted [95% interval]   items used  inside")
            for m, (est, n_used, _) in enumerate(rows):
                low, high = est.interval
                print(
                    f"{m:5d}  {actual[m]:9.3f}  {est.predicted:9.3f} [{low:.3f}, {high:.3f}]  "
                    f"{n_used:6d} ({n_used / args.items:4.0%})  "
                    f"{'yes' if low <= actual[m] <= high else 'NO'}"
                )
        errors, inside = tally.errors[-args.models :], tally.inside[-args.models :]
        print(
            f"seed {seed}: items used {sum(used) / (args.items * args.models):.1%}, MAE "
            f"{100 * np.mean(errors):.2f} points, intervals {sum(inside)}/{len(inside)}, "
            f"tau {tally.taus[-1]:.3f}"
        )
        for k in args.thin:
            few = [
                sorted(rng.choice([o for o in range(args.models) if o != m], k, replace=False))
                for m in range(args.models)
            ]
            got = [
                run_one(answers, subject, m, few[m], args, seed, 1)[0] for m in range(args.models)
            ]
            _add(thin[k], got, actual)
            if k in fallback:
                got = [
                    run_one(answers, subject, m, few[m], args, seed)[0] for m in range(args.models)
                ]
                _add(fallback[k], got, actual)
    share = used_all / calls_full
    print(f"\nshare of items used: {share:.1%} (max share {args.max_share:.0%}; target <= 20%)")
    print(f"all models, calibrated on the other {args.models - 1}: {tally.line()}")
    print("  (targets: MAE <= 2 points, tau >= 0.9)")
    if at:
        _print_server(at[0], at[1], metered, used_by, calls_full // args.models)
    else:
        print(
            f"calls: {used_all:,} of {calls_full:,} ({calls_full - used_all:,} saved); dollars "
            f"${used_all * USD_PER_CALL:.2f} of ${calls_full * USD_PER_CALL:.2f} "
            f"(${(calls_full - used_all) * USD_PER_CALL:.2f} saved, at ${USD_PER_CALL:.4f} a "
            "call; counted in this process (--no-server), nominal dollars)"
        )
    print(f"slowest choice of a shard: {1000 * slowest:.1f} ms")
    for k in args.thin:
        print(f"calibrated on {k} other models, the IRT prediction: {thin[k].line()}")
        if k in fallback:
            print(
                f"  (< {MIN_CALIBRATION}: the run falls back to a stratified random sample of "
                f"{args.max_share:.0%}: {fallback[k].line()})"
            )


def _sender(
    caller: Caller, seed: int, model: int, subject: np.ndarray
) -> Callable[[np.ndarray], None]:
    return lambda shard: caller.send(seed, model, shard, subject)


def _print_server(
    url: str,
    caller: Caller,
    metered: dict[str, Meter],
    used_by: dict[str, int],
    full_each: int,
) -> None:
    """The calls and dollars the server counted, priced with the package's table."""
    pricing = Pricing.load()
    prices = {pricing.price(name) for name in used_by}
    if len(prices) != 1 or None in prices:
        raise SystemExit(f"the models are not priced alike: {prices}")
    price = prices.pop()
    assert price is not None
    usd = {k: price.cost(v.usage, calls=max(1, v.calls)) for k, v in metered.items()}
    a, f = metered["adaptive"], metered["full"]
    print(
        f"counted at the sim-server ({url}/_sim/stats; models sim/bank-K priced as "
        f"{price.key}: ${price.input_per_m:g} input, ${price.output_per_m:g} output per "
        "million tokens):"
    )
    for name, m in (("full runs", f), ("adaptive runs", a)):
        print(
            f"  {name + ':':15s}{m.calls:8,} calls, {m.usage.input_tokens:,} input and "
            f"{m.usage.output_tokens:,} output tokens, ${usd[name.split()[0]]:.2f}"
        )
    saved = f.calls - a.calls
    print(
        f"  {'saved:':15s}{saved:8,} calls ({saved / f.calls:.1%}), "
        f"${usd['full'] - usd['adaptive']:.2f} ({1 - usd['adaptive'] / usd['full']:.1%})"
    )
    same = (
        a.by_model == used_by
        and f.by_model == dict.fromkeys(used_by, full_each)
        and caller.failed == 0
    )
    print(
        f"  the server's count of each model equals its runs' own ({sum(used_by.values()):,} "
        f"adaptive, {full_each * len(used_by):,} full) and no call failed: "
        f"{'yes' if same else 'NO'} ({caller.failed} failed)"
    )
    if not same:
        raise SystemExit("the server's counts differ from the runs' own")


def _add(tally: Tally, estimates: list[Estimate], actual: np.ndarray) -> None:
    predicted = np.array([e.predicted for e in estimates])
    tally.errors += list(np.abs(predicted - actual))
    tally.inside += [
        e.interval[0] <= x <= e.interval[1] for e, x in zip(estimates, actual, strict=True)
    ]
    tally.half += [(e.interval[1] - e.interval[0]) / 2 for e in estimates]
    tally.taus.append(float(kendalltau(predicted, actual)[0]))


if __name__ == "__main__":
    main()
