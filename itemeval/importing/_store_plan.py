"""A plan read from a store alone, without a study file: what `report`, `status` and `export`
use with `--store URL` and no STUDY (and `Study.from_store` in Python).

What a store says about itself:

* its datasets: `dataset_locks.json` (name, fingerprint, where it was read from) and the items
  snapshot of each pinned fingerprint (datasets without a snapshot were never run);
* its conditions: the import records (`imports/*.json`: everything the source stated) and the
  manifests of native runs (each condition's id, slug and the payload its id hashes: model,
  sampling parameters, prompt and rubric names and hashes; the templates' texts are not in a
  manifest, so a store-only export of a native condition has no prompt text);
* its epochs: the largest stored epoch plus one.

Nothing is written and no endpoint is called: the plan serves reading only.
"""

from __future__ import annotations

import os
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from itemeval.config import StudyConfig
from itemeval.datasets import read_locks
from itemeval.datasets.adapters import DatasetSource
from itemeval.errors import InputError, Problem
from itemeval.ids import slugify
from itemeval.planning import (
    DatasetPlan,
    Design,
    Estimate,
    GenerateCondition,
    GradeCondition,
    Plan,
    SelectedItems,
    build_item_index,
)
from itemeval.planning._import_records import ImportRecord, read_imports
from itemeval.planning._imported import distinct_slugs, imported_generate, imported_grade
from itemeval.providers.money import Pricing
from itemeval.providers.types import SamplingParams
from itemeval.store import (
    GRADES,
    SOLUTIONS,
    StudyStore,
    list_manifests,
    read_item_ids,
    read_manifest,
    read_snapshot_info,
)
from itemeval.templates import Kind, Template


class StoredDataset:
    """A dataset as the store's lock file names it (enough for the exports' source fields)."""

    def __init__(self, name: str, path: str, format: str, revision: str | None) -> None:
        self.name = name
        self.url = path
        self.format = format
        self.source = DatasetSource.model_construct(
            # The lock file's format, as recorded (unvalidated, like the rest of this copy).
            name=name,
            path=path,
            format=cast(Any, format),
            revision=revision,
            split=None,
            subset=None,
        )
        self.warnings: list[Problem] = []


def store_plan(
    store_url: str,
    *,
    condition: list[str] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Plan:
    """The plan of everything stored at `store_url` (see the module doc)."""
    store = StudyStore.open(store_url, storage_options)
    imports = read_imports(store)
    locks = read_locks(store.root)
    if locks is None and not imports and not list_manifests(store):
        raise InputError(
            Problem(
                "no itemeval store here (no dataset_locks.json, imports or manifests)",
                file=store.root.url,
                hint="give the store a study wrote to, or `itemeval import` into it first",
            )
        )
    datasets: list[DatasetPlan] = []
    ids: list[pa.Array] = []
    selections: list[SelectedItems] = []
    for name, pin in sorted((locks.datasets if locks else {}).items()):
        snapshot = read_snapshot_info(store, name, pin.fingerprint)
        if snapshot is None:
            continue
        handle = StoredDataset(name, pin.path, pin.format, pin.revision)
        datasets.append(
            DatasetPlan(
                handle=handle,  # type: ignore[arg-type]
                fingerprint=pin.fingerprint,
                snapshot=snapshot,
                items=snapshot.rows,
                selected=snapshot.rows,
            )
        )
        ids.append(read_item_ids(snapshot))
        selections.append(SelectedItems(name, pin.fingerprint, snapshot.rows))
    items = build_item_index(selections, ids)
    generate, grade = _native_conditions(store)
    for record in imports:
        for g in record.generate:
            generate.setdefault(g.id, imported_generate(g))
        for r in record.grade:
            grade.setdefault(r.id, imported_grade(r))
    ordered_grade = [c for c in grade.values() if c.kind == "judge"] + [
        c for c in grade.values() if c.kind == "scorer"
    ]
    design = Design(
        generate=tuple(distinct_slugs(list(generate.values()))),
        grade=tuple(ordered_grade),
        epochs=_epochs(store, list(generate), imports),
    ).select(condition)
    study = _study(store, imports)
    return Plan(
        study=study,
        design=design,
        store=store,
        datasets=datasets,
        items=items,
        estimate=Estimate(items=items.num_rows, epochs=design.epochs),
        pending_generate=None,
        pending_grade=None,
        pricing=Pricing.load(None),
        limit=None,
    )


def _study(store: StudyStore, imports: list[ImportRecord]) -> StudyConfig:
    named = {r.study for r in imports if r.study}
    name = named.pop() if len(named) == 1 else None
    if name is None:
        name = slugify(os.path.basename(store.root.path.rstrip("/")) or "store")
    return StudyConfig.model_construct(
        study=name,
        description=f"the store at {store.root.url}",
        store=store.root.url,
        datasets=[],
        endpoints={},
        models=[],
    )


def _epochs(store: StudyStore, generate: list[str], imports: list[ImportRecord]) -> int:
    epochs = max((r.epochs for r in imports), default=1)
    stored = store.read_by_condition(SOLUTIONS, generate, ["epoch"]) if generate else {}
    for table in stored.values():
        if table.num_rows:
            epochs = max(epochs, int(pc.max(table.column("epoch")).as_py()) + 1)
    return epochs


def _native_conditions(
    store: StudyStore,
) -> tuple[dict[str, GenerateCondition], dict[str, GradeCondition]]:
    """The conditions native runs recorded in their manifests (latest run first wins)."""
    generate: dict[str, GenerateCondition] = {}
    grade: dict[str, GradeCondition] = {}
    stored_generate = set(store.condition_ids(SOLUTIONS))
    stored_grade = set(store.condition_ids(GRADES))
    for run_id in list_manifests(store):
        for c in read_manifest(store, run_id).conditions:
            payload = c.payload
            if c.stage == "generate" and c.id in stored_generate:
                prompt = payload.get("prompt") or {}
                params: dict[str, Any] = {
                    k: tuple(v) if isinstance(v, list) else v
                    for k, v in (payload.get("params") or {}).items()
                    if k in SamplingParams.__slots__
                }
                generate[c.id] = GenerateCondition(
                    id=c.id,
                    slug=c.slug,
                    model_id=str(payload.get("model")),
                    model_label=str(payload.get("model")),
                    endpoint="",
                    prompt=_manifest_template(prompt, "prompt"),
                    config_name="",
                    params=SamplingParams(**params),
                    payload=payload,
                )
            elif c.stage == "grade" and c.id in stored_grade:
                if "scorer" in payload:
                    grade[c.id] = GradeCondition(
                        id=c.id,
                        slug=c.slug,
                        kind="scorer",
                        payload=payload,
                        scorer=str(payload["scorer"]),
                    )
                else:
                    rubric = payload.get("rubric") or {}
                    grader = payload.get("grader") or {}
                    grade[c.id] = GradeCondition(
                        id=c.id,
                        slug=c.slug,
                        kind="judge",
                        payload=payload,
                        grader_name=c.slug.split("_", 1)[0],
                        model_id=grader.get("model"),
                        endpoint="",
                        rubric=_manifest_template(rubric, "rubric"),
                    )
    return generate, grade


def _manifest_template(named: dict[str, Any], kind: Kind) -> Template:
    """A prompt or rubric as a run manifest names it: its name and hash, not its text."""
    return Template(
        name=str(named.get("name")),
        kind=kind,
        text="",
        sha256=str(named.get("sha256") or ""),
        source="manifest",
    )
