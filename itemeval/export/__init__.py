"""Files out of a study's results: the long table (parquet, CSV) and Every Eval Ever records.

Reads the store through `itemeval.results`, never writes it. The public names are `__all__`
below, imported on first use; the packages and modules are private:

* `_study`       `export_study`: parquet, CSV and Every Eval Ever, from what changed since the
                 last export (`_manifest` the folder's manifest and commit, `_delta` a pair's
                 changes, `_pair_update` a pair's parts and records brought up to date, `_parts`
                 the long table's parts, `read_long_table`)
* `_eee/`        Every Eval Ever: records, aggregates, the streaming writer, the JSON schemas
* `_gold_sample` the stratified sample of answers a person labels (`itemeval gold sample`)
* `_outputs`     output directories at any fsspec URL, files written wholly or not at all (the
                 report writes through them too)

`_outputs` imports nothing of `export`.
"""

from __future__ import annotations

from itemeval._util.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    """
    _study: FORMATS ExportOptions ExportResult export_study parse_formats
    _eee.records: EEE_VERSIONS RELATIONSHIPS eee_schema
    _gold_sample: GoldSample write_gold_sample
    _parts: read_long_table
    _outputs: OutputDir OutputFile
    """,
)
