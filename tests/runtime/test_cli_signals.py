"""`itemeval run` as a user runs it (its own local Ray): Ctrl-C stops it cleanly (exit 130,
manifest `interrupted`), a SIGKILL just kills it, and the same command finishes the study."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from runtime_files import assert_complete, write_study

from itemeval.store import StudyStore, list_manifests, read_manifest

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _start(path, env):
    return subprocess.Popen(
        [sys.executable, "-m", "itemeval", "run", str(path), "--yes"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_rows(store: StudyStore, proc: subprocess.Popen, minimum: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        ids = store.condition_ids("solutions")
        if ids and store.read("solutions", ids, ["item_id"], dedup=False).num_rows >= minimum:
            return
        time.sleep(0.2)
    raise AssertionError("no progress within 120 s")


def test_ctrl_c_and_sigkill_then_the_same_command_finishes(tmp_path):
    path = write_study(
        tmp_path,
        **{
            "endpoints.sim.sim": {"latency": {"median_ms": 150}},
            "endpoints.sim.max_concurrency": 8,
            "runtime.shard_size": 8,
        },
    )
    env = {**os.environ, "ITEMEVAL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("RAY_ADDRESS", None)
    store = StudyStore.open(str(tmp_path / "store"))

    interrupted = _start(path, env)
    _wait_for_rows(store, interrupted, 8)
    interrupted.send_signal(signal.SIGINT)
    out, err = interrupted.communicate(timeout=60)
    assert interrupted.returncode == 130, err[-2000:]
    assert "Interrupted" in out

    killed = _start(path, env)
    before = store.read("solutions", None, ["item_id"], dedup=False).num_rows
    _wait_for_rows(store, killed, before + 8)
    killed.kill()
    killed.communicate(timeout=30)

    finished = _start(path, env)
    out, err = finished.communicate(timeout=300)
    assert finished.returncode == 0, err[-2000:]
    assert "Done." in out
    assert "Token authentication" not in err  # a local run says nothing about Ray's auth

    outcomes = [read_manifest(store, run).outcome for run in list_manifests(store)]
    assert outcomes == ["interrupted", "running", "completed"]  # the killed run never ended
    assert_complete(str(tmp_path / "store"), generate=4, grade=2, epochs=2, items=24)
