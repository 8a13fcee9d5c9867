"""`ITEMEVAL_TIMINGS`: marks are seconds since the process started, as a user timing it sees."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the process's start is read from /proc"
)

CHILD = """
import time
from itemeval.runtime._timeline import Timeline, _process_started_at
print(repr(_process_started_at()))
time.sleep(0.3)
timeline = Timeline()
timeline.mark("after the sleep")
timeline.report()
"""


def test_marks_count_from_the_moment_the_process_started() -> None:
    launched = time.time()
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        env={"ITEMEVAL_TIMINGS": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    ended = time.time()
    started = float(done.stdout.strip())
    # /proc counts in clock ticks (10 ms): never before the launch by more than one tick.
    assert launched - 0.02 <= started <= ended
    lines = done.stderr.splitlines()
    assert lines[0] == "timings since the process started:"
    at = float(lines[1].split()[0])
    assert 0.3 <= at <= ended - launched + 0.02
    assert lines[1].endswith("after the sleep")
