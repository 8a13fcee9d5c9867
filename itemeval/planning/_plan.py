"""Everything before the first model call: datasets and their pins, the grid, the items, the
pending sets, and the estimate.

`make_plan` only reads: a study with bad data, a changed dataset or an unaffordable estimate is
refused before anything is written. `commit_plan` then writes what a run needs in the store (the
dataset pins and the items snapshots), after the gate said yes.

Item selection: `--limit N`, or `budget.policy: dev` with `budget.dev_items`, keeps the first N
items of each dataset (in file order, so a dev run is a prefix of the full run and its rows are
reused). Every item of every dataset is still read and checked once: ids must be unique across
the study, and prose items need a judge.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from itemeval._util.heap import release_unused_memory, trim_heap
from itemeval.config import StudyConfig
from itemeval.datasets import WorkItem, check_pins, items_to_table, pin_datasets
from itemeval.datasets.adapters import DatasetHandle, StudyIds, open_source
from itemeval.errors import ConfigError, Problem, StoreError
from itemeval.planning._calibration import Calibration, cache_root_url, calibrate
from itemeval.planning._design import Design, build_design
from itemeval.planning._estimate import Estimate, build_estimate, condition_tiers
from itemeval.planning._imported import with_imported
from itemeval.planning._item_index import PartRun, SelectedItems, build_item_index, part_runs
from itemeval.planning._item_keys import ItemKeys
from itemeval.planning._item_scan import (
    SCAN_BATCH,
    DatasetScan,
    check_unique_across,
    merge_tables,
    scan_from_tables,
    scan_items,
    snapshot_batches,
    write_tables,
)
from itemeval.planning._tokens import TokenTables
from itemeval.providers.money import Pricing
from itemeval.store import (
    CellMasks,
    SnapshotInfo,
    StudyStore,
    pending_generate,
    pending_grade,
    read_snapshot_info,
    repeated_judge_cells,
    write_items_snapshot,
)

#: A run's plan keeps the items it read (as snapshot tables) up to this size, so that
#: `commit_plan` writes the snapshot without reading and validating the dataset a second time;
#: a larger dataset is read again there (memory stays flat at a million items).
KEPT_ITEMS_BYTES = 16 * 2**20
#: After a scan of at least this many items, planning hands the heap pages it freed back to the
#: system (`heap.release_unused_memory`). Below it the pages are few, and the collection and
#: trims (~70 ms on a 2-core machine) would only delay a small run's first request.
TRIM_AFTER_ITEMS = 100_000
PROSE = ("short-prose", "long-prose")


@dataclass
class DatasetPlan:
    handle: DatasetHandle
    fingerprint: str
    snapshot: SnapshotInfo | None
    items: int = 0
    selected: int = 0
    modalities: Counter[str] = field(default_factory=Counter)
    #: Every item read by `make_plan(keep_items=True)`, as snapshot tables (`ITEM_SCHEMA`), for
    #: `commit_plan`; None when the dataset has a snapshot or was too large to keep.
    kept: list[pa.Table] | None = field(default=None, repr=False)
    #: The planning pass over it, for `commit_plan` to keep its item tables.
    scan: DatasetScan | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.handle.name


@dataclass
class Plan:
    study: StudyConfig
    design: Design
    store: StudyStore
    datasets: list[DatasetPlan]
    items: pa.Table  # ITEM_INDEX_SCHEMA, the selected items (a run keeps the ids only)
    estimate: Estimate
    pending_generate: CellMasks | None  # keyed by generate condition id
    pending_grade: CellMasks | None  # keyed by (grade condition id, generate condition id)
    pricing: Pricing
    limit: int | None
    force: bool = False
    accept_changed: tuple[str, ...] = ()
    warnings: list[Problem] = field(default_factory=list)
    tokens: TokenTables | None = field(default=None, repr=False)  # the estimate's priors
    calibration: Calibration | None = field(default=None, repr=False)
    runs: list[PartRun] | None = field(default=None, repr=False)  # `item_runs`, once made

    @property
    def item_count(self) -> int:
        return self.items.num_rows

    def item_runs(self) -> list[PartRun]:
        """The item index cut where the snapshot part changes (made once)."""
        if self.runs is None:
            self.runs = part_runs(self.items)
        return self.runs

    def keep_only_item_ids(self) -> None:
        """For the rest of a run, which dispatches from the runs and the ids: the index's
        per-item dataset, fingerprint and part columns let go (12 bytes an item). `items` is
        then the `item_id` column only, so the plan serves that run and nothing else
        (`refresh_estimate` and the exports need the whole index)."""
        self.item_runs()
        self.items = self.items.select(["item_id"])

    @property
    def large_scan(self) -> bool:
        """Whether planning read enough items to hand its freed pages back (`TRIM_AFTER_ITEMS`)."""
        return _large_scan(self.datasets)


def _large_scan(datasets: Sequence[DatasetPlan]) -> bool:
    return sum(d.items for d in datasets) >= TRIM_AFTER_ITEMS


def selection_limit(study: StudyConfig, limit: int | None) -> int | None:
    """Items per dataset this run uses: `--limit`, else `dev_items` under the dev policy."""
    if limit is not None:
        if limit < 1:
            raise ConfigError(Problem("--limit must be at least 1", field="--limit"))
        return limit
    return study.budget.dev_items if study.budget.policy == "dev" else None


def make_plan(
    study: StudyConfig,
    *,
    store_url: str | None = None,
    limit: int | None = None,
    condition: str | None = None,
    force: bool = False,
    accept_changed: Sequence[str] = (),
    with_pending: bool = True,
    keep_items: bool = False,
    estimate: bool = True,
) -> Plan:
    """Read datasets, pins, store and prices; build the grid, pending sets and estimate.

    `keep_items`: a run that will commit the plan keeps the items it read (up to
    `KEPT_ITEMS_BYTES`) so that the items snapshot is written without a second scan.
    `estimate=False`: a reading command's plan (status, report, export): no token counts, no
    estimate (`Plan.estimate` empty, `Plan.tokens` None)."""
    pricing = Pricing.load(study.pricing_path)
    design = build_design(study)
    root_url = store_url or study.store_url
    storage = study.options_by_url(root_url)
    store = StudyStore.open(root_url, storage.for_url(root_url))
    imported: set[str] = set()
    if study.imported:  # answers another tool produced: graded here, never generated
        endpoint = study.models[0].endpoint  # a plan that reads adds the source's own grades
        design, imported = with_imported(
            design, store, study.imported, endpoint, with_grades=not with_pending
        )
    design = design.select(condition)
    per_dataset = selection_limit(study, limit)

    handles = [open_source(source, study.base_dir, storage) for source in study.datasets]
    check_pins(store.root, handles, accept_changed=accept_changed)
    datasets = [
        DatasetPlan(h, h.fingerprint(), read_snapshot_info(store, h.name, h.fingerprint()))
        for h in handles
    ]
    item_keys = ItemKeys(study)  # analysis.cluster_by, checked before anything is paid
    scans = _scan_datasets(
        design, datasets, per_dataset, item_keys, estimate=estimate, keep=keep_items
    )
    selections = [SelectedItems(d.name, d.fingerprint, d.selected) for d in datasets]
    items = build_item_index(selections, [scan.ids for scan in scans])
    tables = merge_tables(scans, design) if estimate else None
    # The id and token chunks just merged: their pages too (~35 MB at a million items).
    if _large_scan(datasets):
        release_unused_memory()
    if tables is not None and items.num_rows:
        tables.item_ids = _item_ids(items)
    _check_prose_has_judge(study, datasets)
    key_warnings = item_keys.check()

    pending_gen = pending_gr = calibration = None
    if with_pending:
        pending_gen, pending_gr = _pending(store, design, items, force)
        if imported:
            kept = {k: v for k, v in pending_gen.masks.items() if k not in imported}
            pending_gen = CellMasks(pending_gen.item_ids, pending_gen.epochs, kept)
        if tables is not None:
            calibration = _calibrate(study, design, tables, store, force)
    if tables is None:  # a reading command: no estimate
        plan_estimate = Estimate(items=items.num_rows, epochs=design.epochs)
    else:
        plan_estimate = build_estimate(
            design,
            tables,
            pricing,
            pending_generate=pending_gen,
            pending_grade=pending_gr,
            calibration=calibration,
            self_hosted=self_hosted_models(study, design),
            tiers=condition_tiers(design, study.endpoints),
            repeated_grade=_repeated(store, design, pending_gr, force),
        )
    warnings = [w for d in datasets for w in d.handle.warnings] + key_warnings
    return Plan(
        study=study,
        design=design,
        store=store,
        datasets=datasets,
        items=items,
        estimate=plan_estimate,
        pending_generate=pending_gen,
        pending_grade=pending_gr,
        pricing=pricing,
        limit=per_dataset,
        force=force,
        accept_changed=tuple(accept_changed),
        warnings=warnings,
        tokens=tables,
        calibration=calibration,
    )


def refresh_estimate(plan: Plan) -> Plan:
    """The plan re-estimated from what is stored now: pending cells read again, the calibration
    learned again from the store and the response cache (say, after a pilot run), the same items
    and priors (nothing is rendered again). Reads only."""
    assert plan.tokens is not None, "refresh_estimate needs a plan made by make_plan"
    pending_gen, pending_gr = _pending(plan.store, plan.design, plan.items, plan.force)
    calibration = _calibrate(plan.study, plan.design, plan.tokens, plan.store, plan.force)
    estimate = build_estimate(
        plan.design,
        plan.tokens,
        plan.pricing,
        pending_generate=pending_gen,
        pending_grade=pending_gr,
        calibration=calibration,
        self_hosted=self_hosted_models(plan.study, plan.design),
        tiers=condition_tiers(plan.design, plan.study.endpoints),
        repeated_grade=_repeated(plan.store, plan.design, pending_gr, plan.force),
    )
    return replace(
        plan,
        estimate=estimate,
        pending_generate=pending_gen,
        pending_grade=pending_gr,
        calibration=calibration,
    )


def restrict_plan(plan: Plan, only_items: Mapping[str, Collection[str]]) -> Plan:
    """The plan with the generate conditions of `only_items` narrowed to those item ids (their
    grade cells too), re-estimated; the other conditions as they were. Cells outside stay
    pending in the store: a later run without the restriction does them. Adaptive runs
    (`itemeval.irt._study_run`) dispatch their rounds through it. Reads only."""
    if plan.pending_generate is None or plan.pending_grade is None:
        return plan
    assert plan.tokens is not None, "restrict_plan needs a plan made by make_plan"
    ids = _item_ids(plan.items)

    inside = {
        condition: pc.is_in(ids, value_set=pa.array(list(wanted), pa.string())).to_numpy(
            zero_copy_only=False
        )[:, None]
        for condition, wanted in only_items.items()
    }

    def narrowed(masks: CellMasks, condition_of: Callable[[Any], str]) -> CellMasks:
        kept = {}
        for key, mask in masks.masks.items():
            within = inside.get(condition_of(key))
            kept[key] = mask if within is None else mask & within
        return CellMasks(masks.item_ids, masks.epochs, kept)

    gen = narrowed(plan.pending_generate, lambda key: key)
    grade = narrowed(plan.pending_grade, lambda key: key[1])
    repeated = _repeated(plan.store, plan.design, grade, plan.force)
    estimate = build_estimate(
        plan.design,
        plan.tokens,
        plan.pricing,
        pending_generate=gen,
        pending_grade=grade,
        calibration=plan.calibration,
        self_hosted=self_hosted_models(plan.study, plan.design),
        tiers=condition_tiers(plan.design, plan.study.endpoints),
        repeated_grade=repeated,
    )
    return replace(plan, estimate=estimate, pending_generate=gen, pending_grade=grade)


def _item_ids(items: pa.Table) -> pa.Array:
    """The selected ids as one array, the item index's own: `combine_chunks` copies even a
    single chunk, and the copy was held by both pending sets through the run (15 MB at a
    million items)."""
    column = items.column("item_id")
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _pending(
    store: StudyStore, design: Design, items: pa.Table, force: bool
) -> tuple[CellMasks, CellMasks]:
    item_ids = _item_ids(items)
    generate_ids = [c.id for c in design.generate]
    # ids were checked unique while the datasets were read
    pending_gen = pending_generate(
        store, generate_ids, item_ids, design.epochs, force=force, unique_ids=True
    )
    grade_ids = [c.id for c in design.grade]
    pending_gr = pending_grade(
        store, grade_ids, generate_ids, item_ids, design.epochs, force=force, unique_ids=True
    )
    return pending_gen, design.drop_self_pairs(pending_gr)


def _repeated(
    store: StudyStore, design: Design, pending_gr: CellMasks | None, force: bool
) -> CellMasks | None:
    """The pending judge cells that repeat another's request (sent once per run), from the
    solutions stored now; None without a store, or under `--force` (every call is made)."""
    if pending_gr is None or force:
        return None
    # A pairwise request holds the baseline's answer too: not the same as another cell's.
    judges = [c.id for c in design.judges if c.pairwise is None]
    return repeated_judge_cells(store, pending_gr, [c.id for c in design.generate], judges)


def _calibrate(
    study: StudyConfig, design: Design, tables: TokenTables, store: StudyStore, force: bool
) -> Calibration:
    """Learn the estimate's corrections from the rows stored now (store and response cache)."""
    cache_url = cache_root_url(study.cache.enabled, study.cache_url, store)
    options = study.options_by_url(store.root.url).for_url(cache_url)
    return calibrate(design, tables.priors(design), store, cache_url, options, force=force)


def commit_plan(plan: Plan) -> None:
    """Pin the datasets and write missing items snapshots (the first writes of a run)."""
    pin_datasets(
        plan.store.root, [d.handle for d in plan.datasets], accept_changed=plan.accept_changed
    )
    for dataset in plan.datasets:
        if dataset.snapshot is None:
            kept, dataset.kept = dataset.kept, None
            batches = iter(kept) if kept is not None else _reread(dataset.handle)
            dataset.snapshot = write_items_snapshot(
                plan.store, dataset.name, dataset.fingerprint, batches
            )
    keep_item_tables(plan)


def keep_item_tables(plan: Plan) -> None:
    """Write the item tables the plan's pass made beside the datasets' snapshots (what the next
    plan reads instead of every item); a run with nothing to do keeps them too. Derived data:
    a failed write costs the next plan time, nothing else."""
    for dataset in plan.datasets:
        if dataset.scan is not None and dataset.snapshot is not None:
            with contextlib.suppress(OSError, StoreError):
                write_tables(plan.design, dataset.snapshot, dataset.scan)
            dataset.scan = None


def _reread(handle: DatasetHandle) -> Iterator[pa.Table]:
    """A dataset too large to keep, read again as snapshot tables (`heap.trim_heap` after
    every batch: at a million items the driver left the commit holding ~20 MB less, measured
    without Ray)."""
    for batch in handle.iter_batches(SCAN_BATCH):
        yield items_to_table(batch)
        trim_heap()


def _scan_datasets(
    design: Design,
    datasets: list[DatasetPlan],
    per_dataset: int | None,
    item_keys: ItemKeys,
    *,
    estimate: bool,
    keep: bool,
) -> list[DatasetScan]:
    """Each dataset's pass (`_item_scan`): from its snapshot's item tables when it has them,
    else item by item. Keeps what `commit_plan` needs (the items read, up to
    `KEPT_ITEMS_BYTES`; the scans, to keep their tables)."""
    ids = StudyIds()
    kept_bytes = 0
    scans: list[DatasetScan] = []
    several = len(datasets) > 1

    def keep_for_commit(plan: DatasetPlan, batch: list[WorkItem]) -> None:
        nonlocal kept_bytes
        if _large_scan(datasets):  # the free pages of the batches before
            trim_heap()
        if plan.kept is None:
            return
        table = items_to_table(batch)
        kept_bytes += table.nbytes
        if kept_bytes > KEPT_ITEMS_BYTES:  # too large to hold: commit_plan reads it again
            for other in datasets:
                other.kept = None
            return
        plan.kept.append(table)

    for number, plan in enumerate(datasets, 1):
        scan = None
        if plan.snapshot is not None:
            rows = plan.snapshot.rows
            selected = rows if per_dataset is None else min(per_dataset, rows)
            scan = scan_from_tables(
                design,
                plan.snapshot,
                selected,
                estimate=estimate,
                need_keys=item_keys.wanted is not None,
            )
        if scan is None:
            if keep and plan.snapshot is None and kept_bytes <= KEPT_ITEMS_BYTES:
                plan.kept = []
            batches = (
                snapshot_batches(plan.snapshot)
                if plan.snapshot is not None
                else plan.handle.iter_batches(SCAN_BATCH)
            )
            scan = scan_items(
                design,
                plan.name,
                batches,
                per_dataset,
                ids,
                last=number == len(datasets),
                estimate=estimate,
                keep_every=several,
                on_batch=functools.partial(keep_for_commit, plan),
            )
            if _large_scan(datasets):  # the scan's transients are garbage now
                release_unused_memory()
        item_keys.see_counts(scan.key_counts)
        plan.items = scan.items
        plan.selected = len(scan.ids)
        plan.modalities = scan.modalities
        plan.scan = scan
        scans.append(scan)
    if any(scan.from_tables for scan in scans):
        check_unique_across([(d.name, scan) for d, scan in zip(datasets, scans, strict=True)])
    for scan in scans:
        scan.every_id = None
    return scans


def _check_prose_has_judge(study: StudyConfig, datasets: list[DatasetPlan]) -> None:
    if study.facets.grader:
        return
    prose = [
        f"{d.name} ({sum(d.modalities[m] for m in PROSE)} prose items)"
        for d in datasets
        if any(d.modalities[m] for m in PROSE)
    ]
    if prose:
        raise ConfigError(
            Problem(
                "short-prose and long-prose items need an LLM judge, and this study has none: "
                + ", ".join(prose),
                file=str(study.path) if study.path else None,
                field="facets.grader",
                hint="add a judge under `graders:` and name it in `facets.grader` "
                "(verifiable scorers cannot grade free text reliably)",
            )
        )


def self_hosted_models(study: StudyConfig, design: Design) -> frozenset[str]:
    """Models whose endpoints are the user's own servers (loopback or `self_hosted: true`)."""
    models = {c.model_id for c in design.generate if study.endpoints[c.endpoint].free_unless_priced}
    models |= {
        c.label
        for c in design.judges
        if c.endpoint and study.endpoints[c.endpoint].free_unless_priced
    }
    return frozenset(models)
