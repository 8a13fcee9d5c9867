"""Results: the long table, Every Eval Ever records, and the report.

Read the store, never write it. The public names are `__all__` below: what users, the CLI,
the benchmarks and scripts use (`export_study`, `write_report`, `report_data`, ...), and the
store read as tables that the viewer, `itemeval.statistics` and `itemeval.irt` read
(`StudyCells`, the facets, the fetchers). The packages and modules are private:

* `_table/`      the store read as tables: the long table's columns and scan, rows fetched by
                 key, the conditions' facets, the report's cells
* `_eee/`        Every Eval Ever: records, aggregates, the streaming writer, the JSON schemas
* `_report/`     `write_report`: report.html and report.md (summary, difficulty, tables, plots)
* `_study`       `export_study`: parquet, CSV and Every Eval Ever, from what changed since the
                 last export (`_manifest` the folder's manifest and commit, `_delta` a pair's
                 changes, `_parts` the long table's parts, `read_long_table`)
* `_gold_sample` the stratified sample of answers a person labels (`itemeval gold sample`)
* `_stats`       agreement and Cohen's kappa (intervals and comparisons: `itemeval.statistics`)
* `_outputs`     output directories at any fsspec URL, files written wholly or not at all

`_table/` imports neither `_eee/` nor `_report/`; `_stats` and `_outputs` import nothing of
`export`.
"""

from itemeval.export._eee.records import EEE_VERSIONS, RELATIONSHIPS, eee_schema
from itemeval.export._gold_sample import GoldSample, write_gold_sample
from itemeval.export._parts import read_long_table
from itemeval.export._report import ReportResult, write_report
from itemeval.export._report.costs import Cost, costs
from itemeval.export._report.data import (
    ReportData,
    format_leaderboard,
    leaderboard_text,
    report_data,
    text_table,
)
from itemeval.export._report.judges import study_judges
from itemeval.export._report.numbers import StudyNumbers, study_cells, study_numbers
from itemeval.export._report.pairwise import study_pairwise
from itemeval.export._report.summary import (
    Bootstrap,
    Errors,
    ItemCounts,
    Leaderboard,
    Ranked,
    errors,
    fmt_proportion,
    fmt_usd,
)
from itemeval.export._study import FORMATS, ExportOptions, ExportResult, export_study, parse_formats
from itemeval.export._table.cells import (
    GRADE_CELL_COLUMNS,
    SOLUTION_CELL_COLUMNS,
    StudyCells,
    read_cells,
)
from itemeval.export._table.columns import LONG_COLUMNS, LONG_TABLE_SCHEMA
from itemeval.export._table.conditions import (
    DesignFacets,
    GenerateFacets,
    GradeFacets,
    primary_grader,
)
from itemeval.export._table.fetch import (
    FRAG,
    POS,
    GradePartition,
    ItemFetcher,
    PartitionRows,
    RowFetcher,
    locate_logical_rows,
    plain_columns,
)
from itemeval.export._table.scan import LongTableScan

__all__ = [
    "EEE_VERSIONS",
    "FORMATS",
    "FRAG",
    "GRADE_CELL_COLUMNS",
    "LONG_COLUMNS",
    "LONG_TABLE_SCHEMA",
    "POS",
    "RELATIONSHIPS",
    "SOLUTION_CELL_COLUMNS",
    "Bootstrap",
    "Cost",
    "DesignFacets",
    "Errors",
    "ExportOptions",
    "ExportResult",
    "GenerateFacets",
    "GoldSample",
    "GradeFacets",
    "GradePartition",
    "ItemCounts",
    "ItemFetcher",
    "Leaderboard",
    "LongTableScan",
    "PartitionRows",
    "Ranked",
    "ReportData",
    "ReportResult",
    "RowFetcher",
    "StudyCells",
    "StudyNumbers",
    "costs",
    "eee_schema",
    "errors",
    "export_study",
    "fmt_proportion",
    "fmt_usd",
    "format_leaderboard",
    "leaderboard_text",
    "locate_logical_rows",
    "parse_formats",
    "plain_columns",
    "primary_grader",
    "read_cells",
    "read_long_table",
    "report_data",
    "study_cells",
    "study_judges",
    "study_numbers",
    "study_pairwise",
    "text_table",
    "write_gold_sample",
    "write_report",
]
