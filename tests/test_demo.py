"""`itemeval demo` as `make demo` runs it: local Ray, `itemeval sim-server`, the demo study;
a leaderboard with the three models in ability order; no process of its Ray outlives the
command; a second run has nothing left to do."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def processes_naming(marker: str) -> list[str]:
    """Command lines of the live processes that name `marker` (Ray's name their session
    directory, under RAY_TMPDIR)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(cmdline[:160])
    return found


@pytest.fixture
def ray_tmp() -> Iterator[str]:
    """A short directory of the test's own for Ray's session: Unix socket paths are limited in
    length, and no other Ray of this test session may name it."""
    folder = tempfile.mkdtemp(prefix="ie-demo-ray-", dir="/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_demo_runs_and_reruns(tmp_path, ray_tmp, monkeypatch):
    env = {**os.environ, "ITEMEVAL_CACHE_DIR": str(tmp_path / "cache"), "RAY_TMPDIR": ray_tmp}
    env.pop("RAY_ADDRESS", None)
    command = [sys.executable, "-m", "itemeval", "demo", str(REPO / "configs" / "demo.yaml")]
    first = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert first.returncode == 0, first.stderr[-3000:]
    out = first.stdout
    assert "Done. generate: 2,088 ok" in out and "grade: 8,352 ok" in out  # 3 judges, a scorer
    assert "panel: jury (majority of judge, judge-medium, judge-weak)" in out  # no calls of its own
    # tier, rank interval, condition, model
    ranked = re.findall(r"^\s*\d+\s+\S+\s+\S+\s+(strong|medium|weak)\s", out, flags=re.MULTILINE)
    assert ranked[:2] == ["strong", "strong"] and ranked[-2:] == ["weak", "weak"]
    # strong_cot and strong_direct cannot be told apart: one tier, the same rank interval
    assert re.search(r"^\s*1\s+1-2\s+strong_cot\S*\s", out, flags=re.MULTILINE)
    assert re.search(r"^\s*1\s+1-2\s+strong_direct\S*\s", out, flags=re.MULTILINE)
    assert re.search(r"not distinguishable: .*strong_\w+ ~ strong_\w+", out)
    assert (tmp_path / "studies" / "demo" / "manifests").is_dir()
    assert "on Ray workers" in out  # the demo asks for local Ray: it ran and must be gone
    # The command leaves its local Ray to end with its process (no `ray.shutdown()`): every
    # daemon and worker of that Ray must be gone within seconds of the command's exit.
    if os.path.isdir("/proc"):
        deadline = time.monotonic() + 15
        while processes_naming(ray_tmp) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not processes_naming(ray_tmp), "Ray outlived the command"

    again = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Nothing left to do" in again.stdout
    # The report shows the panel and the judges calibrated against the scorer as gold (in
    # this process: `itemeval report` computes the same).
    from itemeval import Study

    monkeypatch.chdir(tmp_path)
    report = Study.from_yaml(REPO / "configs" / "demo.yaml").report(resamples=200)
    markdown = Path(report.markdown).read_text()
    judges = markdown.split("## Judges", 1)[1].split("\n## ", 1)[0]
    assert "Gold: scorer auto (2,088 answers)" in judges
    corrected = r"\| judge: judge \(sim/judge, rubric correctness\) \| all answers \| [\d,]+ \| "
    assert re.search(corrected + r"0\.\d+ \[0\.\d+, 0\.\d+\] \| 0\.\d+ \[", judges), judges
    assert "effective independent judges" in judges
