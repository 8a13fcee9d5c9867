"""JSONL, CSV and parquet files (one file, a directory of them, or a glob) through a mapping.

`MappedHandle` is the part every mapped format shares (rows -> `RowMapper` -> items, identifier
uniqueness, counting); `FilesHandle` reads rows from files. The Hugging Face adapter reuses
`MappedHandle` with rows from a `datasets.Dataset`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from itemeval.datasets._workitem import WorkItem
from itemeval.datasets.adapters._handle import DatasetHandle, Fingerprint
from itemeval.datasets.adapters._mapping import MappingSpec
from itemeval.datasets.adapters._rows import RowContext, RowMapper
from itemeval.datasets.adapters._tables import iter_csv_rows, iter_jsonl_rows, iter_parquet_rows
from itemeval.datasets.format import Item, ProblemLog, Where
from itemeval.datasets.format._directory import DuplicateIds, hash_file
from itemeval.errors import Problem
from itemeval.ids import content_hash
from itemeval.storage import Location

if TYPE_CHECKING:
    from itemeval.datasets.adapters._source import DatasetSource

# (file stem, 0-based row index within the file, where, row or the problem in its place)
MappedRowSource = Iterator[tuple[str, int, Where, "dict[str, Any] | Problem"]]


class MappedHandle(DatasetHandle):
    """Rows of some tabular source mapped to items by a `MappingSpec`."""

    def __init__(self, source: DatasetSource, name: str, url: str, mapping: MappingSpec):
        super().__init__(source, name, url)
        self.mapping = mapping
        self.mapper = RowMapper(mapping)

    @abstractmethod
    def _rows(self) -> MappedRowSource: ...

    def _scan(self, log: ProblemLog, counts: Counter[str] | None) -> Iterator[WorkItem]:
        return self._mapped(log, counts, self.mapper.to_workitem)

    def scan_items(self, log: ProblemLog, counts: Counter[str] | None = None) -> Iterator[Item]:
        """The rows as spec `Item`s (what `itemeval convert` writes); same rules as `_scan`."""
        return self._mapped(log, counts, self.mapper.to_item)

    def _mapped(
        self,
        log: ProblemLog,
        counts: Counter[str] | None,
        convert: Callable[[dict[str, Any], RowContext], tuple[Any, list[Problem]]],
    ) -> Iterator[Any]:
        ids = DuplicateIds()
        for stem, index, where, row in self._rows():
            if isinstance(row, Problem):
                log.add(row)
            else:
                ctx = RowContext(where=where, index=index, stem=stem, dataset=self.name)
                result, problems = convert(row, ctx)
                log.extend(problems)
                if result is not None:
                    item_id = result.id if isinstance(result, WorkItem) else result.identifier
                    modality = result.modality
                    counted_as = str(modality) if modality else "(no modality)"
                    log.extend(ids.check(item_id, where.at(item=item_id), counted_as))
                    if counts is not None:  # every good row counts, also after an error
                        counts[counted_as] += 1
                    if not log.error_count:
                        yield result
            if log.full:
                return
        log.extend(ids.finish())
        ids.uncount(counts)

    def _mapping_hash(self) -> str:
        return content_hash(self.mapping.content())


class FilesHandle(MappedHandle):
    """One or more files of one format (`jsonl`, `csv`, `parquet`), read in order."""

    def __init__(
        self,
        source: DatasetSource,
        name: str,
        url: str,
        mapping: MappingSpec,
        *,
        format: str,
        files: list[Location],
        base: Location,
    ):
        super().__init__(source, name, url, mapping)
        self.format = format
        self.files = files
        self.base = base

    def _rows(self) -> MappedRowSource:
        required = self.mapping.referenced_columns()
        for file in self.files:
            stem = file.name.rsplit(".", 1)[0]
            index = 0
            for where, row in self._read(file, required):
                if isinstance(row, Problem):
                    yield stem, -1, where, row
                else:
                    yield stem, index, where, row
                    index += 1

    def _read(self, file: Location, required: list[tuple[str, str]]) -> Iterator[Any]:
        if self.format == "jsonl":
            return iter_jsonl_rows(file)
        if self.format == "parquet":
            return iter_parquet_rows(file, required)
        delimiter = self.mapping.delimiter or ("\t" if file.path.lower().endswith(".tsv") else ",")
        return iter_csv_rows(
            file,
            columns=self.mapping.columns,
            header=self.mapping.has_header,
            delimiter=delimiter,
            required=required,
        )

    def _compute_fingerprint(self) -> Fingerprint:
        files = {}
        prefix = self.base.path.rstrip("/") + "/"
        for file in self.files:
            key = file.path[len(prefix) :] if file.path.startswith(prefix) else file.name
            files[key] = hash_file(file)
        return Fingerprint(files=files, mapping=self._mapping_hash())
