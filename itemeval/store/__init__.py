"""The keyed parquet store of a study, and the response cache shared between studies.

The map, one module per concern:

* `schemas`   the arrow schemas of solutions, grades and cached responses; the write gates
* `layout`    where everything lives under a study root; `StudyStore` (write, read, dedup)
* `fragments` immutable parquet fragments: atomic writes, listing, parallel re-listing reads
* `dedup`     one logical row per key (ok beats error, then the latest write)
* `items`     the items snapshot that workers read part by part
* `pending`   resume sets: pending generate and grade cells as boolean masks over the items
* `identical` pending judge cells that repeat another's request (sent once per run)
* `selection` `--condition` selections
* `status`    counts per condition for `itemeval status`
* `compact`   rewrite a partition into one fragment, safely while others read and write
* `cache`     the content-keyed response cache
* `manifest`  `manifests/<run_id>.json`
"""

from itemeval.store.cache import (
    STUDY_CACHE_DIR,
    LegacyLookup,
    ResponseCache,
    cache_group,
    cache_key,
    default_cache_url,
    legacy_cache_key,
    request_content,
    request_hash,
    request_hashes,
)
from itemeval.store.compact import CompactionResult, compact, compact_partition
from itemeval.store.current_solutions import SolutionIndex, solution_index
from itemeval.store.dedup import deduplicate
from itemeval.store.identical import IdenticalCells, repeated_judge_cells
from itemeval.store.items import (
    ITEMS_PER_PART,
    SnapshotInfo,
    read_item_ids,
    read_items,
    read_items_part,
    read_snapshot_info,
    write_items_snapshot,
)
from itemeval.store.layout import GRADES, SOLUTIONS, STAGES, Stage, StudyStore
from itemeval.store.manifest import (
    ConditionRecord,
    DatasetRecord,
    EstimateRecord,
    HostRecord,
    RunManifest,
    RunsSpend,
    SpendRecord,
    StageCounts,
    latest_manifest,
    list_manifests,
    read_manifest,
    runs_spend,
    write_manifest_end,
    write_manifest_start,
)
from itemeval.store.pending import (
    GENERATE_CELL_SCHEMA,
    GRADE_CELL_SCHEMA,
    CellMasks,
    pending_generate,
    pending_grade,
)
from itemeval.store.schemas import (
    GRADE_SCHEMA,
    RESPONSE_SCHEMA,
    SOLUTION_SCHEMA,
    STATUS_ERROR,
    STATUS_OK,
    TIER_BATCH,
    TIER_LIVE,
    TIERS,
    build_table,
    check_table,
    text_hash,
)
from itemeval.store.selection import select_conditions
from itemeval.store.status import ConditionStatus, status_counts, status_table

__all__ = [
    "GENERATE_CELL_SCHEMA",
    "GRADES",
    "GRADE_CELL_SCHEMA",
    "GRADE_SCHEMA",
    "ITEMS_PER_PART",
    "RESPONSE_SCHEMA",
    "SOLUTIONS",
    "SOLUTION_SCHEMA",
    "STAGES",
    "STATUS_ERROR",
    "STATUS_OK",
    "STUDY_CACHE_DIR",
    "TIERS",
    "TIER_BATCH",
    "TIER_LIVE",
    "CellMasks",
    "CompactionResult",
    "ConditionRecord",
    "ConditionStatus",
    "DatasetRecord",
    "EstimateRecord",
    "HostRecord",
    "IdenticalCells",
    "LegacyLookup",
    "ResponseCache",
    "RunManifest",
    "RunsSpend",
    "SnapshotInfo",
    "SolutionIndex",
    "SpendRecord",
    "Stage",
    "StageCounts",
    "StudyStore",
    "build_table",
    "cache_group",
    "cache_key",
    "check_table",
    "compact",
    "compact_partition",
    "deduplicate",
    "default_cache_url",
    "latest_manifest",
    "legacy_cache_key",
    "list_manifests",
    "pending_generate",
    "pending_grade",
    "read_item_ids",
    "read_items",
    "read_items_part",
    "read_manifest",
    "read_snapshot_info",
    "repeated_judge_cells",
    "request_content",
    "request_hash",
    "request_hashes",
    "runs_spend",
    "select_conditions",
    "solution_index",
    "status_counts",
    "status_table",
    "text_hash",
    "write_items_snapshot",
    "write_manifest_end",
    "write_manifest_start",
]
