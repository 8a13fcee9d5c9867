"""Survive the cluster: a real multi-node Ray on one machine (`cluster_harness.py`: a head with
no CPUs and three worker nodes of one CPU, each its own raylet, token auth on), drivers run as a
user runs them (`itemeval generate --address ...`), and `itemeval sim-server` enforcing an RPM
limit and counting what it answered.

Cases, each against physical truth:
(a) a worker's node is lost mid-run;  (b) the limiter's node is lost mid-run;
(c) the driver gets SIGTERM mid-run (`ray job stop`, a pod eviction);
(d) two drivers run at once against one endpoint, and a third declares other limits;
(e) workers follow the cluster: a node joins mid-run and gets a worker, another leaves;
(f) `runtime.workers` is a ceiling: a waiting worker starts on a node that joins, no more.

Each asserts: the run ends `completed` (or `interrupted`, then one re-run, for (c)); physical
rows == cells, read without deduplication; calls paid twice within the durability contract's
bound, counted at the server; and not one arrival over the server's own limits (`over_limit`:
the server enforces the RPM over one second of its rate, `--burst-s 1`, and the concurrency).
Every run asks for more than the limits give, so a limiter that did not hold would exceed them:
the RPM allows 20 requests a second where the workers could send 80 (8 slots, 100 ms answers);
in (d) the second model's endpoint answers in 500 ms, so its 8 slots are the bound, and each
driver's two workers would fill them alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))

from runtime_files import (
    distinct_calls,
    physical_rows,
    sim_server,
    sim_stats,
    write_items,
    write_study,
)

from itemeval.config import load_study
from itemeval.runtime._actors import limiter_name
from itemeval.store import StudyStore, list_manifests, read_manifest

#: A four-raylet cluster whose tests count the server's limits in windows of the wall clock and
#: a 3 s stop window: `make test` runs these alone.
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.serial]

HARNESS = Path(__file__).with_name("cluster_harness.py")
ITEMS, RPM, CONCURRENCY = 150, 1200, 8
#: The sim-server's own limits: the RPM over one second of its rate (a limiter that holds the
#: RPM books every send for its moment, one request at a time, so it never empties a bucket
#: holding a tenth of a second of it), and the concurrency.
LIMITS = ("--rpm", str(RPM), "--burst-s", "1", "--max-concurrency", str(CONCURRENCY))
CELLS = 2 * ITEMS  # two models, one prompt, one epoch
#: The test cluster's token (Ray 2.60 token auth), for the harness and every driver.
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
#: The durability contract per lost process: the calls in flight plus about a second of answers.
PER_FAULT = CONCURRENCY + RPM / 60


class Harness:
    def __init__(self, proc: subprocess.Popen[str], hello: dict):
        self.proc = proc
        self.address: str = hello["address"]
        self.nodes: list[str] = hello["nodes"]

    def cmd(self, **command: object) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return _read_reply(self.proc)

    def restore(self, count: int = 3) -> None:
        """Back to `count` worker nodes after a test removed some."""
        nodes = self.cmd(cmd="nodes")["nodes"]
        for _ in range(count - len(nodes)):
            self.cmd(cmd="add")


def _read_reply(proc: subprocess.Popen[str]) -> dict:
    """The harness's next reply (Ray's own lines on its stdout are skipped). Ray may write its
    own text right after a reply, on the same line (a removed node's raylet says it was
    terminated), so only the reply's JSON object is decoded."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("@@harness "):
            reply, _ = json.JSONDecoder().raw_decode(line.removeprefix("@@harness "))
            return reply
    raise AssertionError("the cluster harness died")


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    env = {**os.environ, **AUTH, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(
        [sys.executable, str(HARNESS), "3"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        hello = _read_reply(proc)
    except AssertionError:
        proc.kill()
        raise
    harness = Harness(proc, hello)
    try:
        yield harness
    finally:
        if proc.poll() is None:
            with contextlib.suppress(AssertionError, BrokenPipeError, ValueError):
                harness.cmd(cmd="quit")
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def _study(folder: Path, url: str, **overrides: object) -> Path:
    items = folder.parent / "items" / "sums"
    if not items.exists():
        write_items(items, ITEMS)
    return write_study(
        folder,
        **{
            "datasets": [{"name": "sums", "path": str(items)}],
            "endpoints.sim.base_url": url,
            "endpoints.sim.requests_per_minute": RPM,
            "endpoints.sim.max_concurrency": CONCURRENCY,
            "endpoints.sim.backoff_initial_s": 0.1,
            "endpoints.sim.backoff_max_s": 1.0,
            "facets.grader": [],
            "facets.prompt": ["builtin:direct"],
            "facets.replications": 1,
            "budget.policy": "full",
            "runtime.workers": 2,
            "runtime.shard_size": 25,
            **overrides,
        },
    )


def _driver(path: Path, harness: Harness, tmp_path: Path) -> subprocess.Popen[str]:
    env = {**os.environ, **AUTH, "ITEMEVAL_CACHE_DIR": str(tmp_path / "c")}
    env.pop("RAY_ADDRESS", None)
    address = harness.address
    return subprocess.Popen(
        [sys.executable, "-m", "itemeval", "generate", str(path), "--yes", "--address", address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_answers(url: str, answers: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while sim_stats(url)["ok"] < answers:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no progress within 120 s"
        time.sleep(0.05)


def _finish(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[int, str]:
    """The driver's exit code and its stderr (progress, messages, errors)."""
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def _check_server(url: str, store_url: str, faults: int) -> dict:
    stats = sim_stats(url, window_s=60)
    assert physical_rows(store_url) == CELLS  # physical rows, no duplicate, nothing lost
    paid_twice = stats["ok"] - distinct_calls(store_url)
    assert 0 <= paid_twice <= faults * PER_FAULT, paid_twice
    assert stats["over_limit"] == 0, stats  # not one arrival over the server's limits
    assert stats["max_in_window"] <= RPM  # no 60-second window above the limit
    return stats


def _outcomes(store_url: str) -> list[str]:
    store = StudyStore.open(store_url)
    return [read_manifest(store, run).outcome for run in list_manifests(store)]


def test_a_lost_worker_node_costs_time_not_the_run(harness, tmp_path):
    with sim_server("--latency-ms", "100", *LIMITS) as url:
        path = _study(tmp_path / "a", url)
        driver = _driver(path, harness, tmp_path)
        _wait_answers(url, 60, driver)
        busy = harness.cmd(cmd="busy")["nodes"]  # nodes whose CPU a worker holds
        assert len(busy) == 2
        harness.cmd(cmd="remove", node=busy[0])
        code, err = _finish(driver)
        assert code == 0, err[-3000:]
        # Its shards went to the other worker at once, never counted as failed attempts.
        assert "its worker was lost; another takes it" in err
        assert "dispatching it again" not in err and "failed" not in err
        store_url = str(load_study(path).store_url)
        _check_server(url, store_url, faults=1)
    assert _outcomes(store_url) == ["completed"]
    harness.restore()


def test_a_lost_limiter_node_is_waited_for_and_the_limits_hold(harness, tmp_path):
    with sim_server("--latency-ms", "100", *LIMITS) as url:
        path = _study(tmp_path / "b", url)
        name = limiter_name(load_study(path).endpoints["sim"])
        spare = harness.cmd(cmd="nodes")["nodes"][-1]
        placed = harness.cmd(cmd="limiter", name=name, node=spare, limits=[RPM, None, CONCURRENCY])
        assert placed["node"] == spare
        driver = _driver(path, harness, tmp_path)
        _wait_answers(url, 60, driver)
        harness.cmd(cmd="remove", node=spare)
        code, err = _finish(driver)
        assert code == 0, err[-3000:]
        assert harness.cmd(cmd="where", name=name)["node"] not in (None, spare)  # restarted
        store_url = str(load_study(path).store_url)
        _check_server(url, store_url, faults=1)
    assert _outcomes(store_url) == ["completed"]
    harness.restore()


def test_sigterm_is_an_interruption_that_fits_rays_stop_window(harness, tmp_path):
    with sim_server("--latency-ms", "100", *LIMITS) as url:
        path = _study(tmp_path / "c", url)
        driver = _driver(path, harness, tmp_path)
        _wait_answers(url, 60, driver)
        signalled = time.monotonic()
        driver.send_signal(signal.SIGTERM)
        code, err = _finish(driver, timeout=60)
        took = time.monotonic() - signalled
        assert code == 130, err[-3000:]
        assert took < 3.0, took  # inside RAY_JOB_STOP_WAIT_TIME_S's default of 3 s
        store_url = str(load_study(path).store_url)
        store = StudyStore.open(store_url)
        (run,) = list_manifests(store)
        stopped = read_manifest(store, run)
        assert stopped.outcome == "interrupted" and stopped.spend.usd > 0
        again = _driver(path, harness, tmp_path)
        code, err = _finish(again)
        assert code == 0, err[-3000:]
        _check_server(url, store_url, faults=1)
    assert _outcomes(store_url) == ["interrupted", "completed"]


def test_two_drivers_share_one_endpoints_limits(harness, tmp_path):
    slow_server = sim_server("--latency-ms", "500", "--max-concurrency", str(CONCURRENCY))
    with sim_server("--latency-ms", "100", *LIMITS) as url, slow_server as slow:
        # The second model on an endpoint whose 8 slots bound it (500 ms answers: 16 a second).
        two = {
            "endpoints.slow": {
                "kind": "sim",
                "base_url": slow,
                "max_concurrency": CONCURRENCY,
                "backoff_initial_s": 0.1,
                "backoff_max_s": 1.0,
            },
            "models": [
                {"id": "sim/strong", "endpoint": "sim"},
                {"id": "sim/weak", "endpoint": "slow"},
            ],
        }
        first = _study(tmp_path / "d1", url, study="first", **two)
        second = _study(tmp_path / "d2", url, study="second", **two)
        drivers = [_driver(path, harness, tmp_path / path.parent.name) for path in (first, second)]
        results = [_finish(driver) for driver in drivers]
        stats = sim_stats(url, window_s=60)
        slow_stats = sim_stats(slow)
        # Both drivers together: nothing over the RPM nor over the slots, which they filled.
        assert stats["over_limit"] == 0, stats
        assert slow_stats["over_limit"] == 0, slow_stats
        assert slow_stats["max_concurrent"] == CONCURRENCY
        for code, err in results:
            assert code == 0, err[-3000:]
        assert stats["max_concurrent"] <= CONCURRENCY
        assert stats["max_in_window"] <= RPM
        for path in (first, second):
            store_url = str(load_study(path).store_url)
            assert physical_rows(store_url) == CELLS
        # Nothing faulted: nothing paid twice.
        assert stats["ok"] + slow_stats["ok"] - 2 * CELLS == 0
        # A third driver declaring other limits for the same endpoint is refused, and the
        # running limiter keeps its own.
        other = _study(tmp_path / "d3", url, study="third", **{"endpoints.sim.max_concurrency": 4})
        code, err = _finish(_driver(other, harness, tmp_path / "d3"))
        assert code == 2, err[-3000:]
        assert "already runs with max_concurrency 8" in err and "max_concurrency 4" in err
    # The shared limiter outlives the jobs; `itemeval limiters` shows it and removes it.
    name = limiter_name(load_study(first).endpoints["sim"])
    listed = _limiters_cli(harness, "--json")
    assert any(entry["name"] == name for entry in listed), listed
    assert _limiters_cli(harness, "--remove", name, "--json") == {"removed": [name]}
    assert all(entry["name"] != name for entry in _limiters_cli(harness, "--json"))


def _limiters_cli(harness: Harness, *args: str) -> object:
    env = {**os.environ, **AUTH}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-m", "itemeval", "limiters", "--address", harness.address, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_workers_follow_the_cluster_as_nodes_join_and_leave(harness, tmp_path):
    """(e) Without `runtime.workers`, a node that joins mid-run gets a worker that takes
    shards; a worker whose node leaves is retired rather than left waiting for room."""
    harness.restore()
    with sim_server("--latency-ms", "100", *LIMITS) as url:
        path = _study(tmp_path / "e", url, **{"runtime.workers": None})
        driver = _driver(path, harness, tmp_path)
        _wait_answers(url, 40, driver)
        before = set(harness.cmd(cmd="busy")["nodes"])
        assert len(before) == 3  # one worker per CPU of the cluster
        added = harness.cmd(cmd="add")["added"]
        deadline = time.monotonic() + 60
        while added not in harness.cmd(cmd="busy")["nodes"]:
            assert driver.poll() is None, "the run ended before the new node got a worker"
            assert time.monotonic() < deadline, "no worker started on the new node in 60 s"
            time.sleep(0.2)
        harness.cmd(cmd="remove", node=sorted(before)[0])
        code, err = _finish(driver)
        assert code == 0, err[-3000:]
        assert f"started on node {added[:12]}" in err  # the user is told
        assert "retired: the cluster has no room for it" in err
        assert "failed" not in err
        store_url = str(load_study(path).store_url)
        _check_server(url, store_url, faults=1)
    assert _outcomes(store_url) == ["completed"]


def test_runtime_workers_is_a_ceiling_the_cluster_grows_into(harness, tmp_path):
    """(f) With `runtime.workers: 4` on three 1-CPU nodes, the fourth worker waits for room and
    starts on the first node that joins; a node joining after that gets none (4 is the most)."""
    harness.restore()
    with sim_server("--latency-ms", "100", *LIMITS) as url:
        slower = {"runtime.workers": 4, "endpoints.sim.requests_per_minute": RPM // 2}
        path = _study(tmp_path / "f", url, **slower)
        driver = _driver(path, harness, tmp_path)
        _wait_answers(url, 40, driver)
        before = set(harness.cmd(cmd="busy")["nodes"])
        assert len(before) == 3  # three workers placed, the fourth waiting for room
        first = harness.cmd(cmd="add")["added"]
        deadline = time.monotonic() + 60
        while first not in harness.cmd(cmd="busy")["nodes"]:
            assert driver.poll() is None, "the run ended before the waiting worker was placed"
            assert time.monotonic() < deadline, "the waiting worker did not start in 60 s"
            time.sleep(0.2)
        second = harness.cmd(cmd="add")["added"]
        time.sleep(3 * 2.0)  # three of the executor's looks at the cluster (every 2 s)
        assert driver.poll() is None, "the run ended before the check: make it longer"
        assert second not in harness.cmd(cmd="busy")["nodes"]  # no fifth worker
        code, err = _finish(driver)
        assert code == 0, err[-3000:]
        assert f"started on node {first[:12]}" in err
        assert "failed" not in err
        store_url = str(load_study(path).store_url)
        _check_server(url, store_url, faults=0)
    assert _outcomes(store_url) == ["completed"]
