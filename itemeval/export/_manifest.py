"""What an export folder holds and how an export changes it: the manifest and the commit.

`<out>/export.json` is the export's summary (rows, counts, options, files) and, under
`manifest`, what every file of the folder was made from: per condition pair, the store's state
it read (`source`: a digest of the two partitions' fragment names and of the selection), the
long table's parts (parquet and CSV files of up to `PART_ROWS` rows), the key index
(`_export/.../keys-*.arrow`: each row's key, fingerprint, part and samples-file bytes) and the
pair's Every Eval Ever evaluations; and the size of every file it names. An export reads it to
know what it may keep.

An export never overwrites what the manifest names before the manifest changes:

1. every new or rewritten file is written under a staged name beside its target
   (`.staged-*.part`: no reader's glob of `*.parquet`, `*.csv`, `*.json` or `*.jsonl` takes it);
2. `export.json` is written (atomically) with the new manifest and, under `pending`, the moves
   (staged name -> target) and deletions (files no longer named) still to do;
3. the moves and deletions are done, and `export.json` is written again without `pending`.

A crash before 2 leaves the previous export as it was (the staged files are removed by the next
export); a crash after 2 leaves a manifest whose `pending` the next export finishes first (moves
and deletions are idempotent). A file the manifest names that is missing or has another size
is detected, and what it belongs to is made again. The folders `long_table/`,
`long_table_csv/`, `eee/` and `_export/` belong to the export: a file there that the manifest
does not name is removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import posixpath
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from itemeval.export._outputs import OutputDir, OutputFile
from itemeval.storage import unique_name

MANIFEST_FILE = "export.json"
MANIFEST_VERSION = 1
TABLE_DIR = "long_table"
CSV_DIR = "long_table_csv"
EEE_DIR = "eee"
STATE_DIR = "_export"
#: The folders an export owns (see the module doc).
OWNED = (TABLE_DIR, CSV_DIR, EEE_DIR, STATE_DIR)
#: 0.1.0's single-file long table, replaced by the folders (removed by the first export).
OLD_FILES = ("long_table.parquet", "long_table.csv")
STAGED_PREFIX = ".staged-"
#: Rows a part of the long table holds at most.
PART_ROWS = 500_000
#: The bytes at the end of a samples file whose digest the manifest keeps.
TAIL_BYTES = 1 << 20


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PartRecord(_Model):
    """One part of a pair's long table: the same rows in each table format."""

    id: int
    rows: int
    files: dict[str, str]  # format ("parquet", "csv") -> path under the folder


class EvaluationRecord(_Model):
    """One Every Eval Ever evaluation (a pair on one dataset) and its two files."""

    dataset: str
    signature: str  # what its samples' lines are made of besides the rows
    aggregate_signature: str  # ... and its aggregate besides the samples
    begun: str  # the export time its evaluation_id carries (its samples file was begun then)
    aggregate: str | None = None  # path; None: no sample (nothing written)
    samples: str | None = None
    samples_rows: int = 0
    samples_bytes: int = 0
    checksum: str | None = None  # the samples file's sha256 (0.3.0 records carry it)
    tail: str | None = None  # sha256 of its last MiB (what a repair checks)
    excluded: dict[str, int] = Field(default_factory=dict)


class PairCounts(_Model):
    rows: int = 0
    graded: int = 0
    stale: int = 0
    outside_selection: int = 0


class PairRecord(_Model):
    """One condition pair: what it was made from and the files that hold it."""

    grade: str
    generate: str
    source: str  # digest of the store's partitions and the selection it read
    selection: str = ""  # digest of the selection
    content: str  # an order-free digest of its rows (`PairRows.content`)
    table_signature: str | None = None  # None: no table format exported
    eee: bool = False  # Every Eval Ever exported
    keys: str  # the key index (a path)
    parts: list[PartRecord] = Field(default_factory=list)
    next_part: int = 0
    counts: PairCounts = Field(default_factory=PairCounts)
    evaluations: dict[str, EvaluationRecord] = Field(default_factory=dict)

    @property
    def name(self) -> str:
        return pair_name(self.grade, self.generate)

    def paths(self) -> list[str]:
        paths = [self.keys]
        for part in self.parts:
            paths.extend(part.files.values())
        for evaluation in self.evaluations.values():
            paths.extend(p for p in (evaluation.aggregate, evaluation.samples) if p)
        return paths


class Pending(_Model):
    moves: list[tuple[str, str]] = Field(default_factory=list)
    deletes: list[str] = Field(default_factory=list)


class Manifest(_Model):
    version: int = MANIFEST_VERSION
    options: str = ""  # digest of the options every file depends on
    study_source: str = ""  # digest of every partition the study files read
    study_files: dict[str, str] = Field(default_factory=dict)  # statistics, judges, pairwise
    pairs: dict[str, PairRecord] = Field(default_factory=dict)
    #: The fragments of each partition the pairs read, by name: those written since are new.
    partitions: dict[str, list[str]] = Field(default_factory=dict)
    sizes: dict[str, int] = Field(default_factory=dict)  # every file named, its bytes
    pending: Pending | None = None


def pair_name(grade: str, generate: str) -> str:
    return f"{grade}/{generate}"


def pair_folder(root: str, grade: str, generate: str) -> str:
    """`<root>/grade_condition_id=<grade>/gen_condition_id=<generate>` (hive partitions)."""
    return f"{root}/grade_condition_id={grade}/gen_condition_id={generate}"


def read_manifest(out: OutputDir) -> tuple[Manifest | None, dict[str, Any] | None]:
    """The folder's manifest and the rest of its `export.json` (None, None: no export yet, or
    one this version cannot use: 0.1.0's, or a damaged file; the export then starts afresh)."""
    location = out.location(MANIFEST_FILE)
    try:
        document = json.loads(location.read_bytes())
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        return None, None
    if not isinstance(document, dict) or not isinstance(document.get("manifest"), dict):
        return None, document if isinstance(document, dict) else None
    try:
        manifest = Manifest.model_validate(document["manifest"])
    except ValidationError:
        return None, document
    if manifest.version != MANIFEST_VERSION:
        return None, document
    return manifest, document


def encode(document: dict[str, Any], manifest: Manifest) -> bytes:
    body = dict(document) | {"manifest": manifest.model_dump(mode="json", exclude_none=True)}
    return (json.dumps(body, indent=1) + "\n").encode("utf-8")


# -- the folder as it is -----------------------------------------------------------------------


def list_owned(out: OutputDir, files: Iterable[str] = ()) -> dict[str, int]:
    """Every file under the owned folders, and those of `files` (and of 0.1.0's) that exist:
    path under the folder -> bytes."""
    found: dict[str, int] = {}
    root = out.root
    base = root.path.rstrip("/") + "/"
    root.fs.invalidate_cache(root.path)
    for name in OWNED:
        location = root.join(name)
        try:
            entries = location.fs.find(location.path, detail=True)
        except FileNotFoundError:
            continue
        for path, info in entries.items():
            if info.get("type", "file") != "file":
                continue
            path = str(path)
            if path.startswith(base):
                found[path[len(base) :]] = int(info.get("size") or 0)
    for name in (*OLD_FILES, *files):
        location = root.join(name)
        with contextlib.suppress(FileNotFoundError):
            info = location.fs.info(location.path)
            if info.get("type", "file") == "file":
                found[name] = int(info.get("size") or 0)
    return found


def _is_staged(path: str) -> bool:
    name = posixpath.basename(path)
    return name.startswith(STAGED_PREFIX) or (name.startswith(".tmp-") and name.endswith(".part"))


# -- committing --------------------------------------------------------------------------------


class Commit:
    """The files one export writes, staged until `finish` (see the module doc)."""

    def __init__(self, out: OutputDir) -> None:
        self.out = out
        self.moves: list[tuple[str, str]] = []
        self.deletes: list[str] = []
        self.sizes: dict[str, int] = {}  # target path -> bytes of what was staged for it
        self._open: list[OutputFile | AppendedFile] = []

    def stage(self, target: str) -> OutputFile:
        """A file that becomes `target` when the export commits."""
        folder, name = posixpath.split(target)
        staged = posixpath.join(folder, f"{STAGED_PREFIX}{unique_name()}-{name}.part")
        file = self.out.open(staged)
        self._open.append(file)
        self.moves.append((staged, target))
        return file

    def append(self, target: str, size: int) -> AppendedFile:
        """The local file `target`, to be added to after its first `size` bytes (an earlier
        export's, which its manifest names with that size: a crash before the new manifest is
        undone by `repair_appended`)."""
        file = AppendedFile(self.out.location(target).path, size)
        self._open.append(file)
        return file

    def done(self, file: OutputFile | AppendedFile, target: str) -> None:
        """`file` (from `stage(target)` or `append(target)`) is complete: committed under its
        staged name, or synced where it is."""
        file.commit()
        self._open.remove(file)
        self.sizes[target] = file.size if isinstance(file, AppendedFile) else _size(file)

    def stage_bytes(self, target: str, data: bytes) -> None:
        file = self.stage(target)
        try:
            file.write(data)
        except BaseException:
            file.discard()
            raise
        self.done(file, target)

    def delete(self, paths: Iterable[str]) -> None:
        self.deletes.extend(paths)

    @property
    def empty(self) -> bool:
        return not self.moves and not self.deletes

    def discard(self) -> None:
        """Forget the staged files (a failed export): the folder keeps the previous export."""
        for file in self._open:
            with contextlib.suppress(Exception):
                file.discard()
        self._open = []
        for staged, _ in self.moves:
            with contextlib.suppress(Exception):
                self.out.location(staged).delete()
        if self.out.root.is_local:  # the folders this export made and left empty
            for folder in sorted({posixpath.dirname(s) for s, _ in self.moves}, reverse=True):
                _remove_empty(self.out.root.path, folder)
        self.moves = []

    def finish(self, document: dict[str, Any], manifest: Manifest) -> None:
        """Publish: the manifest with what is pending, the moves and deletions, the manifest."""
        moved = {target for _, target in self.moves}
        deletes = sorted(set(self.deletes) - moved)
        manifest.pending = Pending(moves=list(self.moves), deletes=deletes)
        self.out.location(MANIFEST_FILE).write_atomic(encode(document, manifest))
        apply_pending(self.out, manifest.pending)
        manifest.pending = None
        self.out.location(MANIFEST_FILE).write_atomic(encode(document, manifest))


class AppendedFile:
    """A local file written after its first `size` bytes; `discard` cuts it back."""

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self.start = size
        self.handle = open(path, "r+b")  # noqa: SIM115 - closed by commit or discard
        self.handle.truncate(size)
        self.handle.seek(size)
        self.size = size

    def write(self, data: bytes) -> int:
        self.size += len(data)
        return self.handle.write(data)

    def read_prefix(self, chunk: int) -> Iterator[bytes]:
        """The bytes before the first one written here, in chunks."""
        with open(self.path, "rb") as handle:
            remaining = self.start
            while remaining:
                data = handle.read(min(chunk, remaining))
                if not data:
                    raise OSError(f"{self.path} is shorter than its export manifest says")
                remaining -= len(data)
                yield data

    def read_tail(self, size: int) -> bytes:
        """The last `size` bytes before the first one written here."""
        with open(self.path, "rb") as handle:
            start = max(0, self.start - size)
            handle.seek(start)
            return handle.read(self.start - start)

    def commit(self) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.handle.truncate(self.start)
            self.handle.close()


def repair_appended(out: OutputDir, manifest: Manifest, listed: dict[str, int]) -> None:
    """Samples files a killed export had added to before its manifest was written: cut back to
    the size the manifest says when the last MiB before it is still what it says (else they
    are damaged, and made again)."""
    if not out.root.is_local:
        return
    for record in manifest.pairs.values():
        for evaluation in record.evaluations.values():
            path = evaluation.samples
            if path is None or listed.get(path, 0) <= evaluation.samples_bytes:
                continue
            location = out.location(path)
            size = evaluation.samples_bytes
            start = max(0, size - TAIL_BYTES)
            with open(location.path, "rb") as handle:
                handle.seek(start)
                tail = hashlib.sha256(handle.read(size - start)).hexdigest()
            if tail == evaluation.tail:
                os.truncate(location.path, size)
                listed[path] = size


def _remove_empty(root: str, folder: str) -> None:
    """`folder` (under `root`) and its parents up to `root`, while they are empty."""
    while folder and folder not in (".", "/"):
        try:
            os.rmdir(os.path.join(root, folder))
        except OSError:
            return
        folder = posixpath.dirname(folder)


def _size(file: OutputFile) -> int:
    location = file.location
    if location.is_local:
        return os.path.getsize(location.path)
    location.fs.invalidate_cache(posixpath.dirname(location.path))
    return int(location.fs.size(location.path))


def apply_pending(out: OutputDir, pending: Pending) -> None:
    """Do the moves and deletions of a committed manifest (each one again is harmless)."""
    for staged, target in pending.moves:
        source, destination = out.location(staged), out.location(target)
        if source.is_local:
            with contextlib.suppress(FileNotFoundError):
                os.replace(source.path, destination.path)
            continue
        if source.exists():
            source.fs.mv(source.path, destination.path)
            source.fs.invalidate_cache(posixpath.dirname(destination.path))
    for path in pending.deletes:
        out.location(path).delete()
    if out.root.is_local:  # folders left empty (a pair, a model, a format no longer there)
        for folder in sorted({posixpath.dirname(p) for p in pending.deletes}, reverse=True):
            _remove_empty(out.root.path, folder)


def recover(out: OutputDir, manifest: Manifest | None, document: dict[str, Any] | None) -> None:
    """Finish what a crashed export left pending (its manifest was written)."""
    if manifest is not None and manifest.pending is not None:
        apply_pending(out, manifest.pending)
        manifest.pending = None
        out.location(MANIFEST_FILE).write_atomic(encode(document or {}, manifest))


def unnamed(manifest: Manifest | None, listed: dict[str, int]) -> tuple[list[str], list[str]]:
    """(staged leftovers of a failed export, other files the manifest does not name)."""
    named = manifest.sizes if manifest is not None else {}
    staged = sorted(p for p in listed if _is_staged(p))
    others = sorted(p for p in listed if p not in named and not _is_staged(p))
    return staged, others


def damaged(manifest: Manifest, listed: dict[str, int]) -> set[str]:
    """The files the manifest names that are missing or have another size."""
    return {p for p, size in manifest.sizes.items() if listed.get(p) != size}
