"""Stores in Python, without a study file: compact them (`itemeval compact`) and import other
tools' results into them (`itemeval import`); docs/python-api.md.

    compaction = itemeval.compact_store("studies/demo", stage="solutions")
    [(p.stage, p.condition_id, p.duplicates_dropped) for p in compaction.partitions]
    itemeval.import_sources("studies/imported", ["logs/"], strict=False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from itemeval.errors import StoreError
from itemeval.store import STAGES, CompactionResult, StudyStore, compact, rebuild_summaries

if TYPE_CHECKING:
    from itemeval.importing import ImportResult

#: The stages `compact_store(stage=...)` accepts (default: solutions and grades).
COMPACT_STAGES: tuple[str, ...] = tuple(sorted(STAGES))


@dataclass(frozen=True)
class StoreCompaction:
    """What `compact_store` did: the store's URL and, per partition (stage x condition) it
    looked at, a `CompactionResult` (`fragment_written` is None when it was already compact)."""

    store: str
    partitions: list[CompactionResult]


def compact_store(
    url: str,
    *,
    stage: str | Sequence[str] | None = None,
    condition: str | Sequence[str] | None = None,
    full: bool = False,
) -> StoreCompaction:
    """Merge the small fragments of each partition of the store at `url` (and those its
    summary does not cover) into one file holding the best row of each key, write the
    partition's summary, then remove exactly the fragments that were merged. Safe while runs
    write to and read from the store. `stage`: only these stages (default: solutions and
    grades); `condition`: only conditions matching these ids, id prefixes, slugs or globs;
    `full`: merge every fragment, large ones too."""
    store = _existing_store(url)
    stages = [stage] if isinstance(stage, str) else stage
    conditions = [condition] if isinstance(condition, str) else condition
    results = compact(store, stages=stages or None, conditions=conditions or None, full=full)
    return StoreCompaction(store=store.root.url, partitions=results)


def _existing_store(url: str) -> StudyStore:
    """The store at `url`, or a `StoreError` saying what `url` is instead (a study file, a
    path that holds nothing): compaction rewrites partitions, so it never guesses."""
    store = StudyStore.open(url)
    root = store.root
    if root.isdir():
        return store
    what = "a file" if root.exists() else "nothing"
    raise StoreError(
        f"{url}: no study store here ({what}; a store holds solutions/ and grades/ folders)",
        hint="pass the store's URL or path, the study file's `store:` (not the study file)",
    )


@dataclass(frozen=True)
class SummaryRebuild:
    """What `rebuild_store_summaries` wrote: `(stage, condition id, cells)` per partition."""

    store: str
    partitions: list[tuple[str, str, int]]


def rebuild_store_summaries(
    url: str,
    *,
    stage: str | Sequence[str] | None = None,
    condition: str | Sequence[str] | None = None,
) -> SummaryRebuild:
    """Write each partition's summary again from its rows (`itemeval compact
    --rebuild-summaries`). Summaries are derived data: no row changes."""
    store = _existing_store(url)
    stages = [stage] if isinstance(stage, str) else stage
    conditions = [condition] if isinstance(condition, str) else condition
    rebuilt = rebuild_summaries(store, stages=stages or None, conditions=conditions or None)
    return SummaryRebuild(store=store.root.url, partitions=rebuilt)


def import_sources(
    store: str,
    sources: str | Sequence[str],
    *,
    strict: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> ImportResult:
    """Import Every Eval Ever records and lm-eval, inspect_ai and HELM logs (files or folders)
    into the store at `store` (docs/importing.md); `strict`: refuse the whole import
    (`ImportRefused`, nothing written) at the first record it would reject."""
    from itemeval.importing import import_sources as run_import

    chosen = [sources] if isinstance(sources, str) else list(sources)
    return run_import(store, chosen, strict=strict, storage_options=storage_options)
