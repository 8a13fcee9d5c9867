"""One way to reach any fsspec backend: a study's `storage_options` (the store's, and every URL
with the store's protocol) and `storage_options_by_prefix` (the longest matching prefix wins)
reach the store, the response cache, datasets, exports and reports.

The end-to-end test runs the CLI in subprocesses against two S3 servers on 127.0.0.1, with
`AWS_ENDPOINT_URL` pointing at a closed port: only the study's options can reach either server.
(`tests/runtime/test_ray_job_submit.py` does the same on a Ray cluster, workers included.)"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pyarrow.parquet as pq
import pytest
import s3fs
from s3_servers import MOTO_S3_SERVER
from study_files import DATASETS, variant, write_study

from itemeval.cli.main import main
from itemeval.config import study_from_mapping

ENDPOINT = {"endpoint_url": "http://minio.internal:9000"}


def _study(**changes):
    data = variant(**{"facets.prompt": ["builtin:direct"]}, **changes)
    return study_from_mapping(data, base_dir=DATASETS.parent)


def test_one_setting_reaches_every_url_with_the_stores_protocol():
    study = _study(store="s3://evals/studies/golden", storage_options=ENDPOINT)
    options = study.options_by_url()
    for url in (
        "s3://evals/studies/golden",  # the store
        "s3://evals/cache",  # the response cache
        "s3://bench/gsm8k/test.jsonl",  # a dataset in another bucket
        "s3a://evals/exports",  # s3a is s3fs too
    ):
        assert options.for_url(url) == ENDPOINT, url
    assert options.for_url("/home/me/datasets/arithmetic") is None  # local: not the protocol
    assert options.for_url("gs://other/x") is None


def test_the_longest_prefix_wins_and_a_prefix_ends_at_a_slash():
    study = _study(
        store="s3://evals/studies/golden",
        storage_options=ENDPOINT,
        storage_options_by_prefix={
            "s3://open-data": {"anon": True},
            "s3://open-data/private/": {"key_env": "K", "secret_env": "S"},
            "gs://": {"project": "p"},
        },
    )
    options = study.options_by_url()
    assert options.for_url("s3://open-data/mmlu.parquet") == {"anon": True}
    assert options.for_url("s3://open-data") == {"anon": True}
    assert options.for_url("s3://open-data/private/x") == {"key_env": "K", "secret_env": "S"}
    assert options.for_url("s3://open-data2/x") == ENDPOINT  # not under the prefix
    assert options.for_url("gs://anything/at/all") == {"project": "p"}


def test_the_default_follows_the_store_that_is_used():
    study = _study(store="s3://evals/studies/golden", storage_options=ENDPOINT)
    elsewhere = study.options_by_url("/tmp/store")  # `--store /tmp/store`
    assert elsewhere.for_url("/tmp/store") == ENDPOINT
    assert elsewhere.for_url("s3://evals/cache") is None


def test_options_never_print():
    study = _study(storage_options={"profile": "canary-5f3a"})
    assert "canary-5f3a" not in repr(study)
    assert "canary-5f3a" not in repr(study.options_by_url())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"storage_options_by_prefix": {"bucket/data": {"anon": True}}},
            "is not a URL prefix",
        ),
        (
            {
                "store": "s3://evals/studies/golden",
                "storage_options": ENDPOINT,
                "storage_options_by_prefix": {"s3://evals/": {"anon": True}},
            },
            "keep one of them",
        ),
    ],
    ids=["relative prefix", "two sets of options for the store"],
)
def test_ambiguous_or_invalid_options_exit_2_naming_the_field(
    changes, message, tmp_path, capsys, monkeypatch
):
    path = write_study(tmp_path, variant(**changes))
    monkeypatch.chdir(tmp_path)
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "storage_options_by_prefix" in err and message in err and "study.yaml" in err, err


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        time.sleep(0.1)
    raise RuntimeError(f"moto did not listen on 127.0.0.1:{port}")


@contextlib.contextmanager
def _moto() -> Iterator[str]:
    """Another moto S3 server on 127.0.0.1 (the session's is `s3_server`)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, MOTO_S3_SERVER, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_store_cache_datasets_exports_and_reports_reach_two_endpoints_by_the_study_alone(
    tmp_path, s3_server, s3_bucket
):
    with _moto() as other:
        data = s3fs.S3FileSystem(endpoint_url=other, skip_instance_cache=True)
        data.mkdir("open-data")
        data.put(str(DATASETS / "arithmetic"), "open-data/sets/", recursive=True)
        study = write_study(
            tmp_path,
            variant(
                store=f"{s3_bucket}/studies/golden",
                storage_options={"endpoint_url": s3_server},
                storage_options_by_prefix={"s3://open-data/": {"endpoint_url": other}},
                cache={"location": f"{s3_bucket}/cache"},
                datasets=[{"name": "arithmetic", "path": "s3://open-data/sets/arithmetic"}],
                **{"budget.dev_items": 3, "facets.replications": 1},
            ),
        )
        # Anything that fell back to the environment would meet a closed port.
        env = os.environ | {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}

        def cli(*args: str) -> dict:
            done = subprocess.run(
                [sys.executable, "-m", "itemeval", *args, "--json"],
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            return json.loads(done.stdout)

        cli("run", str(study), "--yes", "--no-ray")
        exported = cli("export", str(study), "--out", "s3://open-data/exports/golden")
        reported = cli("report", str(study), "--out", "s3://open-data/reports/golden")

        store = s3fs.S3FileSystem(endpoint_url=s3_server, skip_instance_cache=True)
        assert store.glob(f"{s3_bucket}/studies/golden/solutions/*/*.parquet")
        assert store.glob(f"{s3_bucket}/cache/calls/*/*.parquet")
        long_table = exported["files"]["parquet"]
        assert long_table == "s3://open-data/exports/golden/long_table"
        assert exported["rows"] > 0
        parts = data.glob(f"{long_table}/*/*/*.parquet")
        assert sum(pq.read_metadata(data.open(p)).num_rows for p in parts) == exported["rows"]
        assert data.exists(reported["html"]) and data.exists(reported["markdown"])
        assert not store.exists("open-data")  # nothing went to the store's server
