"""Two driver processes at once, and a writer killed mid-run: nothing lost, nothing doubled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa

from itemeval.store import StudyStore, pending_generate

WRITER = Path(__file__).with_name("store_writer.py")


def _writer(root: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), root, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    return out


def _keys(table: pa.Table) -> list[tuple[str, str, int]]:
    return list(
        zip(
            table["condition_id"].to_pylist(),
            table["item_id"].to_pylist(),
            table["epoch"].to_pylist(),
            strict=True,
        )
    )


def test_two_drivers_at_once_lose_and_duplicate_nothing(store: StudyStore) -> None:
    args = ["--conditions", "c1,c2", "--items", "150", "--epochs", "2", "--chunk", "25"]
    first = _writer(store.root.url, *args, "--run-id", "driver-1")
    second = _writer(store.root.url, *args, "--run-id", "driver-2")
    _finish(first)
    _finish(second)

    expected = {(c, f"item-{i:05d}", e) for c in ("c1", "c2") for i in range(150) for e in (0, 1)}
    # Physical truth first: every cell is on disk, and each driver wrote it at most once.
    physical = store.read_solutions(["c1", "c2"], dedup=False)
    physical_keys = _keys(physical)
    assert set(physical_keys) == expected  # nothing lost
    by_run = [
        (key, run) for key, run in zip(physical_keys, physical["run_id"].to_pylist(), strict=True)
    ]
    assert len(by_run) == len(set(by_run)) and 600 <= physical.num_rows <= 1200
    # Then the reader: one logical row per key, whatever both drivers wrote.
    logical = _keys(store.read_solutions(["c1", "c2"]))
    assert len(logical) == 600 and set(logical) == expected
    items = pa.array([f"item-{i:05d}" for i in range(150)])
    assert pending_generate(store, ["c1", "c2"], items, 2).num_rows == 0


def test_killed_writer_leaves_no_partial_fragment_and_a_rerun_completes(
    store: StudyStore,
) -> None:
    args = ["--conditions", "c1", "--items", "2000", "--chunk", "50", "--text-bytes", "3000"]
    proc = _writer(store.root.url, *args, "--pause", "0.01", "--run-id", "doomed")
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    fragments_seen = 0
    while fragments_seen < 5 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else "writer exited"
        if line.startswith("fragment"):
            fragments_seen += 1
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    # The store reads cleanly: only whole fragments, whatever the writer was doing when killed.
    table = store.read_solutions(["c1"], dedup=False)  # physical rows: one writer, no repeats
    rows = table.num_rows
    assert 250 <= rows < 2000
    assert rows % 50 == 0
    assert len(set(table["item_id"].to_pylist())) == rows
    fragments = store.fragments("solutions", "c1")
    assert sum(1 for _ in fragments) == rows // 50

    items = pa.array([f"item-{i:05d}" for i in range(2000)])
    assert pending_generate(store, ["c1"], items, 1).num_rows == 2000 - rows

    out = _finish(_writer(store.root.url, *args, "--run-id", "rerun"))
    assert f"pending {2000 - rows}" in out
    final = store.read_solutions(["c1"], dedup=False)
    assert sorted(final["item_id"].to_pylist()) == items.to_pylist()  # each item exactly once
    assert pending_generate(store, ["c1"], items, 1).num_rows == 0
    assert set(final["run_id"].to_pylist()) == {"doomed", "rerun"}
