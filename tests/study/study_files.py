"""Writes small, valid study files (and their datasets) for the study tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / "configs" / "datasets"

BASE: dict[str, Any] = {
    "study": "golden",
    "datasets": [
        {"name": "arithmetic", "path": "datasets/arithmetic"},
        {"name": "science-mc", "path": "datasets/science-mc"},
    ],
    "endpoints": {"sim": {"kind": "sim", "requests_per_minute": 6000}},
    "models": [
        {"id": "sim/strong", "endpoint": "sim", "name": "strong"},
        {"id": "sim/weak", "endpoint": "sim", "name": "weak"},
    ],
    "sampling": {"temperature": 0.0, "max_tokens": 256},
    "facets": {
        "prompt": ["builtin:direct", "terse"],
        "model_config": [{"name": "t0"}, {"name": "t07", "temperature": 0.7}],
        "grader": ["judge"],
        "rubric": ["builtin:correctness"],
        "replications": 3,
    },
    "graders": {"judge": {"model": "sim/judge", "endpoint": "sim", "max_tokens": 300}},
    "budget": {"policy": "dev", "dev_items": 5},
}

TERSE = "{{ input }}\n\n{{ answer_instructions }} No explanations.\n"


def write_study(tmp: Path, data: dict[str, Any] | None = None, text: str | None = None) -> Path:
    """A study folder with the sample datasets symlinked and a local `terse` prompt."""
    (tmp / "datasets").mkdir(parents=True, exist_ok=True)
    for name in ("arithmetic", "science-mc", "capitals-short", "facts-tf"):
        link = tmp / "datasets" / name
        if not link.exists():
            link.symlink_to(DATASETS / name)
    (tmp / "prompts").mkdir(exist_ok=True)
    (tmp / "prompts" / "terse.txt").write_text(TERSE)
    path = tmp / "study.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(data or BASE, sort_keys=False))
    return path


def variant(**changes: Any) -> dict[str, Any]:
    """BASE with dotted-path changes applied, e.g. variant(**{"facets.replications": 0})."""
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is _DELETE:
            del node[last]
        elif last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value
    return data


_DELETE = object()
DELETE = _DELETE
