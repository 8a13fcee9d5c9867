"""The store read as tables: what `itemeval export` streams and what the report counts.

Reads only; never writes the store.

* `columns`     the long table's schema, column by column
* `conditions`  readable facets of the design's conditions; which grader is primary
* `fetch`       the logical rows of a partition, then only those rows, a batch at a time
* `pairs`       a condition pair's state (every key, where its rows are, a fingerprint) from the
                store's cells or advanced by new fragments; the long-table rows it gives
* `scan`        the long table as a stream of batches, one condition pair after another
* `cells`       the small columns of every grade and solution, in memory, for the report
"""
