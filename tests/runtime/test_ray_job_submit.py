"""docs/cluster.md's cluster started by hand, followed step by step on 127.0.0.1: a head with
token authentication (`ray start --head`), a worker node joining it (`ray start --address`),
`ray job submit --working-dir . -- python jobs/sweep.py STUDY` from a client, then `itemeval
status`, `export --out s3://` and `report --out s3://` from the client. The store, the response
cache and a dataset are on moto's S3 server, whose endpoint is named only in the study file
(`storage_options`): no process of the cluster or the client has `AWS_ENDPOINT_URL`. Then `ray
job stop` of a job whose entrypoint is written as the docs write it (`exec python ...`). The
tests stop only the Ray processes they started (each node is its own process group)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import s3fs
from runtime_files import (
    DATASETS,
    REPO,
    assert_complete,
    distinct_calls,
    sim_server,
    sim_stats,
    write_items,
    write_study,
)

from itemeval.store import StudyStore, latest_manifest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

RAY = str(Path(sys.executable).with_name("ray"))
ITEMEVAL = [sys.executable, "-m", "itemeval"]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _node_env(**extra: str) -> dict[str, str]:
    """The environment of a node's `ray start` or of a client: this one without an S3 endpoint,
    a Ray address or a token, with token authentication on, running this virtualenv's python
    (as a cluster image would)."""
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    env |= {
        "RAY_AUTH_MODE": "token",
        "RAY_USAGE_STATS_ENABLED": "0",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return env | extra


_NOT_INHERITED = ("AWS_ENDPOINT_URL", "RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _home_with_token(folder: Path, token: str) -> str:
    """A home directory holding the token where Ray looks by default (`~/.ray/auth_token`),
    as `cluster/aws.yaml`'s file mount puts it on every node."""
    path = folder / ".ray" / "auth_token"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(token)
    path.chmod(0o600)
    return str(folder)


@contextlib.contextmanager
def _ray_node(args: list[str], env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen]:
    """`ray start ARGS --block` in its own process group; on exit that group (and only it) is
    stopped: SIGTERM, then SIGKILL after 2 s (a head drains for up to 30 s, and a test's
    throwaway node has nothing to drain: its temp dir is removed after)."""
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    node = subprocess.Popen(
        [RAY, "start", "--block", "--node-ip-address=127.0.0.1", *args],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield node
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.pid, signal.SIGTERM)
        try:
            node.wait(timeout=2)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
            node.wait(timeout=10)
        log.close()


@contextlib.contextmanager
def _head(tmp_path: Path, env: dict[str, str], num_cpus: int) -> Iterator[tuple[str, str]]:
    """A head on 127.0.0.1 with every port chosen free; yields (GCS address, dashboard URL)."""
    ports = {name: _free_port() for name in ("gcs", "dashboard", "agent", "client", "metrics")}
    temp = Path("/tmp") / f"ray-test-{secrets.token_hex(3)}"  # short: unix socket path limits
    args = [
        "--head",
        f"--port={ports['gcs']}",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={ports['dashboard']}",
        f"--dashboard-agent-listen-port={ports['agent']}",
        f"--ray-client-server-port={ports['client']}",
        f"--metrics-export-port={ports['metrics']}",
        f"--num-cpus={num_cpus}",
        "--include-dashboard=true",
        f"--temp-dir={temp}",
    ]
    try:
        with _ray_node(args, env, tmp_path / "head.log") as head:
            url = f"http://127.0.0.1:{ports['dashboard']}"
            probe = [RAY, "job", "list", "--address", url]
            _wait_until(lambda: _succeeds(probe, env), "the head's job server", head, tmp_path)
            yield f"127.0.0.1:{ports['gcs']}", url
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _succeeds(command: list[str], env: dict[str, str]) -> bool:
    return subprocess.run(command, env=env, capture_output=True, text=True).returncode == 0


def _wait_until(
    ready: Callable[[], bool], what: str, node: subprocess.Popen, tmp_path: Path
) -> None:
    deadline = time.monotonic() + 90
    while not ready():
        if node.poll() is not None or time.monotonic() > deadline:
            logs = "".join(p.read_text()[-2000:] for p in sorted(tmp_path.glob("*.log")))
            raise RuntimeError(f"{what} did not come up:\n{logs}")
        time.sleep(1)


@pytest.fixture
def head_node(tmp_path):
    """A head with two CPUs and token auth, the token in `RAY_AUTH_TOKEN` (the Kubernetes
    route: a Secret as an environment variable); yields (dashboard URL, client environment)."""
    env = _node_env(RAY_AUTH_TOKEN=secrets.token_hex(16))
    with _head(tmp_path, env, num_cpus=2) as (_, url):
        yield url, env


def test_a_head_without_a_token_refuses_to_start(tmp_path):
    """`RAY_AUTH_MODE=token` and no token anywhere: `ray start --head` fails at once (what
    happens on a node the token was not given to), before starting any process."""
    env = _node_env(HOME=str(tmp_path / "empty-home"))
    started = subprocess.Popen(
        [RAY, "start", "--head", "--block", f"--port={_free_port()}", "--include-dashboard=false"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = started.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(started.pid, signal.SIGKILL)
        started.wait(timeout=10)
        pytest.fail("a head without a token started")
    assert started.returncode != 0
    assert "no authentication token was found" in output


def test_the_hand_started_cluster_flow_reaches_s3_through_the_study(tmp_path, s3_server, s3_bucket):
    token = secrets.token_hex(16)
    bucket = s3_bucket
    fs = s3fs.S3FileSystem(endpoint_url=s3_server, skip_instance_cache=True)
    fs.put(str(DATASETS / "arithmetic"), f"{bucket}/data/", recursive=True)
    study = write_study(
        tmp_path / "client",
        **{
            "store": f"{bucket}/studies/sweep",
            "storage_options": {"endpoint_url": s3_server},
            "cache.location": f"{bucket}/cache",
            "datasets": [
                {"name": "arithmetic", "path": f"{bucket}/data/arithmetic"},  # S3: the options
                {"name": "science-mc", "path": str(DATASETS / "science-mc")},  # local: none
            ],
            "budget.dev_items": 6,
            "facets.replications": 1,
        },
    )
    # Nodes find the token in ~/.ray/auth_token; the client has it in RAY_AUTH_TOKEN.
    head_env = _node_env(HOME=_home_with_token(tmp_path / "head-home", token))
    worker_env = _node_env(HOME=_home_with_token(tmp_path / "worker-home", token))
    client = _node_env(RAY_AUTH_TOKEN=token)

    # The head has no CPUs, so every worker actor runs on the node that joins it. That node
    # has its own temporary directory, as another machine would (two nodes sharing one unpack
    # the job's working directory over each other).
    worker_temp = Path("/tmp") / f"ray-test-{secrets.token_hex(3)}"
    with _head(tmp_path, head_env, num_cpus=0) as (gcs, url), contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, worker_temp, ignore_errors=True)
        worker_args = [
            f"--address={gcs}",
            "--num-cpus=2",
            f"--dashboard-agent-listen-port={_free_port()}",
            f"--metrics-export-port={_free_port()}",
            f"--temp-dir={worker_temp}",
        ]
        with _ray_node(worker_args, worker_env, tmp_path / "worker.log") as worker:
            status = [RAY, "status", f"--address={gcs}"]
            _wait_until(
                lambda: (
                    "/2.0 CPU"
                    in subprocess.run(status, env=client, capture_output=True, text=True).stdout
                ),
                "the worker node",
                worker,
                tmp_path,
            )
            # A client without the token is refused.
            tokenless = _node_env(HOME=str(tmp_path / "client-home"))
            assert not _succeeds([RAY, "job", "list", "--address", url], tokenless)
            submit = [RAY, "job", "submit", "--address", url, "--working-dir", str(REPO)]
            job = subprocess.run(
                [*submit, "--", "python", "jobs/sweep.py", str(study), "--yes"],
                env=client,
                capture_output=True,
                text=True,
                timeout=600,
            )
    output = job.stdout + job.stderr
    assert job.returncode == 0, output[-4000:]
    assert "succeeded" in output.lower()

    # The store on S3: every cell exactly once (physical rows, read without deduplication).
    store_url = f"{bucket}/studies/sweep"
    assert_complete(store_url, generate=4, grade=2, epochs=1, items=12)
    # The response cache on S3, written by the workers: one answer per call the store needed.
    cached = {
        key
        for path in fs.glob(f"{bucket}/cache/calls/*/*.parquet")
        for key in pq.read_table(fs.open(path), columns=["key"]).column("key").to_pylist()
    }
    assert len(cached) == distinct_calls(store_url) > 0

    # The client: status, export and report against the S3 store, the endpoint from the study.
    def client_command(*args: str) -> dict:
        done = subprocess.run(
            [*ITEMEVAL, *args, "--json"], env=client, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    conditions = client_command("status", str(study))["conditions"]
    assert len(conditions) == 4 + 2  # generate conditions, then grade conditions
    assert all(c["pending"] == 0 and c["done"] == c["expected"] > 0 for c in conditions)

    exported = client_command("export", str(study), "--out", f"{bucket}/exports/sweep")
    grading_events = 2 * 4 * 12
    assert exported["rows"] == grading_events
    long_table = exported["files"]["parquet"]
    assert long_table == f"{bucket}/exports/sweep/long_table"
    parts = fs.glob(f"{long_table}/*/*/*.parquet")
    assert sum(pq.read_metadata(fs.open(p)).num_rows for p in parts) == grading_events
    assert fs.glob(f"{bucket}/exports/sweep/long_table_csv/*/*/*.csv")

    reported = client_command("report", str(study), "--out", f"{bucket}/reports/sweep")
    assert reported["html"] == f"{bucket}/reports/sweep/report.html"
    assert "sim/strong" in fs.cat_file(reported["html"]).decode("utf-8")
    assert fs.exists(reported["markdown"])


@pytest.mark.serial  # the stop races a run of seconds and Ray's 3 s stop window
def test_ray_job_stop_with_the_documented_entrypoint_is_an_interruption(tmp_path, head_node):
    """docs/cluster.md's entrypoint, `exec python jobs/sweep.py ...`: `ray job stop` sends the
    driver itself SIGTERM (the shell is replaced), the driver records `interrupted` with what
    was stored, and exits inside Ray's stop window (not force-killed)."""
    url, client = head_node
    write_items(tmp_path / "sums", 200)
    with sim_server("--latency-ms", "200") as sim:
        study = write_study(
            tmp_path / "client",
            **{
                "datasets": [{"name": "sums", "path": str(tmp_path / "sums")}],
                "endpoints.sim": {"kind": "sim", "base_url": sim, "max_concurrency": 8},
                "models": [{"id": "sim/strong", "endpoint": "sim"}],
                "facets.prompt": ["builtin:direct"],
                "facets.replications": 1,
                "facets.grader": [],
                "budget": {"policy": "full"},
                "runtime.workers": 1,  # one worker process to start: a shorter test
            },
        )
        job_id = f"stop-{secrets.token_hex(4)}"
        submit = [RAY, "job", "submit", "--address", url, "--working-dir", str(REPO)]
        entrypoint = ["exec", "python", "jobs/sweep.py", str(study), "--yes"]
        started = subprocess.run(
            [*submit, "--submission-id", job_id, "--no-wait", "--", *entrypoint],
            env=client,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert started.returncode == 0, started.stderr[-3000:]
        deadline = time.monotonic() + 240
        while sim_stats(sim)["ok"] < 16:  # the driver is under way
            assert time.monotonic() < deadline, _job_logs(url, job_id, client)
            time.sleep(0.2)
        stop = [RAY, "job", "stop", "--address", url, job_id]
        stopped = subprocess.run(stop, env=client, capture_output=True, text=True, timeout=120)
        answered = sim_stats(sim)["ok"]
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    logs = _job_logs(url, job_id, client)
    assert "Interrupted (run the same command again to continue)" in logs, logs[-3000:]
    # Ray's job supervisor saw the driver exit inside its stop window: not force-killed.
    (supervisor,) = Path("/tmp").glob(
        f"ray-test-*/session_latest/logs/jobs/supervisor-{job_id}.log"
    )
    said = supervisor.read_text()
    assert "terminated gracefully" in said and "force-killed" not in said, said[-2000:]
    store = StudyStore.open(str(tmp_path / "client" / "store"))
    manifest = latest_manifest(store)
    assert manifest.outcome == "interrupted"
    assert manifest.host.ray_address  # the cluster it ran on
    rows = store.read("solutions", columns=["run_id", "status", "cached"], dedup=False)
    mine = rows.filter(pc.equal(rows.column("run_id"), manifest.run_id))
    assert 0 < mine.num_rows <= answered
    ok = pc.sum(pc.equal(mine.column("status"), "ok")).as_py()
    assert manifest.counts["generate"].done == ok  # what was stored, not what was reported
    assert manifest.spend.calls == mine.num_rows - pc.sum(mine.column("cached")).as_py()
    # the final progress line of the job's log counts the same cells
    final = [line for line in logs.splitlines() if line.startswith("generate ") and " in " in line]
    assert final and final[-1].startswith(f"generate {mine.num_rows:,}/"), final


def _job_logs(url: str, job_id: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [RAY, "job", "logs", "--address", url, job_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout + done.stderr
