"""Helpers of the plugin tests: study files over the sample datasets, and importable modules."""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import importlib
import json
import subprocess
import sys
import textwrap
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / "configs" / "datasets"

BASE: dict[str, Any] = {
    "study": "plugins",
    "datasets": [
        {"name": "arithmetic", "path": str(DATASETS / "arithmetic")},
        {"name": "science-mc", "path": str(DATASETS / "science-mc")},
    ],
    "endpoints": {"sim": {"kind": "sim"}},
    "models": [{"id": "sim/strong", "endpoint": "sim", "name": "strong"}],
    "sampling": {"temperature": 0.0, "max_tokens": 256},
    "facets": {"prompt": ["builtin:direct"]},
    "budget": {"policy": "dev", "dev_items": 4},
}


def write_study(folder: Path, **changes: Any) -> Path:
    """BASE with dotted-path changes (`**{"facets.scorer": [...]}`) as `folder/study.yaml`."""
    data = copy.deepcopy(BASE)
    data["store"] = str(folder / "store")
    data["cache"] = {"location": str(folder / "cache")}
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def write_module(folder: Path, source: str, name: str | None = None) -> str:
    """`folder/<name>.py` with `source`; returns the module name (fresh unless given: plugins
    are cached per process by name). The caller puts `folder` on sys.path."""
    name = name or f"plug_{uuid.uuid4().hex[:10]}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    importlib.invalidate_caches()
    return name


@contextlib.contextmanager
def sim_server(*args: str) -> Iterator[str]:
    """`itemeval sim-server --port 0 ARGS` on 127.0.0.1; yields its root URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "itemeval.cli.sim", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"sim-server did not start: {line!r}")
        yield line.split("listening on", 1)[1].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def sim_stats(root: str) -> dict[str, Any]:
    """What the sim-server itself counted (`/_sim/stats`)."""
    with urllib.request.urlopen(f"{root}/_sim/stats", timeout=10) as response:
        return json.loads(response.read())


def write_wheel(
    folder: Path,
    distribution: str,
    version: str,
    files: dict[str, str],
    entry_points: dict[str, dict[str, str]],
) -> Path:
    """A pure-Python wheel (the zip `pip install` takes, PEP 427) with `files` (path -> text)
    and `entry_points` (group -> name -> `module:attribute`). Written by hand so that installing
    it needs no build backend and no network."""
    name = distribution.replace("-", "_")
    info = f"{name}-{version}.dist-info"
    groups = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in names.items()) + "\n"
        for group, names in entry_points.items()
    )
    contents = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: itemeval-tests\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": groups,
    }
    record = []
    for path, text in contents.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = "\n".join(record) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in contents.items():
            archive.writestr(path, text)
    return wheel
