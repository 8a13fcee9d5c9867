"""`itemeval sim-server` for the benchmarks: started on 127.0.0.1 (`--port 0`), and its counts.

    from sim_server import answered, sim_server, since, stats

`sim_server(*args)` starts `python -m itemeval.cli.sim --port 0 ARGS` (= `itemeval sim-server`)
for the duration of a `with` block and yields its base URL; `stats(url)` is its `/_sim/stats`,
`answered(url)` the successful answers in all and per model, `since(url, before)` those given
since `before`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def sim_server(*args: str) -> Iterator[str]:
    """`itemeval sim-server --port 0 ARGS` (127.0.0.1) for the duration; its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "itemeval.cli.sim", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening on http://127.0.0.1:"):
            raise RuntimeError(f"sim-server did not start: {line!r}")
        yield line.split("listening on ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def stats(url: str) -> dict[str, Any]:
    """The server's `/_sim/stats` (docs/providers.md documents every field)."""
    with urllib.request.urlopen(f"{url}/_sim/stats", timeout=10) as response:
        return json.loads(response.read())


def answered(url: str) -> dict[str, int]:
    """The server's successful answers so far, in all and per model."""
    now = stats(url)
    return {"all": now["ok"], **now["ok_by_model"]}


def since(url: str, before: dict[str, int]) -> dict[str, int]:
    """The successful answers given since `before` (an `answered` result), in all and per
    model; models that gave none are left out."""
    now = answered(url)
    return {k: v - before.get(k, 0) for k, v in now.items() if v - before.get(k, 0)}
