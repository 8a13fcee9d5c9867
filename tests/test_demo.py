"""`itemeval demo` as `make demo` runs it: local Ray, `itemeval sim-server`, the demo study;
a leaderboard with the three models in ability order; a second run has nothing left to do."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_demo_runs_and_reruns(tmp_path):
    env = {**os.environ, "ITEMEVAL_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("RAY_ADDRESS", None)
    command = [sys.executable, "-m", "itemeval", "demo", str(REPO / "configs" / "demo.yaml")]
    first = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert first.returncode == 0, first.stderr[-3000:]
    out = first.stdout
    assert "Done. generate: 2,088 ok" in out and "grade: 4,176 ok" in out
    ranked = re.findall(r"^\d+\s+\S+\s+(strong|medium|weak)\s", out, flags=re.MULTILINE)
    assert ranked[:2] == ["strong", "strong"] and ranked[-2:] == ["weak", "weak"]
    assert (tmp_path / "studies" / "demo" / "manifests").is_dir()

    again = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Nothing left to do" in again.stdout
