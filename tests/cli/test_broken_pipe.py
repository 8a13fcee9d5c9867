"""Output piped into a command that stops reading early ends quietly, as Unix tools do: no
traceback, no "Exception ignored", exit code 141 (128 + SIGPIPE)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "demo.yaml"
SAMPLES = REPO / "configs" / "datasets"


def itemeval(*args: str) -> list[str]:
    return [sys.executable, "-m", "itemeval", *args]


@pytest.mark.parametrize(
    ("args", "codes"),
    [
        (("estimate", str(DEMO), "--json", "--store", "{tmp}"), {141}),
        (("plan", str(DEMO), "--store", "{tmp}"), {141}),
        (("validate", *(str(p) for p in sorted(SAMPLES.iterdir()))), {141}),
        (("--help",), {0, 141}),  # argparse itself ignores a failed write of its help
    ],
    ids=["estimate-json", "plan", "validate", "help"],
)
def test_a_reader_that_went_away_ends_the_command_quietly(args, codes, tmp_path):
    """stdout is a pipe whose reading end is already closed, so the first write fails
    (deterministically, whatever the size of the output)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            itemeval(*(a.format(tmp=tmp_path / "store") for a in args)),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
    finally:
        os.close(write_end)
    assert result.returncode in codes, result.stderr
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr
    assert "Exception ignored" not in result.stderr


@pytest.mark.skipif(shutil.which("head") is None, reason="needs the head command")
def test_estimate_json_piped_into_head(tmp_path):
    """The case from the field: `itemeval estimate configs/demo.yaml --json | head`."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # every write goes out at once: head wins
    command = " ".join(itemeval("estimate", str(DEMO), "--json", "--store", str(tmp_path / "s")))
    result = subprocess.run(
        ["bash", "-c", f'{command} | head -n 2; echo "status ${{PIPESTATUS[0]}}" >&2'],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert result.stdout.splitlines() == ["{", '  "items": 116,']
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] in ("status 141", "status 0")
