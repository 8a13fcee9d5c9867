"""The items of an import: spooled to a temporary file as they are met (held in memory as
two 64-bit hashes each: id and content), then written per dataset in the item format under
`imported/datasets/<name>/`, merged with the items imported before under that name, pinned in
`dataset_locks.json` and snapshot like any study's dataset."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from itemeval.datasets import items_to_table, pin_datasets, read_locks
from itemeval.datasets.adapters import DatasetSource, open_source
from itemeval.datasets.format import MAX_CHOICES, DatasetMeta, Item, Modality, read_dataset
from itemeval.errors import DatasetError
from itemeval.importing._model import Rejection, Sample
from itemeval.storage import Location
from itemeval.store._items import write_items_snapshot
from itemeval.store._layout import StudyStore

DATASETS_DIR = "imported/datasets"
Reject = Callable[[Sample, str, str], Rejection]


@dataclass
class _DatasetSpool:
    name: str
    path: str
    handle: Any
    items: dict[int, int] = field(default_factory=dict)  # id key -> content key
    count: int = 0
    assumed_modality: int = 0


class ImportedItems:
    """The datasets an import meets (see the module doc)."""

    def __init__(self, store: StudyStore, spool_dir: str) -> None:
        self.store = store
        self.spool_dir = spool_dir
        self._datasets: dict[str, _DatasetSpool] = {}

    def spool(self, dataset: str) -> _DatasetSpool:
        spool = self._datasets.get(dataset)
        if spool is None:
            path = os.path.join(self.spool_dir, f"{len(self._datasets)}.jsonl")
            handle = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in write_datasets
            spool = self._datasets[dataset] = _DatasetSpool(dataset, path, handle)
        return spool

    def check(self, s: Sample, reject: Reject) -> Rejection | None:
        """Spool the item of `s` if it is new; a rejection if it conflicts with the one
        seen under its id, or cannot be written in the item format."""
        spool = self.spool(s.dataset)
        id_key = hash(s.item_id.casefold())
        content = hash((s.input, s.reference))
        known = spool.items.get(id_key)
        if known is not None:
            if known != content:
                return reject(s, "conflicting_item", f"item {s.item_id}")
            return None
        modality = _modality(s)
        extras = dict(s.item_extras)
        if s.choices and "choices" not in extras:
            extras["choices"] = s.choices
        record: dict[str, Any] = {
            "identifier": s.item_id,
            "prompt": s.input,
            "response": s.reference,
        }
        if s.difficulty is not None:
            record["difficulty"] = s.difficulty
        if s.task_prompt is not None:
            record["taskPrompt"] = s.task_prompt
        if "support" in extras:  # a spec attribute, not an ad hoc one
            record["support"] = extras.pop("support")
        error = None
        for candidate in (modality, None) if modality else (None,):
            fields = extras if candidate else extras | {"modalityAssumed": True}
            attempt = record | {
                "modality": candidate or Modality.SHORT_PROSE.value,
                "extras": fields,
            }
            try:
                Item.model_validate(attempt)
            except ValueError as exc:
                error = str(exc).splitlines()[-1].strip() if str(exc) else type(exc).__name__
                continue
            record, error = attempt, None
            break
        if error is not None:
            return reject(s, "invalid_item", f"item {s.item_id}: {error}"[:160])
        if candidate is None:
            spool.assumed_modality += 1
        spool.items[id_key] = content
        spool.handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        spool.count += 1
        return None

    def write(self, study_root: Location) -> dict[str, str]:
        """Write each dataset met (merged with one imported before under the same name) in
        the item format, pin it and snapshot it; returns name -> fingerprint. A name a study's
        own dataset has in this store becomes `<name>-imported`: its pin is never touched."""
        out: dict[str, str] = {}
        locks = read_locks(study_root)
        for met, spool in self._datasets.items():
            spool.handle.close()
            name = met
            location = study_root.join(DATASETS_DIR, name)
            pin = None if locks is None else locks.datasets.get(name)
            if pin is not None and pin.path != location.url:
                # a study's own dataset has this name: never re-pin it; ours gets a name of its own
                name = f"{met}-imported"
                location = study_root.join(DATASETS_DIR, name)
                pin = None if locks is None else locks.datasets.get(name)
            url = location.url
            existed = location.join(f"{name}.yaml").exists()
            meta = DatasetMeta(
                identifier=name,
                hasPart=[f"{name}.jsonl"],
                description=f"items imported into an itemeval store ({spool.count} new)",
                source="itemeval import",
            )
            from itemeval.datasets.format import write_dataset

            write_dataset(
                url, meta, self._merged_items(url if existed else None, spool), overwrite=True
            )
            handle = open_source(DatasetSource(name=name, path=url, format="items"))
            accept = [name] if pin is not None and pin.fingerprint != handle.fingerprint() else []
            pin_datasets(study_root, [handle], accept_changed=accept)
            fingerprint = handle.fingerprint()
            write_items_snapshot(
                self.store,
                name,
                fingerprint,
                (items_to_table(b) for b in handle.iter_batches(5000)),
            )
            out[name] = fingerprint
        return out

    def _merged_items(self, existing: str | None, spool: _DatasetSpool) -> Iterator[Item]:
        seen: set[str] = set()
        if existing is not None:
            for item in read_dataset(existing).iter_items():
                seen.add(item.identifier.casefold())
                yield item
        with open(spool.path, encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                if record["identifier"].casefold() in seen:
                    continue
                extras = record.pop("extras")
                try:
                    yield Item.model_validate(record | {"extras": extras})
                except ValueError as exc:
                    raise DatasetError(_item_problem(record["identifier"], exc)) from None

    @property
    def assumed(self) -> int:
        return sum(s.assumed_modality for s in self._datasets.values())

    def close(self) -> None:
        for spool in self._datasets.values():
            if not spool.handle.closed:
                spool.handle.close()
            if os.path.exists(spool.path):
                os.remove(spool.path)


def _item_problem(identifier: str, exc: Exception) -> Any:
    from itemeval.errors import Problem

    return Problem(
        f"item {identifier!r} cannot be written in the item format: {exc}".splitlines()[0]
    )


def _modality(s: Sample) -> str | None:
    if s.modality:
        try:
            return Modality.parse(s.modality).value
        except ValueError:
            pass
    if s.choices and 2 <= len(s.choices) <= MAX_CHOICES:
        return Modality.for_choices(len(s.choices)).value
    reference = s.reference.strip().casefold()
    if reference in ("true", "false", "yes", "no"):
        return Modality.BOOLEAN.value
    try:
        float(reference.replace(",", ""))
    except ValueError:
        return None
    return Modality.SINGLE_VALUE.value
