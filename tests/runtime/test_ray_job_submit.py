"""`ray job submit --working-dir . -- python jobs/sweep.py STUDY` against a head node started
by this test on 127.0.0.1 (token authentication on); the test stops only the cluster it started."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runtime_files import REPO, assert_complete, write_study

pytestmark = [pytest.mark.ray, pytest.mark.slow]

RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def head_node(tmp_path):
    """A Ray head on 127.0.0.1 with every port chosen free and token auth; yields (dashboard
    URL, environment for clients)."""
    ports = {name: _free_port() for name in ("gcs", "dashboard", "agent", "client", "metrics")}
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "RAY_USAGE_STATS_ENABLED": "0",
        # the cluster's nodes run this virtualenv's python, as a cluster image would
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("RAY_ADDRESS", None)
    temp = Path("/tmp") / f"ray-test-{secrets.token_hex(3)}"  # short: unix socket path limits
    command = [
        RAY,
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--port={ports['gcs']}",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={ports['dashboard']}",
        f"--dashboard-agent-listen-port={ports['agent']}",
        f"--ray-client-server-port={ports['client']}",
        f"--metrics-export-port={ports['metrics']}",
        "--num-cpus=2",
        "--include-dashboard=true",
        f"--temp-dir={temp}",
    ]
    log = open(tmp_path / "head.log", "w")  # noqa: SIM115 - closed in teardown
    head = subprocess.Popen(
        command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{ports['dashboard']}"
    try:
        deadline = time.monotonic() + 90
        while True:
            probe = subprocess.run(
                [RAY, "job", "list", "--address", url], env=env, capture_output=True, text=True
            )
            if probe.returncode == 0:
                break
            if head.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "head node did not start:\n" + (tmp_path / "head.log").read_text()[-3000:]
                )
            time.sleep(1)
        yield url, env
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # only this cluster's process group
        try:
            head.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=10)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def test_ray_job_submit_runs_a_study_on_the_cluster(tmp_path, head_node):
    url, env = head_node
    path = write_study(tmp_path, **{"budget.dev_items": 6, "facets.replications": 1})
    job = subprocess.run(
        [
            RAY,
            "job",
            "submit",
            "--address",
            url,
            "--working-dir",
            str(REPO),
            "--",
            "python",
            "jobs/sweep.py",
            str(path),
            "--yes",
        ],
        env=env | {"ITEMEVAL_CACHE_DIR": str(tmp_path / "job-cache")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = job.stdout + job.stderr
    assert job.returncode == 0, output[-4000:]
    assert "succeeded" in output.lower()
    assert_complete(str(tmp_path / "store"), generate=4, grade=2, epochs=1, items=12)
