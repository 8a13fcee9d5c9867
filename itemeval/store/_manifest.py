"""Run manifests: `manifests/<run_id>.json`, what makes a run reproducible and what it did.

Written at the start of a run with exclusive creation (a run id is never reused) and rewritten
atomically at the end with how the run ended, what it spent and what it counted. Secrets never
appear: the config carries only environment variable names, and the JSON passes through
`itemeval.secrets.redact` before it is written, so a key that leaked into an error message is
masked here too.
"""

from __future__ import annotations

import json
import platform
import socket
import sys
from datetime import UTC, datetime
from importlib import metadata
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from itemeval.errors import Problem, StoreError
from itemeval.ids import new_sortable_id
from itemeval.secrets import redact
from itemeval.storage import Location
from itemeval.store._layout import StudyStore

RunOutcome = Literal["running", "completed", "interrupted", "budget_cap", "failed", "gate_declined"]
MANIFEST_SUFFIX = ".json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DatasetRecord(_Model):
    """A dataset as the run used it."""

    name: str
    fingerprint: str  # content hash of the items (see itemeval.datasets._locks)
    revision: str | None = None  # e.g. a Hugging Face commit, when the source has one
    source: str | None = None  # the URL or hub id it was read from
    items: int | None = None


class ConditionRecord(_Model):
    """One condition of the grid: its id, slug and the payload its id hashes."""

    id: str
    stage: Literal["generate", "grade"]
    slug: str
    payload: dict[str, Any]
    requested_params: dict[str, Any] = Field(default_factory=dict)
    effective_params: dict[str, Any] | None = None  # what the provider reported back, if known


class EstimateRecord(_Model):
    """The estimate the run was approved under."""

    usd: float
    input_tokens: int = 0
    output_tokens: int = 0
    cells: int = 0
    approved_by: str | None = None  # "below-threshold" | "--yes" | "prompt" | ...
    by_stage: dict[str, Any] = Field(default_factory=dict)


class SpendRecord(_Model):
    """What the run actually spent.

    `usd` is every dollar the providers were paid during the run, as the workers reported it to
    the run's ledger, also for shards that failed afterwards; `unstored_usd` is the part of it
    whose rows this run did not write (a failed or interrupted shard: those answers are in the
    response cache, and a re-dispatch or a re-run stores them as cached rows, `usd = 0`).
    """

    usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cache_hits: int = 0
    unstored_usd: float = 0.0
    max_usd: float | None = None  # the cap the run ran under (what max_usd and study_max_usd left)
    study_usd_before: float | None = None  # under study_max_usd: the study's spend before the run
    study_max_usd: float | None = None
    not_sent: int = 0  # calls not sent because their worst case did not fit under max_usd


class StageCounts(_Model):
    """Cells of one stage in this run."""

    planned: int = 0
    done: int = 0
    errors: int = 0
    cached: int = 0
    parse_failures: int = 0


class CompactionRecord(_Model):
    """What the run's compaction of the partitions it wrote did (`runtime.compact`)."""

    enabled: bool = True
    #: "compacted" | "skipped" (interrupted, off, the store failed) | "failed" | "running"
    #: (written so while the run's end compacts: the outcome above is final already).
    status: str = "compacted"
    reason: str | None = None  # why it was skipped or failed
    partitions: int = 0  # partitions compacted, while the run went and at its end
    fragments_merged: int = 0
    fragments_written: int = 0
    rows_written: int = 0
    seconds: float = 0.0  # spent compacting, in the driver's thread and at the end
    end_seconds: float = 0.0  # of it, at the end (the run waited for it)
    failed: list[str] = Field(default_factory=list)  # partitions whose compaction failed, why
    left: int = 0  # partitions the run wrote and did not compact (skipped or failed)


class HostRecord(_Model):
    hostname: str
    platform: str
    python: str
    ray_address: str | None = None


class RunManifest(_Model):
    """Everything a run records about itself (`/work/shared/design.md`, "Manifest")."""

    format: Literal["itemeval-manifest/1"] = "itemeval-manifest/1"
    run_id: str = Field(default_factory=new_sortable_id)
    study: str
    command: str  # e.g. "run", "generate", "grade"
    argv: list[str] = Field(default_factory=list)
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    ended_at: datetime | None = None
    outcome: RunOutcome = "running"
    error: str | None = None  # what ended a failed run
    config_hash: str
    datasets: list[DatasetRecord] = Field(default_factory=list)
    prompt_hashes: dict[str, str] = Field(default_factory=dict)  # template name -> content hash
    rubric_hashes: dict[str, str] = Field(default_factory=dict)
    models: list[str] = Field(default_factory=list)
    conditions: list[ConditionRecord] = Field(default_factory=list)
    seeds: dict[str, int] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=lambda: package_versions())
    estimate: EstimateRecord | None = None
    spend: SpendRecord = Field(default_factory=SpendRecord)
    counts: dict[str, StageCounts] = Field(default_factory=dict)  # "generate" / "grade"
    compaction: CompactionRecord | None = None  # None: a run before runs compacted
    host: HostRecord = Field(default_factory=lambda: host_record())

    def finished(self, outcome: RunOutcome, *, error: str | None = None) -> RunManifest:
        """A copy marked as ended now with `outcome`."""
        return self.model_copy(
            update={"outcome": outcome, "ended_at": datetime.now(UTC), "error": error}
        )


def package_versions() -> dict[str, str]:
    """Versions of itemeval and the packages that decide results (absent ones omitted)."""
    versions = {"python": platform.python_version()}
    for name in ("itemeval", "ray", "pyarrow", "pydantic", "fsspec", "s3fs", "aiohttp"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def host_record(ray_address: str | None = None) -> HostRecord:
    return HostRecord(
        hostname=socket.gethostname(),
        platform=platform.platform(),
        python=sys.version.split()[0],
        ray_address=ray_address,
    )


def manifest_location(store: StudyStore, run_id: str) -> Location:
    if "/" in run_id or run_id.startswith("."):
        raise StoreError(Problem(f"{run_id!r} is not a run id", field="run_id"))
    return store.manifests.join(run_id + MANIFEST_SUFFIX)


def _encode(manifest: RunManifest) -> bytes:
    return redact(manifest.model_dump_json(indent=2)).encode("utf-8")


def write_manifest_start(store: StudyStore, manifest: RunManifest) -> Location:
    """Create `manifests/<run_id>.json`; a run id that exists already is a `StoreError`."""
    location = manifest_location(store, manifest.run_id)
    if not location.create_exclusive(_encode(manifest)):
        raise StoreError(Problem("a manifest with this run id exists already", file=location.url))
    return location


def write_manifest_end(store: StudyStore, manifest: RunManifest) -> Location:
    """Rewrite the run's manifest atomically (at the end of the run, or to update counts)."""
    location = manifest_location(store, manifest.run_id)
    location.write_atomic(_encode(manifest))
    return location


def list_manifests(store: StudyStore) -> list[str]:
    """Run ids with a manifest, oldest first (run ids sort by time)."""
    store.manifests.invalidate()
    return [
        name[: -len(MANIFEST_SUFFIX)]
        for name in store.manifests.listdir()
        if name.endswith(MANIFEST_SUFFIX) and not name.startswith((".", "_"))
    ]


def read_manifest(store: StudyStore, run_id: str) -> RunManifest:
    location = manifest_location(store, run_id)
    try:
        text = location.read_text()
    except FileNotFoundError:
        raise StoreError(
            Problem("no such manifest", file=location.url, hint="see list_manifests()")
        ) from None
    try:
        return RunManifest.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        raise StoreError(Problem(f"not a valid run manifest: {exc}", file=location.url)) from exc


def latest_manifest(store: StudyStore) -> RunManifest | None:
    runs = list_manifests(store)
    return read_manifest(store, runs[-1]) if runs else None


class RunsSpend(_Model):
    """What every run of a study recorded spending (for `itemeval status`)."""

    runs: int = 0
    usd: float = 0.0  # every dollar the runs' ledgers counted
    unstored_usd: float = 0.0  # the part spent on answers later stored from the response cache
    unfinished: int = 0  # runs whose manifest never recorded an end (killed, or still running)
    unfinished_usd: float = 0.0  # what the rows those runs wrote cost
    last_usd: float = 0.0  # what the latest run spent
    study_max_usd: float | None = None  # the study's cap, when it has one

    @property
    def study_usd(self) -> float:
        """Everything the store records as spent: the runs' ledgers, and the rows of runs that
        never recorded an end (what `budget.study_max_usd` caps)."""
        return self.usd + self.unfinished_usd


def runs_spend(store: StudyStore) -> RunsSpend:
    """The spend every run recorded in its manifest, summed; for a run whose manifest never
    recorded an end, what its stored rows cost (its ledger's figure was never written)."""
    total = RunsSpend()
    unfinished: list[str] = []
    for run_id in list_manifests(store):
        manifest = read_manifest(store, run_id)
        total.runs += 1
        if manifest.outcome == "running":
            total.unfinished += 1
            unfinished.append(run_id)
        total.usd += manifest.spend.usd
        total.last_usd = manifest.spend.usd
        total.unstored_usd += manifest.spend.unstored_usd
    if unfinished:
        total.unfinished_usd = _rows_usd(store, unfinished)
    return total


def _rows_usd(store: StudyStore, run_ids: list[str]) -> float:
    """What the rows that `run_ids` wrote cost (solutions and grades, read without dedup). Each
    fragment is cut to those runs' dollars as it is read, so memory holds one fragment's two
    columns, never the store's."""
    wanted = pa.array(run_ids, pa.string())

    def theirs(rows: pa.Table) -> pa.Table:
        return rows.filter(pc.is_in(rows.column("run_id"), value_set=wanted)).select(["usd"])

    usd = 0.0
    for stage in ("solutions", "grades"):
        tables = store.read_by_condition(
            stage, store.condition_ids(stage), ["run_id", "usd"], dedup=False, reduce=theirs
        )
        usd += sum(float(pc.sum(t.column("usd")).as_py() or 0.0) for t in tables.values())
    return usd
