"""Results: the long table, Every Eval Ever records, and the report.

Read the store, never write it. The map, one package or module per concern:

* `table/`      the store read as tables: the long table's columns and scan, rows fetched by
                key, the conditions' facets, the report's cells
* `eee/`        Every Eval Ever: records, aggregates, the streaming writer, the JSON schemas
* `report/`     `write_report`: report.html and report.md (summary, difficulty, tables, plots)
* `study`       `export_study`: parquet, CSV and Every Eval Ever in one streaming pass
* `stats`       agreement and Cohen's kappa (intervals and comparisons: `itemeval.statistics`)
* `outputs`     output directories at any fsspec URL, files written wholly or not at all

`table/` imports neither `eee/` nor `report/`; `stats` and `outputs` import nothing of `export`.
What the CLI, the benchmarks and scripts use is re-exported here.
"""

from itemeval.export.eee.records import EEE_VERSIONS, RELATIONSHIPS, eee_schema
from itemeval.export.report import ReportResult, write_report
from itemeval.export.report.data import (
    ReportData,
    format_leaderboard,
    leaderboard_text,
    report_data,
)
from itemeval.export.report.summary import Bootstrap
from itemeval.export.study import FORMATS, ExportOptions, ExportResult, export_study, parse_formats
from itemeval.export.table.columns import LONG_COLUMNS, LONG_TABLE_SCHEMA
from itemeval.export.table.scan import LongTableScan

__all__ = [
    "EEE_VERSIONS",
    "FORMATS",
    "LONG_COLUMNS",
    "LONG_TABLE_SCHEMA",
    "RELATIONSHIPS",
    "Bootstrap",
    "ExportOptions",
    "ExportResult",
    "LongTableScan",
    "ReportData",
    "ReportResult",
    "eee_schema",
    "export_study",
    "format_leaderboard",
    "leaderboard_text",
    "parse_formats",
    "report_data",
    "write_report",
]
