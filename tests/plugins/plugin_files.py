"""Helpers of the plugin tests: study files over the sample datasets, and importable modules."""

from __future__ import annotations

import copy
import importlib
import textwrap
import uuid
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
