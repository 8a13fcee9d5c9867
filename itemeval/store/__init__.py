"""The keyed parquet store of a study, and the response cache shared between studies.

The public names are `__all__` below: what the CLI, the runtime, the readers (export, view,
importing), the benchmarks and scripts use. One module stays public: `fragments`, the on-disk
fragment format (atomic writes, listing, parallel reads), which every reader and writer of the
store and the benchmarks import directly. The other modules are private, one per concern:

* `_schemas`   the arrow schemas of solutions, grades and cached responses; the write gates
* `_layout`    where everything lives under a study root; `StudyStore` (write, read, dedup)
* `fragments`  immutable parquet fragments: atomic writes, listing, parallel re-listing reads
* `_dedup`     one logical row per key (ok beats error, then the latest write)
* `_items`     the items snapshot that workers read part by part
* `_positions` where stored rows' items are among a run's selected items (`ItemLookup`)
* `_pending`   resume sets: pending generate and grade cells as boolean masks over the items
* `_current_solutions` where each cell's current solution is (`solution_index`)
* `_content_keys` a 64-bit key per content hash (`hash_keys`)
* `_identical` pending judge cells that repeat another's request (sent once per run)
* `_selection` `--condition` selections
* `_status`    counts per condition for `itemeval status`
* `_compact`   merge a partition's small fragments, safely while others read and write
* `_summary`   a partition's cells read through its summary (or from every row)
* `_summary_file` the summary kept beside a partition: its cells (one row per key), written, read
* `_cache`     the content-keyed response cache
* `_manifest`  `manifests/<run_id>.json`
"""

from itemeval.store._cache import (
    RESPONSES,
    STUDY_CACHE_DIR,
    LegacyLookup,
    ResponseCache,
    cache_group,
    cache_key,
    default_cache_url,
    legacy_cache_key,
    request_hashes,
)
from itemeval.store._compact import CompactionResult, compact, rebuild_summaries
from itemeval.store._current_solutions import SolutionIndex, solution_index
from itemeval.store._dedup import best_row_indices, keys_present
from itemeval.store._identical import IdenticalCells, repeated_judge_cells
from itemeval.store._items import (
    ITEMS_PER_PART,
    SnapshotInfo,
    read_item_ids,
    read_items_part,
    read_snapshot_info,
    write_items_snapshot,
)
from itemeval.store._layout import GRADES, SOLUTIONS, STAGES, Stage, StudyStore, partition_dir
from itemeval.store._manifest import (
    CompactionRecord,
    ConditionRecord,
    DatasetRecord,
    EstimateRecord,
    HostRecord,
    RunManifest,
    RunsSpend,
    SpendRecord,
    StageCounts,
    host_record,
    latest_manifest,
    list_manifests,
    read_manifest,
    runs_spend,
    write_manifest_end,
    write_manifest_start,
)
from itemeval.store._pending import CellMasks, pending_generate, pending_grade
from itemeval.store._positions import ItemLookup, string_hashes
from itemeval.store._schemas import (
    GRADE_SCHEMA,
    RESPONSE_SCHEMA,
    SOLUTION_SCHEMA,
    STATUS_ERROR,
    STATUS_OK,
    TIER_BATCH,
    TIMESTAMP,
    Column,
    conform_older,
    fill_columns,
    text_hash,
)
from itemeval.store._selection import select_conditions
from itemeval.store._status import ConditionStatus, status_counts
from itemeval.store._summary import PartitionCells, PartitionGroups, summaries_enabled
from itemeval.store._summary import read_cells as read_partition_cells
from itemeval.store._summary import read_groups as read_partition_groups

__all__ = [
    "GRADES",
    "GRADE_SCHEMA",
    "ITEMS_PER_PART",
    "RESPONSES",
    "RESPONSE_SCHEMA",
    "SOLUTIONS",
    "SOLUTION_SCHEMA",
    "STAGES",
    "STATUS_ERROR",
    "STATUS_OK",
    "STUDY_CACHE_DIR",
    "TIER_BATCH",
    "TIMESTAMP",
    "CellMasks",
    "Column",
    "CompactionRecord",
    "CompactionResult",
    "ConditionRecord",
    "ConditionStatus",
    "DatasetRecord",
    "EstimateRecord",
    "HostRecord",
    "IdenticalCells",
    "ItemLookup",
    "LegacyLookup",
    "PartitionCells",
    "PartitionGroups",
    "ResponseCache",
    "RunManifest",
    "RunsSpend",
    "SnapshotInfo",
    "SolutionIndex",
    "SpendRecord",
    "Stage",
    "StageCounts",
    "StudyStore",
    "best_row_indices",
    "cache_group",
    "cache_key",
    "compact",
    "conform_older",
    "default_cache_url",
    "fill_columns",
    "host_record",
    "keys_present",
    "latest_manifest",
    "legacy_cache_key",
    "list_manifests",
    "partition_dir",
    "pending_generate",
    "pending_grade",
    "read_item_ids",
    "read_items_part",
    "read_manifest",
    "read_partition_cells",
    "read_partition_groups",
    "read_snapshot_info",
    "rebuild_summaries",
    "repeated_judge_cells",
    "request_hashes",
    "runs_spend",
    "select_conditions",
    "solution_index",
    "status_counts",
    "string_hashes",
    "summaries_enabled",
    "text_hash",
    "write_items_snapshot",
    "write_manifest_end",
    "write_manifest_start",
]
