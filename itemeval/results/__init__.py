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

from itemeval._util.lazy import lazy_exports

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
