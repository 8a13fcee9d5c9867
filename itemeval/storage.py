"""One place that talks to filesystems: local paths, `s3://` and any other fsspec URL.

Everything that itemeval reads or writes (datasets, the store, the response cache, locks,
manifests) goes through `Location`, so the guarantees below hold for all of it:

* `write_atomic` makes a file wholly visible or absent. On local disk it writes a temporary file
  in the same directory and renames it; on object stores it is one PUT (s3fs's `mv` is a copy
  plus a delete and is never used for this).
* `create_exclusive` creates a file only if it does not exist, atomically: `os.link` on local
  disk, a conditional PUT (`If-None-Match: *`) on S3.

S3 credentials and endpoints come from the usual AWS environment (`AWS_ACCESS_KEY_ID`,
`AWS_ENDPOINT_URL`, profiles) or from explicit `storage_options`; they never appear in a URL
that itemeval prints or writes.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import IO, Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from itemeval.ids import new_sortable_id


@dataclass(frozen=True)
class Location:
    """A resolved fsspec URL: the filesystem object and the path inside it."""

    url: str
    fs: fsspec.AbstractFileSystem = field(repr=False, compare=False)
    path: str

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, LocalFileSystem)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    def join(self, *parts: str) -> Location:
        """A location below this one (parts use `/`, whatever the platform)."""
        path = posixpath.join(self.path, *parts)
        url = self.url.rstrip("/") + "/" + "/".join(p.strip("/") for p in parts)
        return Location(url=url, fs=self.fs, path=path)

    def parent(self) -> Location:
        path = posixpath.dirname(self.path.rstrip("/"))
        url = self.url.rstrip("/").rsplit("/", 1)[0]
        return Location(url=url, fs=self.fs, path=path)

    # -- reading -------------------------------------------------------------------------
    def exists(self) -> bool:
        return bool(self.fs.exists(self.path))

    def isdir(self) -> bool:
        return bool(self.fs.isdir(self.path))

    def read_bytes(self) -> bytes:
        return bytes(self.fs.cat_file(self.path))

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def open(self, mode: str = "rb", **kwargs: Any) -> IO[Any]:
        return self.fs.open(self.path, mode, **kwargs)

    def listdir(self) -> list[str]:
        """Names (not paths) of the entries directly below this location; [] if absent."""
        try:
            entries = self.fs.ls(self.path, detail=False)
        except FileNotFoundError:
            return []
        prefix = self.path.rstrip("/") + "/"
        names = []
        for entry in entries:
            entry = str(entry).rstrip("/")
            if entry.startswith(prefix):
                entry = entry[len(prefix) :]
            elif entry == self.path.rstrip("/"):
                continue
            names.append(posixpath.basename(entry))
        return sorted(set(names))

    def glob(self, pattern: str) -> list[str]:
        """Full filesystem paths below this location matching `pattern` (fsspec glob)."""
        return sorted(str(p) for p in self.fs.glob(posixpath.join(self.path, pattern)))

    def invalidate(self) -> None:
        """Forget cached listings (object stores cache `ls` results)."""
        self.fs.invalidate_cache(self.path)

    # -- writing -------------------------------------------------------------------------
    def makedirs(self) -> None:
        if self.is_local:
            os.makedirs(self.path, exist_ok=True)
        # object stores have no directories

    def write_atomic(self, data: bytes) -> None:
        """Write `data` so that readers see either the whole file or nothing (see module doc)."""
        if self.is_local:
            tmp = _local_temp_file(self.path, data)
            try:
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
        else:
            self.fs.pipe_file(self.path, data)
            self.fs.invalidate_cache(posixpath.dirname(self.path))

    def create_exclusive(self, data: bytes) -> bool:
        """Create the file with `data` unless it exists; True if this call created it."""
        if self.is_local:
            tmp = _local_temp_file(self.path, data)
            try:
                os.link(tmp, self.path)  # atomic, and fails if the target exists
            except FileExistsError:
                return False
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            return True
        try:
            self.fs.pipe_file(self.path, data, mode="create")
        except FileExistsError:
            return False
        except OSError as exc:  # s3fs maps 412 Precondition Failed to an OSError subclass
            if _is_precondition_failed(exc):
                return False
            raise
        finally:
            self.fs.invalidate_cache(posixpath.dirname(self.path))
        return True

    def delete(self, missing_ok: bool = True) -> None:
        try:
            self.fs.rm_file(self.path)
        except FileNotFoundError:
            if not missing_ok:
                raise
        self.fs.invalidate_cache(posixpath.dirname(self.path))

    def delete_tree(self) -> None:
        if self.exists():
            self.fs.rm(self.path, recursive=True)
        self.fs.invalidate_cache(self.path)


def _local_temp_file(path: str, data: bytes) -> str:
    """`data` written and synced to a new temporary file beside `path` (same filesystem, so it
    can be renamed or linked into place atomically), with the umask's file mode."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _FILE_MODE)  # mkstemp makes 0600; stores are shared
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def _default_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _default_file_mode()


def _is_precondition_failed(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}"
    return "PreconditionFailed" in text or "412" in text or "At least one of the pre" in text


def resolve(url: str | os.PathLike[str], storage_options: dict[str, Any] | None = None) -> Location:
    """Resolve a URL or local path into a `Location` (fsspec caches filesystem instances)."""
    text = os.fspath(url)
    if "://" not in text and not text.startswith("/"):
        text = os.path.abspath(text)
    fs, path = fsspec.core.url_to_fs(text, **(storage_options or {}))
    if isinstance(fs, LocalFileSystem):
        path = os.path.abspath(path)
        text = path
    return Location(url=text.rstrip("/") if text != "/" else text, fs=fs, path=path.rstrip("/"))


def unique_name(prefix: str = "", suffix: str = "") -> str:
    """A file name that no other writer anywhere will choose, and that sorts by time."""
    return f"{prefix}{new_sortable_id()}-{uuid.uuid4().hex[:8]}{suffix}"


_ACCESS_HINTS = {
    "NoCredentialsError": "no cloud credentials were found: set AWS_PROFILE or "
    "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or the node's instance role)",
    "PartialCredentialsError": "the cloud credentials are incomplete",
    "InvalidAccessKeyId": "the access key is not valid for this endpoint",
    "SignatureDoesNotMatch": "the secret key does not match the access key",
    "AccessDenied": "the credentials may not read or write there: check the bucket policy "
    "or the IAM role",
    "NoSuchBucket": "the bucket does not exist: create it or fix the URL",
    "EndpointConnectionError": "the storage endpoint cannot be reached: check AWS_ENDPOINT_URL "
    "and the network",
}


def access_problem(exc: BaseException) -> str | None:
    """A one-line explanation when `exc` is a storage access failure a user must fix (missing
    credentials, permissions, a missing bucket, an unreachable endpoint); None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = f"{type(current).__name__} {current}"
        for marker, hint in _ACCESS_HINTS.items():
            if marker in text:
                return f"{hint} ({type(current).__name__}: {str(current)[:200]})"
        if isinstance(current, PermissionError):
            return f"permission denied: {current}"
        current = current.__cause__ or current.__context__
    return None
