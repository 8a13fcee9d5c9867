"""A study's results read from its store: the cells every analysis counts, the long table, the
rows fetched by key, the conditions' facets. Reads only; never writes the store.

`statistics`, `judging` and `irt` read through it, `export` streams the long table from it, the
report and the viewer count its cells; it imports none of them (tests/core/test_floors.py). The
public names are `__all__` below, imported on first use; the modules are private:

* `_columns`     the long table's schema, column by column
* `_conditions`  readable facets of the design's conditions; which grader is primary
* `_fetch`       the logical rows of a partition, then only those rows, a batch at a time
* `_pairs`       a condition pair's state (every key, where its rows are, a fingerprint) from the
                 store's cells or advanced by new fragments; the long-table rows it gives
* `_scan`        the long table as a stream of batches, one condition pair after another
* `_cells`       the small columns of every grade and solution, in memory (`StudyCells`)
* `_priced`      what the response cache's answers cost at their calls' prices
* `_clusters`    `analysis.cluster_by`: a cluster code per selected item, read from the items
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

if TYPE_CHECKING:
    from itemeval.results._cells import GRADE_CELL_COLUMNS as GRADE_CELL_COLUMNS
    from itemeval.results._cells import SOLUTION_CELL_COLUMNS as SOLUTION_CELL_COLUMNS
    from itemeval.results._cells import SolutionsHook as SolutionsHook
    from itemeval.results._cells import StudyCells as StudyCells
    from itemeval.results._cells import read_cells as read_cells
    from itemeval.results._clusters import Clusters as Clusters
    from itemeval.results._clusters import item_clusters as item_clusters
    from itemeval.results._clusters import study_clusters as study_clusters
    from itemeval.results._columns import ITEM_FIELDS as ITEM_FIELDS
    from itemeval.results._columns import LONG_COLUMNS as LONG_COLUMNS
    from itemeval.results._columns import LONG_TABLE_SCHEMA as LONG_TABLE_SCHEMA
    from itemeval.results._conditions import DesignFacets as DesignFacets
    from itemeval.results._conditions import GenerateFacets as GenerateFacets
    from itemeval.results._conditions import GradeFacets as GradeFacets
    from itemeval.results._conditions import primary_grader as primary_grader
    from itemeval.results._fetch import FRAG as FRAG
    from itemeval.results._fetch import POS as POS
    from itemeval.results._fetch import GradePartition as GradePartition
    from itemeval.results._fetch import ItemFetcher as ItemFetcher
    from itemeval.results._fetch import PartitionRows as PartitionRows
    from itemeval.results._fetch import RowFetcher as RowFetcher
    from itemeval.results._fetch import locate_logical_rows as locate_logical_rows
    from itemeval.results._fetch import plain_columns as plain_columns
    from itemeval.results._pairs import STATE_SCHEMA as STATE_SCHEMA
    from itemeval.results._pairs import PairRows as PairRows
    from itemeval.results._pairs import Selection as Selection
    from itemeval.results._pairs import advance_state as advance_state
    from itemeval.results._pairs import content_digest as content_digest
    from itemeval.results._pairs import holding as holding
    from itemeval.results._pairs import key_strings as key_strings
    from itemeval.results._pairs import ordered_rows as ordered_rows
    from itemeval.results._pairs import read_state as read_state
    from itemeval.results._pairs import row_words as row_words
    from itemeval.results._pairs import words as words
    from itemeval.results._priced import call_usd as call_usd
    from itemeval.results._scan import DEFAULT_BATCH_ROWS as DEFAULT_BATCH_ROWS
    from itemeval.results._scan import LongTableScan as LongTableScan
    from itemeval.results._scan import Pair as Pair
    from itemeval.results._scan import ScanCounts as ScanCounts

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _cells: GRADE_CELL_COLUMNS SOLUTION_CELL_COLUMNS SolutionsHook StudyCells read_cells
    _clusters: Clusters item_clusters study_clusters
    _columns: ITEM_FIELDS LONG_COLUMNS LONG_TABLE_SCHEMA
    _conditions: DesignFacets GenerateFacets GradeFacets primary_grader
    _fetch: FRAG POS GradePartition ItemFetcher PartitionRows RowFetcher locate_logical_rows
            plain_columns
    _pairs: STATE_SCHEMA PairRows Selection advance_state content_digest holding key_strings
            ordered_rows read_state row_words words
    _priced: call_usd
    _scan: DEFAULT_BATCH_ROWS LongTableScan Pair ScanCounts
    """,
)
