"""The items of an import: spooled to a temporary file as they are met (held in memory as
two 64-bit hashes each: id and content), then written per dataset in the item format under
`imported/datasets/<name>/`, merged with the items imported before under that name, pinned in
`dataset_locks.json` and snapshot like any study's dataset.

The store keys a row by its item id alone, so an item id is never in two datasets: an item
whose id another dataset of the store (or of this import) holds is a `conflicting_item`, and so
is one whose id the same dataset holds with another input or reference, whether that item came
in this import or an earlier one. (Items of other tools never meet the first rule: their ids are
qualified by their dataset, `_model.qualified_id`; it guards what a source names itself.)"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from itemeval.datasets import items_to_table, pin_datasets, read_locks
from itemeval.datasets.adapters import DatasetSource, open_source
from itemeval.datasets.format import MAX_CHOICES, DatasetMeta, Item, Modality, read_dataset
from itemeval.errors import DatasetError
from itemeval.importing._keys import KeySet
from itemeval.importing._model import Rejection, Sample
from itemeval.storage import Location
from itemeval.store._items import read_item_ids, read_snapshot_info, write_items_snapshot
from itemeval.store._layout import StudyStore

DATASETS_DIR = "imported/datasets"
Reject = Callable[[Sample, str, str], Rejection]


@dataclass
class _DatasetSpool:
    name: str  # as stored (`<met>-imported` beside a study's own dataset of that name)
    path: str
    handle: Any
    items: dict[int, int] = field(default_factory=dict)  # id key -> content key
    count: int = 0
    assumed_modality: int = 0


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def item_reference(reference: str, choices: list[str] | None) -> str:
    """The reference as the item format states it: for an item with choices, the letter of the
    right choice where the source gives the choice's text or its index (the Every Eval Ever
    converters write lm-eval's label index, `"1"`); otherwise as stated."""
    if not choices or len(choices) > len(LETTERS):
        return reference
    text = reference.strip()
    if len(text) == 1 and text in LETTERS[: len(choices)]:
        return text
    if text in choices:
        return LETTERS[choices.index(text)]
    if text.isdigit() and int(text) < len(choices):
        return LETTERS[int(text)]
    return reference


def content_key(prompt: str, response: str) -> int:
    """What makes two items with one id the same item."""
    return hash((prompt, response))


class ImportedItems:
    """The datasets an import meets (see the module doc)."""

    def __init__(self, store: StudyStore, spool_dir: str) -> None:
        self.store = store
        self.spool_dir = spool_dir
        self._datasets: dict[str, _DatasetSpool] = {}
        self._locks = read_locks(store.root)
        self._ids: KeySet | None = None  # every item id of the store and this import
        self._owned = KeySet()  # (dataset, id) of the same

    def _stored_name(self, met: str) -> str:
        """The name a dataset met is stored under: a name a study's own dataset has in this
        store is never re-pinned, ours becomes `<name>-imported`."""
        pin = None if self._locks is None else self._locks.datasets.get(met)
        ours = self.store.root.join(DATASETS_DIR, met).url
        return met if pin is None or pin.path == ours else f"{met}-imported"

    def _store_ids(self) -> KeySet:
        """The ids of every dataset the store holds a snapshot of (read at the first item)."""
        if self._ids is None:
            self._ids = KeySet()
            for name, pin in (self._locks.datasets if self._locks else {}).items():
                snapshot = read_snapshot_info(self.store, name, pin.fingerprint)
                if snapshot is None:
                    continue
                folded = [str(i).casefold() for i in read_item_ids(snapshot).to_pylist()]
                self._ids.add_many(np.array([hash(i) for i in folded], dtype=np.int64))
                self._owned.add_many(np.array([hash((name, i)) for i in folded], dtype=np.int64))
        return self._ids

    def spool(self, dataset: str) -> _DatasetSpool:
        spool = self._datasets.get(dataset)
        if spool is None:
            path = os.path.join(self.spool_dir, f"{len(self._datasets)}.jsonl")
            handle = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in write_datasets
            name = self._stored_name(dataset)
            spool = self._datasets[dataset] = _DatasetSpool(name, path, handle)
            self._read_stored(spool)
        return spool

    def _read_stored(self, spool: _DatasetSpool) -> None:
        """The items an earlier import wrote under this name: a new item with one of their ids
        must be the same item."""
        location = self.store.root.join(DATASETS_DIR, spool.name)
        if not location.join(f"{spool.name}.yaml").exists():
            return
        for item in read_dataset(location.url).iter_items():
            spool.items[hash(item.key)] = content_key(item.prompt, item.response)

    def check(self, s: Sample, reject: Reject) -> Rejection | None:
        """Spool the item of `s` if it is new; a rejection if it conflicts with the one
        seen under its id (in its dataset or another), or cannot be written in the item
        format."""
        spool = self.spool(s.dataset)
        folded = s.item_id.casefold()
        id_key = hash(folded)
        reference = item_reference(s.reference, s.choices)
        content = content_key(s.input, reference)
        known = spool.items.get(id_key)
        if known is not None:
            if known != content:
                return reject(s, "conflicting_item", f"item {s.item_id}")
            return None
        ids = self._store_ids()
        if id_key in ids and hash((spool.name, folded)) not in self._owned:
            return reject(s, "conflicting_item", f"item {s.item_id} is an item of another dataset")
        modality = _modality(s)
        extras = dict(s.item_extras)
        if s.choices and "choices" not in extras:
            extras["choices"] = s.choices
        record: dict[str, Any] = {
            "identifier": s.item_id,
            "prompt": s.input,
            "response": reference,
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
        ids.add(id_key)
        self._owned.add(hash((spool.name, folded)))
        spool.handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        spool.count += 1
        return None

    def write(self, study_root: Location) -> dict[str, str]:
        """Write each dataset met (merged with one imported before under the same name) in
        the item format, pin it and snapshot it; returns name -> fingerprint. A name a study's
        own dataset has in this store becomes `<name>-imported`: its pin is never touched."""
        out: dict[str, str] = {}
        locks = read_locks(study_root)
        for spool in self._datasets.values():
            spool.handle.close()
            if spool.count == 0:  # no new item (all held already, or rejected): as pinned
                pin = None if locks is None else locks.datasets.get(spool.name)
                if pin is not None:
                    out[spool.name] = pin.fingerprint
                continue
            name = spool.name
            location = study_root.join(DATASETS_DIR, name)
            pin = None if locks is None else locks.datasets.get(name)
            url = location.url
            existed = location.join(f"{name}.yaml").exists()
            meta = DatasetMeta(
                identifier=name,
                has_part=[f"{name}.jsonl"],
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
    if s.choices:  # choiceofN as far as the item format has it (letters A..)
        if 2 <= len(s.choices) <= MAX_CHOICES:
            return Modality.for_choices(len(s.choices)).value
        return None
    reference = s.reference.strip().casefold()
    if reference in ("true", "false", "yes", "no"):
        return Modality.BOOLEAN.value
    try:
        float(reference.replace(",", ""))
    except ValueError:
        return None
    return Modality.SINGLE_VALUE.value
