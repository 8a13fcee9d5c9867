"""Judge calls paid for identical requests within one run, counted at the provider.

    PYTHONPATH=. .venv/bin/python benchmarks/identical_calls.py            # ~1-2 minutes
    PYTHONPATH=. .venv/bin/python benchmarks/identical_calls.py --runs 3

The demo study (`configs/demo.yaml`: 3 models x 2 prompts x 3 replications over the four sample
datasets, a judge and a verifiable scorer) on a Ray of 2 CPUs that this process starts (so the
run has two worker actors, as on a cluster), the store and the response cache on moto's S3
server on 127.0.0.1, against a fresh `itemeval sim-server`, uninterrupted (both stages in one
run), each run on a fresh store and an empty cache. Two generate
conditions that give the same answer to the same item make the same judge request; on two
workers with a remote cache, each worker's view of the cache is up to a minute old.

It prints, per run, the judge requests the server answered (`ok_by_model`), the distinct judge
request keys the stored grades needed (request hash and epoch), the difference (paid twice), the
judge rows answered from the cache, and the run's wall time.
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

import yaml  # noqa: E402
from runtime_files import sim_server, sim_stats  # noqa: E402

CREDS = {"key": "testing", "secret": "testing"}


def one_run(root: Path, endpoint: str, bucket: str) -> dict:
    import pyarrow.compute as pc

    from itemeval.config import load_study
    from itemeval.runtime import RunOptions, run_study
    from itemeval.store import StudyStore

    study = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    for dataset in study["datasets"]:
        dataset["path"] = str(REPO / "configs" / dataset["path"])
    # The credentials come from the environment (set before the run starts its Ray).
    options = {"client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    with sim_server() as url:
        study["endpoints"]["sim-server"]["base_url"] = url
        study["store"] = f"{bucket}/studies/demo"
        study["storage_options"] = options
        study["cache"] = {"location": f"{bucket}/cache"}
        study["runtime"] = {"local_ray": "auto"}  # the Ray this process started
        root.mkdir(parents=True, exist_ok=True)
        path = root / "study.yaml"
        path.write_text(yaml.safe_dump(study, sort_keys=False))
        config = load_study(path)
        started = time.monotonic()
        outcome = run_study(config, RunOptions(yes=True, quiet=True))
        ended = time.monotonic()
        judge_calls = sim_stats(url)["ok_by_model"].get("sim/judge", 0)
    assert outcome.status == "completed", outcome.message
    grades = StudyStore.open(config.store_url, options).read(
        "grades", columns=["request_hash", "epoch", "cached", "status"], dedup=False
    )
    judged = grades.filter(pc.is_valid(grades.column("request_hash")))
    distinct = judged.group_by(["request_hash", "epoch"]).aggregate([]).num_rows
    return {
        "judge_cells": judged.num_rows,
        "judge_calls": judge_calls,
        "distinct": distinct,
        "paid_twice": judge_calls - distinct,
        "from_cache": pc.sum(judged.column("cached")).as_py(),
        "run_s": ended - started,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    from conftest import free_port, wait_for_port

    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)

    port = free_port()
    moto = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_for_port(port, proc=moto)
        import s3fs

        fs = s3fs.S3FileSystem(**CREDS, client_kwargs={"endpoint_url": endpoint})
        with tempfile.TemporaryDirectory(prefix="itemeval-identical-") as tmp:
            for run in range(args.runs):
                bucket = f"bench-{run}"
                fs.mkdir(bucket)
                r = one_run(Path(tmp) / str(run), endpoint, f"s3://{bucket}")
                print(
                    f"run {run + 1}: {r['judge_cells']:,} judge cells, {r['judge_calls']:,} judge "
                    f"calls for {r['distinct']:,} distinct requests: {r['paid_twice']:,} paid "
                    f"twice; {r['from_cache']:,} from the cache; the run took {r['run_s']:.1f} s",
                    flush=True,
                )
    finally:
        moto.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
