"""How far the estimate is from what a run then spends, before and after calibration.

    .venv/bin/python benchmarks/estimate_accuracy.py [--scenario demo|verbose|reasoner]
                                                     [--pilot 0.05] [--json]

For each scenario, against a fresh `itemeval sim-server`, store and response cache:

1. `itemeval estimate --json`: the prior (nothing stored);
2. a pilot: `itemeval run --limit N` with N = 5% of each dataset's items (rounded up);
3. `itemeval estimate --json` again: the prior and the calibrated estimate of what remains;
4. `itemeval run`: the rest, and what it spent (the manifest's ledger, per stage).

It prints, per stage and in total, the prior and the calibrated estimate of the rest against
what the rest cost, and the prior of the whole study against the whole spend (pilot + rest).

Scenarios (all on the demo's four datasets, `configs/datasets`, three replications, judged by
`sim/judge` and the `auto` scorer):

* `demo`: `configs/demo.yaml` itself (three models, `direct` and `cot` prompts, max_tokens 512);
* `verbose`: a model writing 60x the default reasoning and prose (`verbosity: 60`), no
  max_tokens (the simulator stops at the model limit, 8,192);
* `reasoner`: `sim/reasoner`, which spends ~1,024 hidden reasoning tokens on every answer (no
  max_tokens either: 512 would cut most answers off inside their reasoning).

Every command runs as a user would run it (a fresh process, `--no-ray`: the spend does not
depend on the executor).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
DATASETS = REPO / "configs" / "datasets"
SCENARIOS = ("demo", "verbose", "reasoner")


def study_for(scenario: str, base_url: str, tmp: Path) -> dict[str, Any]:
    study = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    study["study"] = f"accuracy-{scenario}"
    for dataset in study["datasets"]:
        dataset["path"] = str(DATASETS / Path(dataset["path"]).name)
    study["endpoints"]["sim-server"]["base_url"] = f"{base_url}/v1"
    study["store"] = str(tmp / "store")
    study["cache"] = {"location": str(tmp / "cache")}
    study["budget"] = {"policy": "full"}  # measure, do not gate
    if scenario == "verbose":
        study["models"] = [{"id": "sim/verbose", "endpoint": "sim-server", "name": "verbose"}]
        study["sampling"] = {"temperature": 0.7}
    elif scenario == "reasoner":
        study["models"] = [{"id": "sim/reasoner", "endpoint": "sim-server", "name": "reasoner"}]
        study["sampling"] = {"temperature": 0.7}  # 512 tokens would cut off its reasoning
    return study


@contextmanager
def sim_server(tmp: Path) -> Iterator[str]:
    models = tmp / "sim-models.yaml"
    models.write_text(yaml.safe_dump({"verbose": {"ability": 0.6, "verbosity": 60}}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "itemeval.cli.sim", "--port", "0", "--models", str(models)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"sim-server did not start: {line!r}")
        yield line.split("listening on ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def itemeval(*args: str, cwd: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "itemeval", *args, "--json"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"itemeval {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return json.loads(done.stdout)


def stage_usd(estimate: dict[str, Any], key: str) -> dict[str, float]:
    by_stage = {name: v[key] for name, v in estimate["by_stage"].items()}
    return by_stage | {"total": sum(by_stage.values())}


def spent(outcome: dict[str, Any]) -> dict[str, float]:
    stages = {name: s["spend"]["usd"] for name, s in outcome["stages"].items()}
    return stages | {"total": outcome["spent_usd"]}


def measure(scenario: str, pilot: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"accuracy-{scenario}-") as name:
        tmp = Path(name)
        with sim_server(tmp) as url:
            path = tmp / "study.yaml"
            path.write_text(yaml.safe_dump(study_for(scenario, url, tmp), sort_keys=False))
            sizes = [
                sum(1 for _ in (DATASETS / d / f"{d}.jsonl").open())
                for d in ("arithmetic", "science-mc", "facts-tf", "capitals-short")
            ]
            limit = max(1, math.ceil(pilot * min(sizes)))
            before = itemeval("estimate", str(path), cwd=tmp)
            first = itemeval("run", str(path), "--limit", str(limit), "--no-ray", "--yes", cwd=tmp)
            after = itemeval("estimate", str(path), cwd=tmp)
            rest = itemeval("run", str(path), "--no-ray", "--yes", cwd=tmp)
    pilot_spend, rest_spend = spent(first), spent(rest)
    whole = {k: pilot_spend.get(k, 0.0) + rest_spend.get(k, 0.0) for k in rest_spend}
    return {
        "scenario": scenario,
        "pilot_items_per_dataset": limit,
        "pilot_cells": before["items"] and after["items"],
        "whole": {"prior": stage_usd(before, "usd"), "spent": whole},
        "rest": {
            "prior": stage_usd(after, "prior_remaining_usd"),
            "calibrated": stage_usd(after, "remaining_usd"),
            "spent": rest_spend,
        },
    }


def error(estimate: float, actual: float) -> str:
    if actual == 0:
        return "n/a"
    return f"{(estimate - actual) / actual:+.1%}"


def report(result: dict[str, Any]) -> str:
    rest, whole = result["rest"], result["whole"]
    lines = [
        f"{result['scenario']}: pilot = first {result['pilot_items_per_dataset']} items of each "
        "dataset",
        f"  {'stage':<9} {'prior (all)':>12} {'spent (all)':>12} {'error':>8}   "
        f"{'prior (rest)':>12} {'calibrated':>12} {'spent (rest)':>12} {'before':>8} "
        f"{'after':>8}",
    ]
    for stage in ("generate", "grade", "total"):
        lines.append(
            f"  {stage:<9} ${whole['prior'][stage]:>11.4f} ${whole['spent'][stage]:>11.4f} "
            f"{error(whole['prior'][stage], whole['spent'][stage]):>8}   "
            f"${rest['prior'][stage]:>11.4f} ${rest['calibrated'][stage]:>11.4f} "
            f"${rest['spent'][stage]:>11.4f} "
            f"{error(rest['prior'][stage], rest['spent'][stage]):>8} "
            f"{error(rest['calibrated'][stage], rest['spent'][stage]):>8}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=SCENARIOS, action="append")
    parser.add_argument("--pilot", type=float, default=0.05, help="share of items (default 5%%)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [measure(s, args.pilot) for s in args.scenario or SCENARIOS]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print("\n\n".join(report(r) for r in results))
    worst = max(
        abs(r["rest"]["calibrated"]["total"] / r["rest"]["spent"]["total"] - 1) for r in results
    )
    print(f"\nworst calibrated error on the rest: {worst:.1%}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
