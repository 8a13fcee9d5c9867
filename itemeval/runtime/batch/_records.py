"""Batch records: what the study's store knows of each batch, written before anything is paid.

    batches/<local id>/cells.parquet        its cells and their requests (`CELL_SCHEMA`), first
    batches/<local id>/owner-000001.json    who works on it: created exclusively, one at a time
    batches/<local id>/state.json           where it is (`BatchRecord`), rewritten atomically
    batches/<local id>.final                once it is collected or abandoned: listings skip it

A record moves `prepared` (cells recorded, nothing sent) -> `submitted` (the provider's batch id
is known) -> `collected` (rows written, final), or -> `abandoned` (final: the provider refused it,
or a record found no batch it could prove its own). Its owner touches it at least every
`HEARTBEAT_S`; a record whose owner stopped touching it for `LEASE_S` (or whose owner was a
process of this host that is gone, or that released it on a clean stop) may be taken over by
another driver: it creates the next owner file exclusively, so only one can (`BatchLog.adopt`).
Cells of an open record are the batch's: no other run calls them, live or in a batch.

Plain Python over `itemeval.storage.Location` (local disk or an object store).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from itemeval.errors import Problem, StoreError
from itemeval.storage import Location
from itemeval.store.fragments import encode_fragment, read_parquet_file

BATCHES_DIR = "batches"
#: The owner of an open record touches it at least this often.
HEARTBEAT_S = 20.0
#: A record untouched for this long may be taken over (its owner is presumed gone).
LEASE_S = 120.0
#: ... when its owner is a live process of this host (hung, say), after this long.
LOCAL_LEASE_S = 1200.0

RecordState = Literal["prepared", "submitted", "collected", "abandoned"]
FINAL_STATES = frozenset({"collected", "abandoned"})
FINAL_SUFFIX = ".final"

#: One row per cell of a batch. `request` is the request's index in the batch (its custom id is
#: `<local id>-<request>`); cells with the same request key share one request (the first is the
#: one that pays). Grade cells also name the solution they judge and the fragment it is in.
CELL_SCHEMA = pa.schema(
    [
        pa.field("request", pa.int32(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("epoch", pa.int32(), nullable=False),
        pa.field("request_hash", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("fingerprint", pa.string(), nullable=False),
        pa.field("part", pa.int32(), nullable=False),
        pa.field("gen_condition_id", pa.string()),
        pa.field("solution_hash", pa.string()),
        pa.field("fragment", pa.string()),
    ],
    metadata={"itemeval.schema": "batch_cells/1"},
)


class Owner(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    host: str
    pid: int
    generation: int = 1

    @classmethod
    def me(cls, run_id: str, generation: int = 1) -> Owner:
        return cls(run_id=run_id, host=socket.gethostname(), pid=os.getpid(), generation=generation)


class BatchRecord(BaseModel):
    """`state.json` of one batch."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    local_id: str
    stage: Literal["generate", "grade"]
    condition_id: str
    endpoint: str
    api: str  # openai | anthropic
    model: str
    group: str  # the response cache group of its requests
    requests: int
    cells: int
    attempt: int = 1  # the cells' batch attempt (2: their first batch did not answer them)
    run_id: str  # the run that prepared it
    reserved_usd: float = 0.0  # reserved under that run's budget cap
    prepared_at: float  # epoch seconds
    deadline: float  # epoch seconds: then it is cancelled and what is left is called live
    state: RecordState = "prepared"
    batch_id: str | None = None
    candidates: list[str] = Field(default_factory=list)  # found by a restarted driver
    submitted_at: float | None = None
    cancel_requested_at: float | None = None
    collected_at: float | None = None
    status: str | None = None  # the provider's last word
    usd: float = 0.0  # what its answers cost (at the batch price)
    counts: dict[str, int] = Field(default_factory=dict)
    note: str | None = None  # why it was abandoned, or what is odd about it
    owner: Owner
    touched_at: float
    released: bool = False  # its owner stopped cleanly: another may take it over at once

    @property
    def open(self) -> bool:
        return self.state not in FINAL_STATES

    def stale(self, now: float | None = None) -> bool:
        """Its owner is gone (or let go): another driver may take it over. An owner on this
        host is gone when its process is; elsewhere, when it stopped touching the record."""
        now = time.time() if now is None else now
        if self.released:
            return True
        if self.owner.host == socket.gethostname():
            return not _alive(self.owner.pid) or now - self.touched_at > LOCAL_LEASE_S
        return now - self.touched_at > LEASE_S


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def new_local_id() -> str:
    """A sortable id that is also a valid custom-id prefix (letters, digits, `-`)."""
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now % 1 * 1e6):06d}"
    return f"ib{stamp}-{os.urandom(4).hex()}"


class BatchLog:
    """The batch records of one study store (`batches/` under its root)."""

    def __init__(self, root: Location):
        self.root = root.join(BATCHES_DIR)

    def _dir(self, local_id: str) -> Location:
        return self.root.join(local_id)

    # -- writing ---------------------------------------------------------------------------
    def prepare(self, record: BatchRecord, cells: pa.Table) -> None:
        """Record a batch before anything is sent: its cells, its first owner, its state."""
        folder = self._dir(record.local_id)
        folder.makedirs()
        folder.join("cells.parquet").write_atomic(encode_fragment(cells.cast(CELL_SCHEMA)))
        owner = folder.join(f"owner-{record.owner.generation:06d}.json")
        if not owner.create_exclusive(record.owner.model_dump_json().encode()):
            raise StoreError(Problem("a new batch record exists already", file=owner.url))
        self.write(record)

    def write(self, record: BatchRecord) -> BatchRecord:
        """Save `record` (touched now); a final one is marked so that listings skip it."""
        record = record.model_copy(update={"touched_at": time.time()})
        data = record.model_dump_json(indent=1).encode()
        self._dir(record.local_id).join("state.json").write_atomic(data)
        if not record.open:
            self.root.join(f"{record.local_id}{FINAL_SUFFIX}").write_atomic(record.state.encode())
        return record

    def adopt(self, record: BatchRecord, run_id: str) -> BatchRecord | None:
        """Take over a stale record; None when another driver took it first."""
        generation = self.owner_generation(record.local_id) + 1
        owner = Owner.me(run_id, generation)
        path = self._dir(record.local_id).join(f"owner-{generation:06d}.json")
        if not path.create_exclusive(owner.model_dump_json().encode()):
            return None
        return self.write(record.model_copy(update={"owner": owner, "released": False}))

    def still_mine(self, record: BatchRecord) -> bool:
        """True while no other driver has taken the record over."""
        return self.owner_generation(record.local_id) == record.owner.generation

    def owner_generation(self, local_id: str) -> int:
        folder = self._dir(local_id)
        folder.invalidate()
        generations = [
            int(name[len("owner-") : -len(".json")])
            for name in (os.path.basename(p) for p in folder.glob("owner-*.json"))
            if name[len("owner-") : -len(".json")].isdigit()
        ]
        return max(generations, default=0)

    # -- reading ---------------------------------------------------------------------------
    def records(self, *, final: bool = True) -> Iterator[BatchRecord]:
        """Every record of the store (oldest first; without `final`, only open ones, read
        without opening the others); an unreadable one is a `StoreError`."""
        self.root.invalidate()
        names = self.root.listdir()
        done = {n[: -len(FINAL_SUFFIX)] for n in names if n.endswith(FINAL_SUFFIX)}
        for name in sorted(n for n in names if not n.endswith(FINAL_SUFFIX)):
            if not final and name in done:
                continue
            state = self._dir(name).join("state.json")
            try:
                text = state.read_text()
            except FileNotFoundError:
                continue  # being prepared right now (its state comes last)
            try:
                yield BatchRecord.model_validate(json.loads(text))
            except ValueError as exc:
                raise StoreError(
                    Problem(
                        f"not a readable batch record: {exc}",
                        file=state.url,
                        hint="batch records are written by itemeval; restore or remove it",
                    )
                ) from exc

    def open_records(self) -> list[BatchRecord]:
        return [r for r in self.records(final=False) if r.open]

    def read(self, local_id: str) -> BatchRecord:
        state = self._dir(local_id).join("state.json")
        return BatchRecord.model_validate(json.loads(state.read_text()))

    def cells(self, local_id: str) -> pa.Table:
        table = read_parquet_file(self._dir(local_id).join("cells.parquet"))
        return table.cast(CELL_SCHEMA)


def open_batches(root: Location) -> list[dict[str, object]]:
    """The store's batches not collected yet, for `itemeval status`."""
    out: list[dict[str, object]] = []
    for record in BatchLog(root).open_records():
        out.append(
            {
                "local_id": record.local_id,
                "stage": record.stage,
                "condition_id": record.condition_id,
                "endpoint": record.endpoint,
                "state": record.state,
                "batch_id": record.batch_id,
                "requests": record.requests,
                "cells": record.cells,
                "run_id": record.owner.run_id,
                "owner_alive": not record.stale(),
                "deadline": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.deadline)),
            }
        )
    return out
