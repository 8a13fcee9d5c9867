"""`dataset_locks.json`: each dataset of a study pinned at first use, changed data refused.

At the study root (any fsspec URL) the lock file records, per dataset name, the fingerprint of
its content (file hashes and mapping hash, or a Hub revision), its format and path, and when it
was pinned. Every later run compares the datasets with their pins:

* same fingerprint: nothing to do;
* a new dataset: pinned;
* changed data: `DatasetChangedError` (exit code 2) saying which dataset, what changed (old and
  new fingerprint, the files added, removed or modified, the mapping, the revision) and how to
  accept it deliberately: `accept_changed={"name"}` (the CLI's `--accept-dataset-change NAME`)
  re-pins the dataset and keeps the old pin in its `history`.

The file is created with `Location.create_exclusive`, so when two drivers pin at once only one
creation wins and the other re-reads and compares against it; updates are `write_atomic`.
`check_pins` does the comparison without writing (for `plan` and `estimate`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from itemeval.datasets.adapters import DatasetHandle, Fingerprint
from itemeval.errors import ConfigError, DatasetChangedError, Problem, StoreError
from itemeval.storage import Location, resolve

LOCK_FILE = "dataset_locks.json"
LOCK_VERSION = 1
_MAX_ATTEMPTS = 5


class PreviousPin(BaseModel):
    """A pin that was replaced on purpose (`accept_changed`)."""

    model_config = ConfigDict(extra="forbid")

    fingerprint: str
    pinned_at: str
    replaced_at: str
    files: dict[str, str] = Field(default_factory=dict)
    mapping: str | None = None
    revision: str | None = None


class DatasetPin(BaseModel):
    """What one dataset was when it was pinned."""

    model_config = ConfigDict(extra="forbid")

    fingerprint: str
    format: str
    path: str
    pinned_at: str
    files: dict[str, str] = Field(default_factory=dict)
    mapping: str | None = None
    revision: str | None = None
    history: list[PreviousPin] = Field(default_factory=list)


class DatasetLocks(BaseModel):
    """The whole `dataset_locks.json`."""

    model_config = ConfigDict(extra="forbid")

    version: int = LOCK_VERSION
    datasets: dict[str, DatasetPin] = Field(default_factory=dict)

    def to_json(self) -> bytes:
        text = json.dumps(
            self.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False
        )
        return (text + "\n").encode("utf-8")


def read_locks(
    root: Location | str, storage_options: dict[str, Any] | None = None
) -> DatasetLocks | None:
    """The lock file under `root`, or None if there is none yet."""
    location = _lock_location(root, storage_options)
    location.invalidate()
    try:
        data = location.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return DatasetLocks.model_validate(json.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
        raise StoreError(
            Problem(
                f"the dataset lock file is not valid: {str(exc).splitlines()[0]}",
                file=location.url,
                hint="restore it (e.g. from version control); deleting it re-pins every "
                "dataset to its current content",
            )
        ) from None


def check_pins(
    root: Location | str,
    handles: Sequence[DatasetHandle],
    *,
    accept_changed: Iterable[str] = (),
    storage_options: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> DatasetLocks:
    """What `pin_datasets` would write, without writing anything (for plans and estimates).
    Raises `DatasetChangedError` exactly when `pin_datasets` would."""
    accept = _checked_accept(accept_changed, handles)
    location = _lock_location(root, storage_options)
    stamp = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    existing = read_locks(location)
    return _merge(existing or DatasetLocks(), handles, accept, stamp, location.url)


def pin_datasets(
    root: Location | str,
    handles: Sequence[DatasetHandle],
    *,
    accept_changed: Iterable[str] = (),
    storage_options: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> DatasetLocks:
    """Compare `handles` with their pins under `root`, pin new datasets, and re-pin those named
    in `accept_changed`. Raises `DatasetChangedError` (listing every changed dataset) and writes
    nothing if any dataset changed without being accepted."""
    accept = _checked_accept(accept_changed, handles)
    location = _lock_location(root, storage_options)
    stamp = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    for _ in range(_MAX_ATTEMPTS):
        existing = read_locks(location)
        updated = _merge(existing or DatasetLocks(), handles, accept, stamp, location.url)
        if existing is None:
            if location.create_exclusive(updated.to_json()):
                return updated
            continue  # another driver pinned first: compare against what it wrote
        if updated != existing:
            location.write_atomic(updated.to_json())
        return updated
    raise StoreError(
        Problem(
            "the lock file keeps changing under us; is another driver re-pinning?",
            file=location.url,
        )
    )


def _checked_accept(accept_changed: Iterable[str], handles: Sequence[DatasetHandle]) -> set[str]:
    accept = set(accept_changed)
    names = {handle.name for handle in handles}
    unknown = sorted(accept - names)
    if unknown:
        raise ConfigError(
            Problem(
                f"--accept-dataset-change names {', '.join(map(repr, unknown))}, which is not "
                f"a dataset of this study (datasets: {', '.join(sorted(names))})",
                field="accept_changed",
            )
        )
    return accept


def _merge(
    locks: DatasetLocks,
    handles: Sequence[DatasetHandle],
    accept: set[str],
    stamp: str,
    lock_url: str,
) -> DatasetLocks:
    datasets = dict(locks.datasets)
    problems: list[Problem] = []
    for handle in handles:
        current = handle.fingerprint_details()
        pin = datasets.get(handle.name)
        if pin is None:
            datasets[handle.name] = _new_pin(handle, current, stamp, history=[])
            continue
        if pin.fingerprint == current.digest:
            if (pin.path, pin.format) != (handle.url, handle.format):  # moved, same content
                datasets[handle.name] = pin.model_copy(
                    update={"path": handle.url, "format": handle.format}
                )
            continue
        if handle.name in accept:
            previous = PreviousPin(
                fingerprint=pin.fingerprint,
                pinned_at=pin.pinned_at,
                replaced_at=stamp,
                files=pin.files,
                mapping=pin.mapping,
                revision=pin.revision,
            )
            datasets[handle.name] = _new_pin(
                handle, current, stamp, history=[*pin.history, previous]
            )
            continue
        problems.append(_change_problem(handle, pin, current, lock_url))
    if problems:
        raise DatasetChangedError(problems)
    return DatasetLocks(version=LOCK_VERSION, datasets=datasets)


def _new_pin(
    handle: DatasetHandle, current: Fingerprint, stamp: str, history: list[PreviousPin]
) -> DatasetPin:
    return DatasetPin(
        fingerprint=current.digest,
        format=handle.format,
        path=handle.url,
        pinned_at=stamp,
        files=dict(current.files),
        mapping=current.mapping,
        revision=current.revision,
        history=history,
    )


def describe_change(pin: DatasetPin, current: Fingerprint) -> list[str]:
    """What differs between a pin and the current content, as short phrases."""
    changes: list[str] = []
    added = sorted(set(current.files) - set(pin.files))
    removed = sorted(set(pin.files) - set(current.files))
    modified = sorted(
        n for n in set(pin.files) & set(current.files) if pin.files[n] != current.files[n]
    )
    if modified:
        changes.append("modified files: " + ", ".join(modified))
    if added:
        changes.append("new files: " + ", ".join(added))
    if removed:
        changes.append("files gone: " + ", ".join(removed))
    if pin.mapping != current.mapping:
        changes.append("the mapping changed")
    if pin.revision != current.revision:
        changes.append(f"revision {pin.revision} -> {current.revision}")
    return changes or ["the content changed"]


def _change_problem(
    handle: DatasetHandle, pin: DatasetPin, current: Fingerprint, lock_url: str
) -> Problem:
    changes = "; ".join(describe_change(pin, current))
    return Problem(
        f"dataset {handle.name!r} ({handle.url}) changed since it was pinned at "
        f"{pin.pinned_at}: fingerprint {pin.fingerprint[:16]} -> {current.digest[:16]} "
        f"({changes}). Results stored so far were computed on the pinned data",
        file=lock_url,
        hint=f"to use the new data deliberately, run again with --accept-dataset-change "
        f"{handle.name} (the old pin is kept in the lock's history); otherwise restore the "
        "pinned data",
    )


def _lock_location(root: Location | str, storage_options: dict[str, Any] | None) -> Location:
    base = root if isinstance(root, Location) else resolve(root, storage_options)
    return base if base.path.endswith(LOCK_FILE) else base.join(LOCK_FILE)
