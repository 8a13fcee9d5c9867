"""Dataset directories through fsspec: `<id>.yaml` plus its `hasPart` files, read and written.

`read_dataset(url)` checks the metadata and the part files up front (names, existence) and then
streams items part by part, line by line, in batches: a dataset of a million items is never held
in memory. Reading collects every problem (up to a cap) before raising, so one run of
`itemeval validate` lists all of them.

Items' ad hoc attributes may live in attributes files beside the parts (listed under
`itemAttributes`, see `attribute_files.py`); they are joined back to their items while streaming.
Writing is `writer.py`.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from itemeval._util.yaml_lines import safe_load
from itemeval.datasets.format._attribute_files import AttributeJoin
from itemeval.datasets.format._dataset import DatasetMeta, check_part_names, parse_dataset_meta
from itemeval.datasets.format._findings import ProblemLog, Where
from itemeval.datasets.format._item import ITEM_ATTRIBUTES, Item, parse_item
from itemeval.datasets.format._records import UTF8_HINT, iter_records, yaml_problem
from itemeval.errors import DatasetError, Problem
from itemeval.ids import canonical_json, sha256_hex
from itemeval.storage import Location, resolve

META_SUFFIXES = (".yaml", ".yml")
DEFAULT_ITEMS_PER_PART = 50_000
MAX_PARTS = 1000  # the naming rule has three digits
_PART_NAME = re.compile(r"_\d{3}\.ya?ml$", re.IGNORECASE)
_HASH_CHUNK = 1 << 20
_ITEM_KEYS = frozenset(name.casefold() for name in ITEM_ATTRIBUTES)


@dataclass
class DatasetReport:
    """What a full read of a dataset found (`DatasetReader.validate` for item-format
    directories, `DatasetHandle.validate` for any source): its name, items per modality and
    the problems met."""

    name: str
    items: int = 0
    by_modality: Counter[str] = field(default_factory=Counter)
    log: ProblemLog = field(default_factory=ProblemLog)

    @property
    def ok(self) -> bool:
        return self.log.error_count == 0


#: Two 64-bit hashes of a casefolded identifier, as one sortable record.
ID_KEY = np.dtype([("a", np.int64), ("b", np.int64)])


def id_keys(identifiers: list[str]) -> np.ndarray:
    """Case-insensitive keys of `identifiers` (`ID_KEY` records; equal for equal ids, and a
    collision of both hashes is about 1 in 10**26 for a million ids). Hashes are this
    process's: keys are compared within one process only."""
    folded = [identifier.casefold() for identifier in identifiers]
    pairs = [(hash(key), hash(key + "\x00")) for key in folded]
    return np.array(pairs, dtype=np.int64).reshape(-1, 2).view(ID_KEY).reshape(-1)


def find_keys(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """For each of `keys`, its index in `sorted_keys`, or -1 when absent."""
    if not len(sorted_keys) or not len(keys):
        return np.full(len(keys), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return np.where(sorted_keys[at] == keys, at, -1)


class DuplicateIds:
    """Case-insensitive identifier uniqueness, naming the first occurrence of a duplicate.

    Lean enough for a million identifiers (about 24 bytes each, not a Python dict entry each):
    each identifier is kept as its `id_keys` key and the place it was read, in sorted runs that
    are merged as they grow. Identifiers are checked in batches of `BATCH`: `check` returns the
    duplicates found so far, `finish` the rest, so a duplicate is reported a few thousand items
    after it was read, never lost.
    """

    BATCH = 8192
    MERGED = 1 << 17

    def __init__(self) -> None:
        self._files: list[str] = []
        # (identifier, packed place, where, what the caller counted it as)
        self._pending: list[tuple[str, int, Where, str | None]] = []
        self._counted_duplicates: Counter[str] = Counter()
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []  # (hashes [n, 2] sorted, places)

    def check(self, identifier: str, where: Where, counted_as: str | None = None) -> list[Problem]:
        """Note `identifier`; the duplicates found so far (usually none). `counted_as` is the
        key under which the caller counted the item, for `uncount`."""
        file = where.file or ""
        if file not in self._files[-1:]:
            self._files.append(file)
        packed = (len(self._files) - 1) * 2**40 + (where.line or 0)
        self._pending.append((identifier, packed, where, counted_as))
        return self._flush() if len(self._pending) >= self.BATCH else []

    def finish(self) -> list[Problem]:
        """The duplicates among the identifiers not checked yet."""
        return self._flush()

    def uncount(self, counts: Counter[str] | None) -> None:
        """Take the duplicates found so far back out of `counts` (only first copies count)."""
        if counts is not None:
            for key, number in self._counted_duplicates.items():
                counts[key] -= number
                if counts[key] <= 0:
                    del counts[key]
        self._counted_duplicates.clear()

    def _flush(self) -> list[Problem]:
        if not self._pending:
            return []
        pending, self._pending = self._pending, []
        keys = id_keys([entry[0] for entry in pending])
        places = np.array([entry[1] for entry in pending], dtype=np.int64)
        problems = []
        # Against every batch before: the first occurrence is there.
        earlier: dict[int, int] = {}  # index in batch -> packed place of the first occurrence
        for run_keys, run_places in self._runs:
            at = find_keys(run_keys, keys)
            for found in np.flatnonzero(at >= 0):
                earlier.setdefault(int(found), int(run_places[at[found]]))
        # Within the batch: a later copy duplicates the batch's first copy, or what that one
        # duplicates.
        duplicates = dict(earlier)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        starts = np.ones(len(order), dtype=bool)
        starts[1:] = sorted_keys[1:] != sorted_keys[:-1]
        group_start = np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))
        for position in np.flatnonzero(~starts):
            later, first = int(order[position]), int(order[group_start[position]])
            duplicates[later] = earlier.get(first, int(places[first]))
        for index in sorted(duplicates):
            identifier, _, where, counted_as = pending[index]
            if counted_as is not None:
                self._counted_duplicates[counted_as] += 1
            first = duplicates[index]
            file, line = self._files[first // 2**40], first % 2**40
            place = f"{file}:{line}" if line else file
            problems.append(
                where.error(
                    f"duplicate identifier {identifier!r}: already used at {place} "
                    "(identifiers are compared case-insensitively)",
                    field="identifier",
                    hint="give every item its own identifier",
                )
            )
        fresh = np.setdiff1d(np.arange(len(keys)), np.fromiter(duplicates, int, len(duplicates)))
        if len(fresh):
            self._add_run(keys[fresh], places[fresh])
        return problems

    def _add_run(self, keys: np.ndarray, places: np.ndarray) -> None:
        order = np.argsort(keys, kind="stable")
        self._runs.append((keys[order], places[order]))
        # Merge runs of similar size (a binary counter) up to `MERGED`: fewer runs to search,
        # while a merge's transient copies stay a few megabytes.
        while (
            len(self._runs) > 1
            and len(self._runs[-2][0]) <= 2 * len(self._runs[-1][0])
            and len(self._runs[-2][0]) + len(self._runs[-1][0]) <= self.MERGED
        ):
            (k2, p2), (k1, p1) = self._runs.pop(), self._runs.pop()
            merged = np.concatenate([k1, k2])
            order = np.argsort(merged, kind="stable")
            self._runs.append((merged[order], np.concatenate([p1, p2])[order]))


class DatasetReader:
    """An opened dataset directory: checked metadata, and its items on demand."""

    def __init__(
        self,
        location: Location,
        meta_location: Location,
        meta: DatasetMeta,
        meta_warnings: list[Problem],
    ):
        self.location = location
        self.meta_location = meta_location
        self.meta = meta
        self.meta_warnings = meta_warnings
        self.parts = [location.join(name) for name in meta.has_part]
        self.attribute_files = {
            part: location.join(name) for part, name in (meta.item_attributes or {}).items()
        }
        self._log = ProblemLog()

    @property
    def warnings(self) -> list[Problem]:
        """Warnings about the metadata and, after a read, example warnings about the items."""
        return self.meta_warnings + self._log.warnings

    @property
    def log(self) -> ProblemLog:
        """The findings of the latest read."""
        return self._log

    def iter_items(self) -> Iterator[Item]:
        """Every item, inline ones first, then part by part. Raises `DatasetError` listing all
        problems (up to a cap) once the read is over; no item is yielded after the first error."""
        self._log = ProblemLog()
        yield from self.scan(self._log, counts=None)
        self._log.raise_if_errors()

    def iter_batches(self, batch_size: int = 1000) -> Iterator[list[Item]]:
        batch: list[Item] = []
        for item in self.iter_items():
            batch.append(item)
            if len(batch) >= batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def validate(self) -> DatasetReport:
        """Read everything and report; never raises for problems in the items."""
        self._log = ProblemLog()
        report = DatasetReport(name=self.meta.identifier, log=self._log)
        self._log.extend(self.meta_warnings)
        for _ in self.scan(self._log, counts=report.by_modality):
            pass
        report.items = sum(report.by_modality.values())
        return report

    def scan(self, log: ProblemLog, counts: Counter[str] | None = None) -> Iterator[Item]:
        """Yield good items while no error was logged; log every finding (the lower-level
        read behind `iter_items` and `validate`)."""
        ids = DuplicateIds()
        for item in self.meta.items or ():
            # inline items were parsed with the metadata; only uniqueness is left to check
            where = Where(self.meta_location.url, item=item.identifier)
            log.extend(ids.check(item.identifier, where, item.modality.value))
            if counts is not None:
                counts[item.modality.value] += 1
            if not log.error_count:
                yield item
        for name, part in zip(self.meta.has_part, self.parts, strict=True):
            attributes = self.attribute_files.get(name)
            yield from scan_item_file(part, log, counts, ids, attributes=attributes, finish=False)
            if log.full:
                return
        log.extend(ids.finish())
        ids.uncount(counts)

    def file_hashes(self) -> dict[str, str]:
        """sha256 of the metadata file and of every part and attributes file, by file name
        (streamed)."""
        hashes = {self.meta_location.name: hash_file(self.meta_location)}
        for part in [*self.parts, *self.attribute_files.values()]:
            hashes[part.name] = hash_file(part)
        return hashes

    def fingerprint(self) -> str:
        """One sha256 over the metadata and part files: changes iff any of their bytes change."""
        return fingerprint_of(self.file_hashes())


def scan_item_file(
    location: Location,
    log: ProblemLog,
    counts: Counter[str] | None = None,
    ids: DuplicateIds | None = None,
    *,
    attributes: Location | None = None,
    finish: bool = True,
) -> Iterator[Item]:
    """The items of one item file (JSON Lines, or a JSON/YAML list), checked like a part of a
    dataset: yields good items while no error was logged, logs every finding. `attributes` is
    the part's attributes file, whose records join their items. `finish=False` leaves the last
    identifiers' check to the caller (`ids.finish()`, after the dataset's last part)."""
    ids = ids if ids is not None else DuplicateIds()
    join = AttributeJoin(attributes, log, location.name, _ITEM_KEYS) if attributes else None
    for where, record in iter_records(location):
        if isinstance(record, Problem):
            log.add(record)
        else:
            item, problems = parse_item(record, where)
            log.extend(problems)
            if join is not None:
                identifier = item.identifier if item is not None else _raw_identifier(record)
                extra = join.take(identifier) if identifier else {}
                if extra and item is not None:
                    _add_attributes(item, extra, where.at(item=item.identifier), log)
            if item is not None:
                at = where.at(item=item.identifier)
                log.extend(ids.check(item.identifier, at, item.modality.value))
                if counts is not None:  # every good item counts, also after an error
                    counts[item.modality.value] += 1
                if not log.error_count:
                    yield item
        if log.full:
            return
    if join is not None:
        join.finish()
    if finish:
        log.extend(ids.finish())
        ids.uncount(counts)


def _raw_identifier(record: object) -> str | None:
    """The identifier of a record that is not a valid item (to keep the join in step)."""
    if isinstance(record, dict):
        for key, value in record.items():
            if isinstance(key, str) and key.casefold() == "identifier" and isinstance(value, str):
                return value
    return None


def _add_attributes(item: Item, attributes: dict[str, Any], where: Where, log: ProblemLog) -> None:
    clashes = [key for key in attributes if key in item.extras]
    if clashes:
        log.add(
            where.error(
                f"{', '.join(map(repr, clashes))} given both in the part and in its attributes "
                "file",
                field=clashes[0],
                hint="keep each attribute once",
            )
        )
        return
    item.extras.update(attributes)


def fingerprint_of(file_hashes: dict[str, str]) -> str:
    return sha256_hex(canonical_json({"files": file_hashes}))


def read_dataset(url: str, storage_options: dict[str, Any] | None = None) -> DatasetReader:
    """Open the dataset directory at `url` (or its `<id>.yaml`) and check its metadata and part
    files. Raises `DatasetError` listing every problem found."""
    location = resolve(url, storage_options)
    location.invalidate()  # object stores cache listings; another process may have written
    meta_location = find_meta_file(location)
    directory = meta_location.parent()
    where = Where(file=meta_location.url)
    meta, problems = _load_meta(meta_location, where)
    if meta is not None:
        problems.extend(_check_layout(meta, meta_location, directory, where))
    errors = [p for p in problems if p.severity == "error"]
    if errors or meta is None:
        raise DatasetError(errors)
    return DatasetReader(directory, meta_location, meta, problems)


def find_meta_file(location: Location) -> Location:
    """The `<id>.yaml` that `location` names or holds (raises `DatasetError` if none)."""
    if location.path.lower().endswith(META_SUFFIXES):
        if not location.exists():
            raise DatasetError(Problem("no such file", file=location.url))
        return location
    if not location.isdir():
        raise DatasetError(
            Problem(
                "no such dataset directory",
                file=location.url,
                hint="give a directory holding <id>.yaml, or the yaml file itself",
            )
        )
    names = [n for n in location.listdir() if n.lower().endswith(META_SUFFIXES)]
    preferred = [n for n in names if n.rsplit(".", 1)[0].casefold() == location.name.casefold()]
    not_parts = [n for n in names if not _PART_NAME.search(n)]  # <id>_000.yaml is a part
    candidates = preferred or not_parts or names
    if len(candidates) == 1:
        return location.join(candidates[0])
    if not candidates:
        raise DatasetError(
            Problem(
                "no <id>.yaml dataset file in this directory",
                file=location.url,
                hint="a dataset directory holds <id>.yaml plus the files it lists in hasPart",
            )
        )
    raise DatasetError(
        Problem(
            f"several yaml files ({', '.join(candidates)}); which one is the dataset?",
            file=location.url,
            hint="give the path of the <id>.yaml file itself",
        )
    )


def is_dataset_directory(location: Location) -> bool:
    """True if `location` is a yaml file or a directory with a yaml file (an item dataset)."""
    try:
        find_meta_file(location)
    except DatasetError:
        return False
    return True


def _load_meta(meta_location: Location, where: Where) -> tuple[DatasetMeta | None, list[Problem]]:
    data = meta_location.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return None, [
            where.at(line=line).error(
                f"not valid UTF-8 text (byte 0x{data[exc.start]:02x})", hint=UTF8_HINT
            )
        ]
    try:
        raw = safe_load(text)
    except yaml.YAMLError as exc:
        return None, [yaml_problem(exc, where)]
    return parse_dataset_meta(raw, where)


def _check_layout(
    meta: DatasetMeta, meta_location: Location, directory: Location, where: Where
) -> list[Problem]:
    problems: list[Problem] = []
    stem = meta_location.name.rsplit(".", 1)[0]
    if stem.casefold() != meta.identifier.casefold():
        problems.append(
            where.error(
                f"the file is named {meta_location.name!r} but the dataset identifier is "
                f"{meta.identifier!r}",
                field="identifier",
                hint=f"name the file {meta.identifier}.yaml (the spec's <id>.yaml)",
            )
        )
    problems.extend(check_part_names(meta, where))
    present = set(directory.listdir())
    for name in meta.has_part:
        if name not in present:
            problems.append(
                where.error(
                    f"hasPart lists {name!r} but there is no such file in {directory.url}",
                    field="hasPart",
                    hint="add the file or remove it from hasPart",
                )
            )
    for part, name in (meta.item_attributes or {}).items():
        if part not in meta.has_part:
            problems.append(
                where.error(
                    f"itemAttributes names {part!r}, which is not a part in hasPart",
                    field="itemAttributes",
                )
            )
        elif name not in present:
            problems.append(
                where.error(
                    f"itemAttributes lists {name!r} but there is no such file in {directory.url}",
                    field="itemAttributes",
                    hint="add the file or remove it from itemAttributes",
                )
            )
    return problems


def hash_file(location: Location) -> str:
    digest = hashlib.sha256()
    with location.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
