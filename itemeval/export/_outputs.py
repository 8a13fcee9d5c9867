"""Where exports and reports are written: a directory at any fsspec URL, file by file, each file
wholly written or not at all.

* local disk: a hidden temporary file in the target directory, renamed over the target on
  `commit` (a crashed export leaves at most a `.tmp-*.part` file, never a truncated table);
* object stores: the fsspec file is uploaded on `commit` (one PUT, or a multipart upload that
  completes on close) and `discard` aborts it, so no partial object ever appears.

The default output directory of `itemeval export` and `itemeval report` is `<store>/exports`,
next to the data they describe (also on S3). Any other `--out` URL is opened with the fsspec
options the study gives it (`StudyConfig.options_by_url`), like the store, cache and datasets.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any, BinaryIO

from itemeval.storage import Location, resolve, unique_name

if TYPE_CHECKING:
    from itemeval.planning import Plan

EXPORTS_DIR = "exports"


def _file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _file_mode()


class OutputFile:
    """One file being written; readers see it only after `commit`."""

    def __init__(self, location: Location):
        self.location = location
        self._tmp: str | None = None
        if location.is_local:
            directory = os.path.dirname(location.path) or "."
            os.makedirs(directory, exist_ok=True)
            fd, self._tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
            self.handle: BinaryIO = os.fdopen(fd, "wb")
        else:
            self.handle = location.fs.open(location.path, "wb")
        self.bytes_written = 0
        self._done = False

    @property
    def url(self) -> str:
        return self.location.url

    def write(self, data: bytes) -> int:
        self.bytes_written += len(data)
        return self.handle.write(data)

    def commit(self) -> None:
        """Make the file visible (rename locally, finish the upload remotely)."""
        if self._done:
            return
        self._done = True
        if self._tmp is not None:
            try:
                self.handle.flush()
                os.fsync(self.handle.fileno())
                self.handle.close()
                os.chmod(self._tmp, _FILE_MODE)
                os.replace(self._tmp, self.location.path)
            except BaseException:
                self._remove_tmp()
                raise
        else:
            self.handle.close()
            self.location.fs.invalidate_cache(os.path.dirname(self.location.path))

    def discard(self) -> None:
        """Drop what was written; the target keeps its previous content (or stays absent)."""
        if self._done:
            return
        self._done = True
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                self.handle.close()
            self._remove_tmp()
            return
        discard = getattr(self.handle, "discard", None)
        with contextlib.suppress(Exception):
            if callable(discard):
                discard()  # fsspec buffered files: abort the upload, write nothing
            else:  # pragma: no cover - filesystems without discard
                self.handle.close()

    def _remove_tmp(self) -> None:
        if self._tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._tmp)


class OutputDir:
    """A directory at any fsspec URL that exports write into."""

    def __init__(self, root: Location):
        self.root = root

    @classmethod
    def at(cls, url: str, storage_options: dict[str, Any] | None = None) -> OutputDir:
        return cls(resolve(url, storage_options))

    @classmethod
    def for_plan(cls, plan: Plan, url: str | None) -> OutputDir:
        """`url` when given, opened with the options the study gives it, else
        `<store>/exports` (on the store's filesystem)."""
        if not url:
            return cls(plan.store.root.join(EXPORTS_DIR))
        return cls.at(url, plan.study.options_by_url(plan.store.root.url).for_url(url))

    @property
    def url(self) -> str:
        return self.root.url

    def location(self, relpath: str) -> Location:
        return self.root.join(relpath)

    def open(self, relpath: str) -> OutputFile:
        return OutputFile(self.location(relpath))

    def replace_tree(self, staged: str, final: str) -> None:
        """Make the directory `staged` the directory `final`, dropping what `final` held.

        Local disk: two renames, so `final` is always either the old or the new tree. Object
        stores have no directories: the old objects are deleted, then the staged ones moved.
        """
        source, target = self.location(staged), self.location(final)
        if source.is_local:
            old = self.location(f".{final}-old-{unique_name()}")
            if os.path.exists(target.path):
                os.replace(target.path, old.path)
            os.makedirs(os.path.dirname(target.path) or ".", exist_ok=True)
            os.replace(source.path, target.path)
            if os.path.exists(old.path):
                shutil.rmtree(old.path, ignore_errors=True)
            return
        fs = source.fs
        fs.invalidate_cache(self.root.path)
        target.delete_tree()
        prefix = source.path.rstrip("/") + "/"
        staged_paths = [p for p in fs.find(source.path) if p.startswith(prefix)]
        if staged_paths:
            # Server-side copies of exactly the staged objects, then the staging tree goes.
            moved = [target.path.rstrip("/") + "/" + p[len(prefix) :] for p in staged_paths]
            fs.copy(staged_paths, moved)
            fs.rm(staged_paths)
        fs.invalidate_cache(self.root.path)

    def delete_tree(self, relpath: str) -> None:
        location = self.location(relpath)
        if location.is_local:
            shutil.rmtree(location.path, ignore_errors=True)
        else:
            location.delete_tree()

    def write_bytes(self, relpath: str, data: bytes) -> str:
        out = self.open(relpath)
        try:
            out.write(data)
        except BaseException:
            out.discard()
            raise
        out.commit()
        return out.url
