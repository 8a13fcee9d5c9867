"""What a 3-judge panel costs over stored answers, counted at the sim-server.

    .venv/bin/python benchmarks/panel_cost.py [--items 5000]

1. `itemeval run` of a study with one simulated model, one prompt, `--items` generated
   arithmetic items and the `auto` scorer only: N answers;
2. the same study with three simulated judges and a panel of them (`panels:`) and `gold:
   {scorer: auto}`: run again;
3. run once more; then `Study.judges()` (the panel's analysis).

It prints the requests the sim-server answered in each step (its own `/_sim/stats`): step 2
should be exactly 3 N judge calls and no generate call, steps 3 and the analysis none.

`--pairwise`: the study has a second model (sim/weak) as a baseline, and the steps after the
answers add a pairwise judge (`kind: pairwise`, `baseline: sim/weak`) instead of the panel:
step 2 should be 2 calls per pair (N / 2 pairs: sim/strong's answers), less one for each pair
whose two answers are the same text (both orders are then the same request, paid once), and
no generate call; step 3 and `Study.pairwise()` none.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from itemeval import Study
from itemeval.config import load_study
from itemeval.runtime import RunOptions, run_study
from itemeval.store import StudyStore

JUDGES = {
    "judge": {"model": "sim/judge", "endpoint": "sim", "max_tokens": 200},
    "judge-medium": {"model": "sim/medium", "endpoint": "sim", "max_tokens": 200},
    "judge-weak": {"model": "sim/weak", "endpoint": "sim", "max_tokens": 200},
}


def write_items(folder: Path, count: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    meta = {
        "identifier": "sums",
        "title": "generated sums",
        "description": "generated arithmetic items",
        "creator": "itemeval benchmarks",
        "publisher": "itemeval",
        "created": "2026-11-27",
        "language": "eng",
        "license": "CC0-1.0",
        "source": "generated",
        "subject": "arithmetic",
        "hasPart": ["sums.jsonl"],
    }
    (folder / "sums.yaml").write_text(yaml.safe_dump(meta))
    with open(folder / "sums.jsonl", "w") as handle:
        for i in range(count):
            item = {
                "identifier": f"sums.{i}",
                "modality": "single-value",
                "prompt": f"What is {i} plus {i * 7 % 89}?",
                "response": str(i + i * 7 % 89),
            }
            handle.write(json.dumps(item) + "\n")
    return folder


def stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/_sim/stats", timeout=10) as response:
        return json.loads(response.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--pairwise", action="store_true")
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-m", "itemeval.cli.sim", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split("listening on", 1)[1].strip()
        folder = Path(tempfile.mkdtemp(prefix="panel-cost-"))
        study = {
            "study": "panel-cost",
            "store": str(folder / "store"),
            "datasets": [{"name": "sums", "path": str(write_items(folder / "sums", args.items))}],
            "endpoints": {
                "sim": {
                    "kind": "sim",
                    "base_url": f"{url}/v1",
                    "max_concurrency": 64,
                    "requests_per_minute": 600_000,
                }
            },
            "models": [{"id": "sim/strong", "endpoint": "sim"}],
            "facets": {"prompt": ["builtin:direct"], "grader": []},
            "cache": {"location": str(folder / "cache")},
        }
        path = folder / "study.yaml"
        path.write_text(yaml.safe_dump(study))
        options = RunOptions(no_ray=True, yes=True, quiet=True)
        steps = []

        def step(name: str) -> None:
            before = stats(url)["requests"]
            started = time.monotonic()
            if name == "analysis" and args.pairwise:
                assert Study.from_yaml(path).pairwise() is not None
            elif name == "analysis":
                analysis = Study.from_yaml(path).judges(resamples=200)
                assert analysis is not None and analysis.panels
            else:
                run_study(load_study(path), options)
            steps.append((name, stats(url)["requests"] - before, time.monotonic() - started))

        if args.pairwise:
            study["models"].append({"id": "sim/weak", "endpoint": "sim"})
            path.write_text(yaml.safe_dump(study))
        step("answers, scorer only")
        if args.pairwise:
            pairwise = JUDGES["judge"] | {"kind": "pairwise", "baseline": "sim/weak"}
            study["facets"]["grader"] = ["versus"]
            study["graders"] = {"versus": pairwise}
            path.write_text(yaml.safe_dump(study))
            step("a pairwise judge added")
        else:
            study["facets"]["grader"] = list(JUDGES)
            study["graders"] = JUDGES
            study["panels"] = {"jury": {"graders": list(JUDGES)}}
            study["gold"] = {"scorer": "auto"}
            path.write_text(yaml.safe_dump(study))
            step("3 judges and a panel added")
        step("run again")
        step("analysis")
        by_model = stats(url)["ok_by_model"]
        same = 0
        if args.pairwise:
            texts: dict[tuple, set] = {}
            for row in StudyStore.open(str(folder / "store")).read("solutions").to_pylist():
                texts.setdefault((row["item_id"], row["epoch"]), set()).add(row["text"])
            same = sum(len(t) == 1 for t in texts.values())
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"{args.items:,} stored answers (sim/strong), counted at the sim-server:")
    for name, requests, seconds in steps:
        print(f"  {name:28s} {requests:>9,} requests  {seconds:6.1f} s")
    print(f"  answers by model: {by_model}")
    if args.pairwise:
        pairs = args.items
        print(f"  pairs: {pairs:,}; of them with the same text on both sides: {same:,}")
        print(
            f"  pairwise calls expected: at most 2 x {pairs:,} = {2 * pairs:,}, at least "
            f"{2 * pairs - same:,} (identical requests paid once)"
        )


if __name__ == "__main__":
    main()
