"""Attributes files: where the items' ad hoc attributes live when itemeval writes the spec.

The item spec names seven attributes and no others, so an item that itemeval writes carries only
those. Everything else an item has (a mapping's `metadata` columns, MMLU's subject, ARC's
original id, the `choices` list, a `gradingScheme`) goes to an **attributes file** beside its
part: `<part stem>.attributes.jsonl`, one JSON object per item that has any, in the order of the
part, each naming its item by `identifier`:

    boolq.jsonl              {"identifier": "boolq.0", "modality": "boolean", ...}
    boolq.attributes.jsonl   {"identifier": "boolq.0", "title": "Ethanol fuel"}

The dataset's yaml lists them under `itemAttributes` (part -> attributes file), an ad hoc
dataset attribute, which the dataset spec allows ("Other ad hoc attributes are optionally
allowed in the metadata file"). Readers that know nothing of it read the items as the spec
defines them; itemeval joins the attributes back, so writing and reading loses nothing.

Joining is a merge over two streams in the same order, so memory does not grow with the part.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from itemeval.datasets.format._findings import ProblemLog, Where
from itemeval.datasets.format._records import iter_jsonl
from itemeval.errors import Problem
from itemeval.storage import Location

ATTRIBUTES_SUFFIX = ".attributes.jsonl"
ATTRIBUTES_KEY = "itemAttributes"  # the dataset attribute that lists the files


def attributes_name(part_name: str) -> str:
    """`boolq.jsonl` -> `boolq.attributes.jsonl`; `big_000.jsonl` -> `big_000.attributes.jsonl`."""
    stem = part_name.rsplit(".", 1)[0] if "." in part_name else part_name
    return stem + ATTRIBUTES_SUFFIX


def attributes_record(identifier: str, attributes: dict[str, Any]) -> dict[str, Any]:
    """One line of an attributes file."""
    return {"identifier": identifier, **attributes}


class AttributeJoin:
    """The records of one attributes file, handed to the items of its part in order.

    `take(identifier)` returns the attributes of that item (or {} if it has none) and
    `finish()` reports records that matched no item; problems with the file itself (a line that
    is not JSON, no identifier) go to the log with the file and line."""

    def __init__(self, location: Location, log: ProblemLog, part: str, item_keys: frozenset[str]):
        self.location = location
        self.log = log
        self.part = part
        self.item_keys = item_keys  # casefolded spec attribute names: not allowed here
        self._records = self._iter()
        self._next: tuple[Where, str, dict[str, Any]] | None = None
        self._advance()

    def take(self, identifier: str) -> dict[str, Any]:
        if self._next is None or self._next[1] != identifier.casefold():
            return {}
        attributes = self._next[2]
        self._advance()
        return attributes

    def finish(self) -> None:
        if self._next is None:
            return
        where, key, _ = self._next
        left = 1 + sum(1 for _ in self._records)
        self.log.add(
            where.at(item=key).error(
                f"{left} record{'s' if left != 1 else ''} from here on match no item of "
                f"{self.part} (each record names an item of the part, in the part's order)",
                field="identifier",
                hint="write the dataset again with itemeval convert, or fix the identifiers",
            )
        )
        self._next = None

    def _advance(self) -> None:
        self._next = next(self._records, None)

    def _iter(self) -> Iterator[tuple[Where, str, dict[str, Any]]]:
        for where, record in iter_jsonl(self.location):
            if isinstance(record, Problem):
                self.log.add(record)
                continue
            if not isinstance(record, dict):
                self.log.add(where.error("expected a JSON object (an item's ad hoc attributes)"))
                continue
            identifier: Any = None
            attributes: dict[str, Any] = {}
            bad: list[str] = []
            for key, value in record.items():
                folded = key.casefold()
                if folded == "identifier":
                    identifier = value
                elif folded in self.item_keys:
                    bad.append(key)
                else:
                    attributes[key] = value
            if not isinstance(identifier, str) or not identifier:
                self.log.add(where.error("no identifier: which item is this?", field="identifier"))
                continue
            if bad:
                self.log.add(
                    where.at(item=identifier).error(
                        f"{', '.join(bad)}: spec attributes belong in the part, not here",
                        field=bad[0],
                    )
                )
                continue
            yield where, identifier.casefold(), attributes
