"""Verifiable grading throughput: grade rows per second through the grade stage on Ray.

    .venv/bin/python benchmarks/grading_throughput.py [--items 200000]

Generates solutions for N items x 2 simulated models (in-process simulator), then times the
grade stage alone: the `auto` scorer over every stored solution, in worker actors (shards of
4,096 cells that read the solution fragment they need, score, and write one grade fragment).
Prints grade rows/s of the stage (dispatch to last write).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from generated_data import write_dataset  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    args = parser.parse_args()

    import ray

    from itemeval.config import load_study
    from itemeval.runtime import _driver as driver

    with tempfile.TemporaryDirectory(prefix="itemeval-grade-") as tmp:
        folder = Path(tmp)
        write_dataset(folder / "sweep", args.items)
        study = {
            "study": "grading",
            "store": str(folder / "store"),
            "datasets": [{"name": "sweep", "path": str(folder / "sweep")}],
            "endpoints": {"sim": {"kind": "sim", "max_concurrency": 512}},
            "models": [
                {"id": "sim/strong", "endpoint": "sim"},
                {"id": "sim/weak", "endpoint": "sim"},
            ],
            "facets": {"scorer": ["auto"]},
            "cache": {"enabled": False},
            "runtime": {"shard_size": 256, "workers": 2},
        }
        path = folder / "study.yaml"
        path.write_text(yaml.safe_dump(study))
        loaded = load_study(path)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        marks: dict[str, float] = {}
        original = driver.dispatch

        order = iter(["generate", "grade"])  # the stages run in this order

        def timed(executor, shards, *rest):  # type: ignore[no-untyped-def]
            stage = next(order)
            marks[f"{stage}0"] = time.perf_counter()
            result = original(executor, shards, *rest)
            marks[f"{stage}1"] = time.perf_counter()
            return result

        driver.dispatch = timed  # measurement only
        try:
            # The Ray path (name the cluster), and the two stages as two commands: run as
            # one, generate shards grade with the solutions and the grade stage has no work.
            address = ray.get_runtime_context().gcs_address
            for stage in ("generate", "grade"):
                options = driver.RunOptions(yes=True, quiet=True, address=address, stages=(stage,))
                outcome = driver.run_study(loaded, options)
                assert outcome.exit_code == 0, outcome.message
                done = outcome.stages[stage].counts.done
                marks[f"{stage}_done"] = done
        finally:
            driver.dispatch = original
            ray.shutdown()
    rows = int(marks["grade_done"])
    seconds = marks["grade1"] - marks["grade0"]
    print(
        f"{rows:,} grade rows in {seconds:.1f} s = {rows / seconds:,.0f} rows/s "
        f"(generate: {int(marks['generate_done']):,} solutions in "
        f"{marks['generate1'] - marks['generate0']:.1f} s)"
    )


if __name__ == "__main__":
    main()
