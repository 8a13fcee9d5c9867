"""Results: the long table, Every Eval Ever records, and the report.

The map, one module per concern:

* `columns`     the long table's schema, column by column
* `conditions`  readable facets of the design's conditions; which grader is primary
* `fetch`       the logical rows of a partition, then only those rows, a batch at a time
* `scan`        the long table as a stream of batches, one condition pair after another
* `outputs`     output directories at any fsspec URL, files written wholly or not at all
* `longtable`   `export_study`: parquet, CSV and Every Eval Ever in one streaming pass
* `eee/`        Every Eval Ever: records, aggregates, the streaming writer, the JSON schemas
* `stats`       bootstrap intervals over items, agreement and Cohen's kappa
* `cells`       the small columns of every grade and solution, in memory, for the report
* `report/`     `write_report`: report.html and report.md (its own map is in its docstring)
"""

from itemeval.export.columns import LONG_COLUMNS, LONG_TABLE_SCHEMA
from itemeval.export.eee.records import EEE_VERSIONS, eee_schema
from itemeval.export.longtable import FORMATS, ExportOptions, ExportResult, export_study
from itemeval.export.report import ReportResult, write_report
from itemeval.export.report.data import ReportData, leaderboard_text, report_data
from itemeval.export.report.summary import Bootstrap
from itemeval.export.scan import LongTableScan

__all__ = [
    "EEE_VERSIONS",
    "FORMATS",
    "LONG_COLUMNS",
    "LONG_TABLE_SCHEMA",
    "Bootstrap",
    "ExportOptions",
    "ExportResult",
    "LongTableScan",
    "ReportData",
    "ReportResult",
    "eee_schema",
    "export_study",
    "leaderboard_text",
    "report_data",
    "write_report",
]
