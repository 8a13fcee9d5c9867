"""The numbers `itemeval status` shows, kept beside the store as derived data.

`status` prints the report's headline numbers (accuracy with its bootstrap interval, tiers and
rank intervals from the paired comparisons, costs). At ten million rows computing them is most
of a `status` call, and a user runs `status` again and again over a store that has not changed.
So `status` keeps what it printed (`<store>/analysis/status.json`) under a key of everything
the numbers are computed from, and answers from it while the key still holds:

* the store's rows: the name and size of every fragment of the partitions read (fragments are
  immutable and uniquely named; a run adds fragments, a compaction replaces them under new
  names, so any change to the rows changes the key);
* the study (its whole configuration, the selection: `--condition`, `--limit`), the datasets'
  fingerprints, the price table (the override file's bytes; the packaged one goes with the
  version) and itemeval's version.

The key is taken before the rows are read and again after; the numbers are kept only when both
agree (nothing was written meanwhile), in one atomic write. The file is derived data: a missing,
unreadable or stale one is computed again, a failed write costs the next call time, and
`ITEMEVAL_SUMMARIES=off` (every reader reads every row) neither reads nor writes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from itemeval import __version__
from itemeval.errors import ItemevalError
from itemeval.planning import Plan
from itemeval.storage import Location
from itemeval.store import GRADES, SOLUTIONS, summaries_enabled
from itemeval.store.fragments import list_fragments

KEPT_NUMBERS_FILE = "analysis/status.json"
_VERSION = 1


def numbers_key(plan: Plan) -> str:
    """What the numbers of `plan` are computed from, hashed (see the module doc)."""
    digest = hashlib.sha256()

    def add(*parts: object) -> None:
        digest.update(json.dumps(parts, default=str).encode())
        digest.update(b"\n")

    add(_VERSION, __version__, plan.store.root.url, plan.limit, plan.item_count)
    add(plan.study.model_dump_json())
    pricing = plan.study.pricing_path
    add(hashlib.sha256(pricing.read_bytes()).hexdigest() if pricing is not None else None)
    for dataset in plan.datasets:
        add(dataset.name, dataset.fingerprint)
    design = plan.design
    add(design.epochs, [c.id for c in design.generate], [c.id for c in design.grade])
    for stage, ids in ((SOLUTIONS, design.generate), (GRADES, design.grade)):
        for condition in ids:
            for info in list_fragments(plan.store.partition(stage, condition.id)):
                add(stage.name, condition.id, info.name, info.size)
    return digest.hexdigest()


def _location(plan: Plan) -> Location:
    return plan.store.root.join(*KEPT_NUMBERS_FILE.split("/"))


def kept_numbers(plan: Plan, key: str) -> dict[str, Any] | None:
    """The numbers kept under `key`, or None (none kept, another key, unreadable)."""
    if not summaries_enabled():
        return None
    try:
        kept = json.loads(_location(plan).read_bytes())
    except (OSError, ValueError, ItemevalError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != key:
        return None
    numbers = kept.get("numbers")
    return numbers if isinstance(numbers, dict) else None


def keep_numbers(plan: Plan, key: str, numbers: dict[str, Any]) -> None:
    """Keep `numbers` under `key` when the store still holds what the key was taken from."""
    if not summaries_enabled():
        return
    with contextlib.suppress(OSError, ItemevalError):
        if numbers_key(plan) != key:
            return  # written to meanwhile: these numbers may be of neither state
        location = _location(plan)
        location.parent().makedirs()
        location.write_atomic(json.dumps({"key": key, "numbers": numbers}).encode())
