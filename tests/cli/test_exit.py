"""The command exits without the interpreter's teardown once its work is done (`cli.main.entry`):
what it printed is all there, through a pipe or a file, and the exit code is the command's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "demo.yaml"


def _itemeval(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "itemeval", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=180,
        # buffered output, as a user's shell gives it (this machine's environment unbuffers)
        env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
    )


def test_the_whole_output_arrives_through_a_pipe(tmp_path):
    result = _itemeval("estimate", str(DEMO), "--json", "--store", str(tmp_path / "s"))
    assert result.returncode == 0, result.stderr
    estimate = json.loads(result.stdout)  # complete: the last byte was flushed before the exit
    assert estimate


def test_the_whole_output_arrives_in_a_file(tmp_path):
    out = tmp_path / "out.json"
    with out.open("w") as handle:
        result = _itemeval(
            "estimate", str(DEMO), "--json", "--store", str(tmp_path / "s"), stdout=handle
        )
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())


def test_a_failing_command_keeps_its_exit_code_and_message(tmp_path):
    missing = tmp_path / "no-such-study.yaml"
    result = _itemeval("estimate", str(missing))
    assert result.returncode not in (0, 1), result.stderr  # a distinct code, not a crash
    assert "no-such-study.yaml" in result.stderr
    assert "Traceback" not in result.stderr
