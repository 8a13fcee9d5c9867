"""Keys of a study that name an item field, checked while planning reads every item.

`analysis.cluster_by` names an item attribute (`CLUSTER_ATTRIBUTES`) or a key of the items'
metadata. The statistics read it only when a report, an export or `status` groups the items,
which is after a run has paid; so planning, which reads every item once anyway, checks it first:
a key no selected item has is a `ConfigError` (exit 2, before anything is sent) with the nearest
key the items do have, and a key that only some selected items have is a warning (each of the
others is a cluster of its own). Prompt and rubric templates name metadata too
(`{{ metadata.subject }}`); planning renders them for every selected item (`_tokens`), and a key
an item lacks is a `ConfigError` there, with the nearest name.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from itemeval.config import StudyConfig
from itemeval.datasets import WorkItem
from itemeval.errors import ConfigError, Problem

#: The item attributes `analysis.cluster_by` may name (else it names a metadata key).
CLUSTER_ATTRIBUTES: tuple[str, ...] = (
    "dataset",
    "grading_scheme",
    "modality",
    "task_prompt",
    "difficulty",
)
_FIELD = "analysis.cluster_by"


@dataclass
class KeyCounts:
    """Of one dataset: its selected items, how many of them have a value of each attribute and
    metadata key, and every metadata key any of its items has. Kept with the item tables, so a
    plan that reads no item still checks `analysis.cluster_by`."""

    selected: int = 0
    with_value: Counter[str] = field(default_factory=Counter)
    metadata_keys: set[str] = field(default_factory=set)

    def see(self, batch: Iterable[WorkItem], selected: int) -> None:
        for index, item in enumerate(batch):
            self.metadata_keys.update(item.metadata)
            if index < selected:
                self.selected += 1
                for name in CLUSTER_ATTRIBUTES:
                    if getattr(item, name) not in (None, ""):
                        self.with_value[name] += 1
                for key, value in item.metadata.items():
                    if value is not None:
                        self.with_value[key] += 1

    def as_json(self) -> dict[str, Any]:
        return {
            "selected": self.selected,
            "with_value": dict(self.with_value),
            "metadata_keys": sorted(self.metadata_keys),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KeyCounts:
        return cls(
            int(data["selected"]),
            Counter({str(k): int(v) for k, v in dict(data["with_value"]).items()}),
            {str(k) for k in data["metadata_keys"]},
        )


class ItemKeys:
    """What the items hold of the field `analysis.cluster_by` names (nothing to do without)."""

    def __init__(self, study: StudyConfig) -> None:
        self.study = study
        self.wanted = study.analysis.cluster_by
        self.metadata_keys: set[str] = set()
        self.selected = 0
        self.with_value = 0  # selected items with a value of the wanted field

    def see(self, batch: Iterable[WorkItem], selected: int) -> None:
        """Every item read (for the nearest names); the first `selected` of `batch` are the
        ones the run uses."""
        if self.wanted is None:
            return
        attribute = self.wanted in CLUSTER_ATTRIBUTES
        for index, item in enumerate(batch):
            self.metadata_keys.update(item.metadata)
            if index < selected:
                self.selected += 1
                if attribute:
                    self.with_value += getattr(item, self.wanted) not in (None, "")
                else:
                    self.with_value += item.metadata.get(self.wanted) is not None

    def see_counts(self, counts: KeyCounts) -> None:
        """One dataset's counts (`KeyCounts`), in place of its items."""
        if self.wanted is None:
            return
        self.metadata_keys |= counts.metadata_keys
        self.selected += counts.selected
        self.with_value += counts.with_value.get(self.wanted, 0)

    def check(self) -> list[Problem]:
        """Raise when no selected item has the field; the warnings when some lack it."""
        by = self.wanted
        if by is None or not self.selected:
            return []
        where = str(self.study.path) if self.study.path else None
        if self.with_value == 0:
            names = [*CLUSTER_ATTRIBUTES, *sorted(self.metadata_keys)]
            close = difflib.get_close_matches(by, names, n=1, cutoff=0.6)
            known = ", ".join(sorted(self.metadata_keys)[:20]) or "none"
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                Problem(
                    f"no item has {by!r}: it is neither an item attribute the items fill in nor "
                    "a key of their metadata, so the items could not be grouped into clusters",
                    file=where,
                    field=_FIELD,
                    hint=f"{hint}an item attribute ({', '.join(CLUSTER_ATTRIBUTES)}) or a "
                    f"metadata key (the items' metadata keys: {known}); items without the key "
                    "are each a cluster of their own",
                )
            )
        missing = self.selected - self.with_value
        if not missing:
            return []
        return [
            Problem(
                f"{missing:,} of {self.selected:,} items have no {by!r}: each of them is a "
                "cluster of its own",
                file=where,
                field=_FIELD,
                severity="warning",
            )
        ]
