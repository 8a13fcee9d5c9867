"""Fixtures of the provider tests: `itemeval sim-server` started as a real subprocess.

The servers are started as `python -m itemeval.cli.sim` (the same command without the other
command groups, so a half-finished module elsewhere in the CLI cannot stop these tests);
`test_provider_sim_server.py` checks the `itemeval sim-server` root command separately.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The wire-format helper server lives next to the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))


class SimServerProcess:
    def __init__(self, args: list[str]):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "itemeval.cli.sim", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("listening on http://127.0.0.1:"):
                break
            if not line and self.proc.poll() is not None:
                break
        else:
            line = ""
        if not line.startswith("listening on "):
            self.stop()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"sim-server did not start: {line!r} {err[-2000:]}")
        self.url = line.split("listening on ", 1)[1].strip()
        self.port = int(self.url.rsplit(":", 1)[1])

    def stats(self) -> dict:
        import json
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/_sim/stats", timeout=10) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def start_sim_server() -> Iterator[Callable[..., SimServerProcess]]:
    """Start `itemeval sim-server --port 0 ARGS...`; every server is stopped after the test."""
    started: list[SimServerProcess] = []

    def start(*args: str) -> SimServerProcess:
        server = SimServerProcess(list(args))
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def start_module_sim_server() -> Iterator[Callable[..., SimServerProcess]]:
    """Like `start_sim_server`, for servers that a whole test module shares."""
    started: list[SimServerProcess] = []

    def start(*args: str) -> SimServerProcess:
        server = SimServerProcess(list(args))
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def sim_server() -> Iterator[SimServerProcess]:
    """One plain sim-server (1 ms latency) shared by a test module."""
    server = SimServerProcess(["--latency-ms", "1"])
    yield server
    server.stop()
