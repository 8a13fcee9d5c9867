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

from typing import TYPE_CHECKING

from itemeval._util.lazy import lazy_exports

if TYPE_CHECKING:
    from itemeval.export._eee.records import EEE_VERSIONS as EEE_VERSIONS
    from itemeval.export._eee.records import RELATIONSHIPS as RELATIONSHIPS
    from itemeval.export._eee.records import eee_schema as eee_schema
    from itemeval.export._gold_sample import GoldSample as GoldSample
    from itemeval.export._gold_sample import write_gold_sample as write_gold_sample
    from itemeval.export._outputs import OutputDir as OutputDir
    from itemeval.export._outputs import OutputFile as OutputFile
    from itemeval.export._parts import read_long_table as read_long_table
    from itemeval.export._study import FORMATS as FORMATS
    from itemeval.export._study import ExportOptions as ExportOptions
    from itemeval.export._study import ExportResult as ExportResult
    from itemeval.export._study import export_study as export_study
    from itemeval.export._study import parse_formats as parse_formats

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
