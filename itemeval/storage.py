"""One place that talks to filesystems: local paths, `s3://` and any other fsspec URL.

Everything that itemeval reads or writes (datasets, the store, the response cache, locks,
manifests) goes through `Location`, so the guarantees below hold for all of it:

* `write_atomic` makes a file wholly visible or absent. On local disk it writes a temporary file
  in the same directory and renames it; on object stores it is one PUT (s3fs's `mv` is a copy
  plus a delete and is never used for this).
* `create_exclusive` creates a file only if it does not exist, atomically: `os.link` on local
  disk, a conditional PUT (`If-None-Match: *`) on S3. An object store that ignores the condition
  would overwrite silently, so the first exclusive creation in a bucket (per process) probes it:
  a second conditional create of one probe object must be refused, or a
  `StorageCapabilityError` (exit 2) names the location. A refusal is recognised by its type
  (`FileExistsError`) or its S3 error code/status (`PreconditionFailed`, 412), never by text.

S3 credentials and endpoints come from the usual AWS environment (`AWS_ACCESS_KEY_ID`,
`AWS_ENDPOINT_URL`, profiles) or from explicit fsspec options, which `OptionsByUrl` hands to
each URL (a study's `storage_options` and `storage_options_by_prefix`); they never appear in a
URL that itemeval prints or writes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import fsspec
from fsspec.asyn import AsyncFileSystem
from fsspec.implementations.local import LocalFileSystem
from fsspec.registry import known_implementations

from itemeval.errors import Problem, StorageCapabilityError
from itemeval.ids import new_sortable_id
from itemeval.secrets import ENV_SUFFIX, options_from_environment


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
        """Create the file with `data` unless it exists; True if this call created it.

        On an object store, a create refused after the client retried the PUT counts as done
        if the object holds exactly `data`: the answer to an earlier attempt was lost, and the
        retry was refused by that attempt's own write.
        """
        if self.is_local:
            tmp = _local_temp_file(self.path, data)
            try:
                os.link(tmp, self.path)  # atomic, and fails if the target exists
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno in _NO_HARD_LINKS:
                    raise _no_hard_links(self) from exc
                raise
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            return True
        check_exclusive_create(self)
        return _conditional_put(self, data)

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


# -- exclusive creation on object stores ---------------------------------------------------
#: Prefix of the probe objects (hidden: no reader of the store looks at names starting with ".").
PROBE_PREFIX = ".itemeval-probe-"
# S3 answers 409 ConditionalRequestConflict when a conditional write races another operation
# on the key, and says to retry; a few short retries settle it.
_CONFLICT_RETRIES = 4
_CONFLICT_BACKOFF_S = 0.05
# os.link's errors on filesystems without hard links (Linux says EPERM; FUSE mounts of object
# stores say ENOTSUP or ENOSYS).
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS}
_DOCS = "docs/store.md, 'Exclusive creation'"

_verified: set[tuple[fsspec.AbstractFileSystem, str]] = set()
_verify_lock = threading.Lock()


def check_exclusive_create(location: Location) -> None:
    """Make sure `location`'s backend refuses to overwrite on an exclusive create.

    Local disk needs no check (`os.link` fails on an existing target). On any other filesystem
    the first call per process, filesystem (endpoint and options) and bucket writes a probe
    object beside `location` twice with the create condition and deletes it: 2 PUTs and a
    DELETE, once. A backend that overwrote, ignored or rejected the condition raises
    `StorageCapabilityError`; access problems (credentials, a missing bucket) propagate as they
    are.
    """
    if location.is_local:
        return
    key = (location.fs, _bucket(location.path))
    if key in _verified:
        return
    with _verify_lock:
        if key in _verified:
            return
        _probe_exclusive_create(location.parent())
        _verified.add(key)


def _bucket(path: str) -> str:
    return path.lstrip("/").split("/", 1)[0]


def _probe_exclusive_create(directory: Location) -> None:
    fs = directory.fs
    if _generic_create(fs):
        raise _cannot_create_exclusively(
            directory,
            f"its filesystem ({type(fs).__name__}) has no conditional write; fsspec's generic "
            "one checks for the file and then writes it, which two writers can both pass",
        )
    probe = directory.join(unique_name(PROBE_PREFIX))
    try:
        if not _probe_put(probe, b"first"):
            raise _cannot_create_exclusively(
                directory, "it refused to create a new object as if it already existed"
            )
        if _probe_put(probe, b"second"):
            raise _cannot_create_exclusively(
                directory, "a second create of the same object overwrote it instead of failing"
            )
    finally:
        with contextlib.suppress(Exception):
            probe.delete()


def _generic_create(fs: fsspec.AbstractFileSystem) -> bool:
    """True if `fs` uses fsspec's generic pipe_file(mode="create"): a check, then a write.

    (Async filesystems such as s3fs implement `_pipe_file`; fsspec binds `pipe_file` to it on
    the instance, so only synchronous classes can fall back to the generic one.)
    """
    if isinstance(fs, AsyncFileSystem):
        return False
    return type(fs).pipe_file is fsspec.AbstractFileSystem.pipe_file


def _probe_put(probe: Location, data: bytes) -> bool:
    try:
        return _conditional_put(probe, data)
    except Exception as exc:
        reason = _unsupported_condition(exc)
        if reason is None:
            raise
        raise _cannot_create_exclusively(probe.parent(), reason) from exc


def _conditional_put(location: Location, data: bytes) -> bool:
    """One create-only write (`If-None-Match: *` on S3); False if the object exists (unless a
    retried PUT was refused by its own earlier attempt: see `Location.create_exclusive`)."""
    for attempt in range(_CONFLICT_RETRIES + 1):
        try:
            location.fs.pipe_file(location.path, data, mode="create")
        except Exception as exc:
            if _is_precondition_failed(exc):
                return _was_retried(exc) and _holds(location, data)
            if attempt < _CONFLICT_RETRIES and _s3_error(exc, "ConditionalRequestConflict", 409):
                time.sleep(_CONFLICT_BACKOFF_S * 2**attempt)
                continue
            raise
        finally:
            location.fs.invalidate_cache(posixpath.dirname(location.path))
        return True
    raise AssertionError("unreachable: the last attempt returns or raises")


def _was_retried(exc: BaseException) -> bool:
    """True if botocore sent the request more than once (so an earlier attempt may have
    succeeded on the server and only its answer was lost)."""
    for current in _chain(exc):
        response = _client_error_response(current)
        if response is not None:
            attempts = (response.get("ResponseMetadata") or {}).get("RetryAttempts") or 0
            if attempts > 0:
                return True
    return False


def _holds(location: Location, data: bytes) -> bool:
    try:
        return location.read_bytes() == data
    except FileNotFoundError:  # deleted since: not ours either way
        return False


def _is_precondition_failed(exc: BaseException) -> bool:
    """True if `exc` says the create condition failed: the object exists.

    s3fs raises `FileExistsError` when S3 names the failed condition (`If-None-Match`) and an
    `OSError` caused by botocore's `ClientError` (code `PreconditionFailed`, HTTP 412) when a
    server leaves the condition out; other fsspec filesystems raise `FileExistsError`.
    """
    return any(isinstance(e, FileExistsError) for e in _chain(exc)) or _s3_error(
        exc, "PreconditionFailed", 412
    )


def _s3_error(exc: BaseException, code: str, status: int) -> bool:
    """True if a botocore `ClientError` in `exc`'s chain has this error code or HTTP status."""
    for current in _chain(exc):
        response = _client_error_response(current)
        if response is not None:
            error = response.get("Error") or {}
            metadata = response.get("ResponseMetadata") or {}
            if error.get("Code") == code or metadata.get("HTTPStatusCode") == status:
                return True
    return False


def _unsupported_condition(exc: BaseException) -> str | None:
    """Why a conditional PUT failed for want of support, or None if it failed otherwise."""
    from botocore.exceptions import ParamValidationError

    for current in _chain(exc):
        if isinstance(current, NotImplementedError):
            return "its filesystem cannot write a whole file in one call"
        if isinstance(current, ParamValidationError):
            return (
                "this client cannot send the condition (s3fs >= 2024.12.0 and a botocore "
                "that knows PutObject's IfNoneMatch are needed: pip install -U s3fs boto3)"
            )
        response = _client_error_response(current)
        if response is None:
            continue
        code = (response.get("Error") or {}).get("Code")
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        if status == 501 or code in ("NotImplemented", "InvalidArgument", "InvalidRequest"):
            return f"the server rejected the condition ({code}, HTTP {status})"
    return None


def _client_error_response(exc: BaseException) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError) and isinstance(exc.response, dict):
        return dict(exc.response)
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and its causes/contexts, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _cannot_create_exclusively(directory: Location, reason: str) -> StorageCapabilityError:
    return StorageCapabilityError(
        Problem(
            "this storage location cannot create files exclusively (conditional writes: "
            f"PUT with If-None-Match: *), which dataset locks, run manifests and snapshot "
            f"markers rely on: {reason}",
            file=directory.url,
            hint="use a store whose server implements conditional writes (AWS S3 does), or "
            f"a local or NFS path; see {_DOCS}",
        )
    )


def _no_hard_links(location: Location) -> StorageCapabilityError:
    return StorageCapabilityError(
        Problem(
            "this filesystem does not support hard links, which itemeval uses to create files "
            "exclusively (dataset locks, run manifests, snapshot markers)",
            file=location.url,
            hint="use a local or NFS path, or the object store's own URL (s3://...) instead "
            f"of a FUSE mount of it; see {_DOCS}",
        )
    )


def resolve(url: str | os.PathLike[str], storage_options: dict[str, Any] | None = None) -> Location:
    """Resolve a URL or local path into a `Location` (fsspec caches filesystem instances)."""
    text = os.fspath(url)
    if "://" not in text and not text.startswith("/"):
        text = os.path.abspath(text)
    options = storage_options or {}
    if _names_variables(options):  # `secret_env: VAR`: read in this process, never shipped
        options = options_from_environment(options)
    fs, path = fsspec.core.url_to_fs(text, **options)
    if isinstance(fs, LocalFileSystem):
        path = os.path.abspath(path)
        text = path
    return Location(url=text.rstrip("/") if text != "/" else text, fs=fs, path=path.rstrip("/"))


def _names_variables(options: dict[str, Any]) -> bool:
    return any(
        name.endswith(ENV_SUFFIX) or (isinstance(value, dict) and _names_variables(value))
        for name, value in options.items()
    )


@dataclass(frozen=True)
class OptionsByUrl:
    """Which fsspec options each URL is opened with: one rule for every location of a study
    (store, response cache, datasets, exports, reports), on the driver and in the workers.

    A URL takes the options of the longest prefix in `by_prefix` that it starts with (a prefix
    ends at a `/`: `s3://bench` covers `s3://bench/x`, not `s3://bench2`; `s3://` covers the
    whole protocol); else `default` when it has the protocol of `default_url` (the store's, so
    that one S3-compatible endpoint named once serves everything on `s3://`); else none, and
    fsspec uses its own defaults and the environment (`AWS_ENDPOINT_URL`, profiles).
    """

    default: dict[str, Any] = field(default_factory=dict, repr=False)
    default_url: str | None = None
    by_prefix: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def for_url(self, url: str | os.PathLike[str]) -> dict[str, Any] | None:
        text = os.fspath(url)
        matches = [p for p in self.by_prefix if url_under(text, p)]
        if matches:
            return dict(self.by_prefix[max(matches, key=len)]) or None
        if not self.default or self.default_url is None:
            return None
        same_protocol = filesystem_family(text) == filesystem_family(self.default_url)
        return dict(self.default) if same_protocol else None


def url_under(url: str, prefix: str) -> bool:
    """True if `url` is `prefix` or below it (path components, not characters)."""
    if prefix.endswith("://"):
        return url.startswith(prefix)
    base = prefix.rstrip("/")
    return url == base or url.startswith(base + "/")


def filesystem_family(url: str) -> str:
    """The fsspec implementation behind `url`'s protocol (`s3://` and `s3a://` are one, as are
    local paths and `file://`), or the protocol itself when fsspec does not know it."""
    protocol = fsspec.core.split_protocol(url)[0] or "file"
    known = known_implementations.get(protocol)
    return str(known["class"]) if known else protocol


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
