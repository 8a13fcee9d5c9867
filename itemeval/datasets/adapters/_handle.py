"""`DatasetHandle`: one opened dataset of a study, whatever its format, as `WorkItem` batches.

A handle streams its items (`iter_batches`), fingerprints its content (`fingerprint`, for the
dataset locks and the items snapshot) and collects warnings. Every format implements `_scan`,
which yields good items and records findings in a `ProblemLog`; the base class turns that into
the two ways of reading: `iter_batches` (raises `DatasetError` listing every problem, up to a cap,
once the read is over; nothing is yielded after the first error) and `validate` (reports, never
raises for problems in the data).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from itemeval.datasets._workitem import WorkItem
from itemeval.datasets.format import DatasetReport, ProblemLog
from itemeval.errors import Problem
from itemeval.ids import canonical_json, sha256_hex

if TYPE_CHECKING:
    from itemeval.datasets.adapters._source import DatasetSource


@dataclass(frozen=True)
class Fingerprint:
    """What a dataset's content is: file hashes (by name), the mapping's hash, or a revision.

    `digest` changes iff any of them changes; the parts say what changed."""

    files: dict[str, str] = field(default_factory=dict)
    mapping: str | None = None
    revision: str | None = None

    @property
    def digest(self) -> str:
        payload: dict[str, object] = {"files": self.files}
        if self.mapping is not None:
            payload["mapping"] = self.mapping
        if self.revision is not None:
            payload["revision"] = self.revision
        return sha256_hex(canonical_json(payload))


class DatasetHandle(ABC):
    """An opened dataset (see the module doc). `WorkItem.dataset` is `name`."""

    format: str = ""

    def __init__(self, source: DatasetSource, name: str, url: str):
        self.source = source
        self.name = name
        self.url = url  # the resolved location, as shown in messages and locks
        self._log = ProblemLog()
        self._fingerprint: Fingerprint | None = None

    @property
    def warnings(self) -> list[Problem]:
        """Warnings from opening the dataset and, after a read, examples from the items."""
        return self.open_warnings() + self._log.warnings

    def open_warnings(self) -> list[Problem]:
        return []

    def iter_batches(self, batch_size: int = 1000) -> Iterator[list[WorkItem]]:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._log = ProblemLog()
        batch: list[WorkItem] = []
        for item in self._scan(self._log, None):
            batch.append(item)
            if len(batch) >= batch_size:
                yield batch
                batch = []
        if batch and not self._log.error_count:
            yield batch
        self._log.raise_if_errors()

    def validate(self) -> DatasetReport:
        """Read everything; the report lists the problems instead of raising."""
        self._log = ProblemLog()
        self._log.extend(self.open_warnings())
        report = DatasetReport(name=self.name, log=self._log)
        for _ in self._scan(self._log, report.by_modality):
            pass
        report.items = sum(report.by_modality.values())
        return report

    def fingerprint(self) -> str:
        """A content hash of the dataset (its files, streamed, and its mapping) or its pinned
        revision. Computed once per handle."""
        return self.fingerprint_details().digest

    def fingerprint_details(self) -> Fingerprint:
        if self._fingerprint is None:
            self._fingerprint = self._compute_fingerprint()
        return self._fingerprint

    @abstractmethod
    def _compute_fingerprint(self) -> Fingerprint: ...

    @abstractmethod
    def _scan(self, log: ProblemLog, counts: Counter[str] | None) -> Iterator[WorkItem]:
        """Yield good items while no error was logged; log every finding; stop when full."""
