"""The fast path of Every Eval Ever instance files: Arrow's JSON reader on chunks of whole
lines, checks and conversions as columns (`SampleBatch`es for `ImportWriter.add_batch`). A chunk
it refuses (bad JSON, a missing field, a blank line, a value the columns cannot take) is read by
the line path of `eee`, so that its records keep their reasons and lines."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from itemeval.importing._eee import VERSIONS, AggregateFacts, line_sample
from itemeval.importing._model import (
    ID_SEPARATOR,
    GenerateFacts,
    GradeFacts,
    Rejection,
    Sample,
    SampleBatch,
    benchmark_dataset,
)

#: Bytes of a file parsed at a time by the fast path (whole lines).
CHUNK_BYTES = 16 << 20
_STRINGS = pa.list_(pa.string())


def _arrow_schema(lists: bool) -> pa.Schema:
    """What the fast path reads of an instance line (0.3.0/0.2.2 shape, or 0.2.0's strings)."""
    text = _STRINGS if lists else pa.string()
    return pa.schema(
        [
            ("schema_version", pa.string()),
            ("sample_id", pa.string()),
            ("evaluation_result_id", pa.string()),
            ("evaluation_name", pa.string()),
            (
                "input",
                pa.struct([("raw", pa.string()), ("reference", text), ("choices", _STRINGS)]),
            ),
            ("output", pa.struct([("raw", text)])),
            ("evaluation", pa.struct([("score", pa.float64()), ("is_correct", pa.bool_())])),
            (
                "token_usage",
                pa.struct(
                    [
                        ("input_tokens", pa.int64()),
                        ("output_tokens", pa.int64()),
                        ("reasoning_tokens", pa.int64()),
                        ("input_tokens_cache_read", pa.int64()),
                    ]
                ),
            ),
            ("performance", pa.struct([("latency_ms", pa.float64())])),
            (
                "metadata",
                pa.struct(
                    [
                        ("epoch", pa.string()),
                        ("stop_reason", pa.string()),
                        ("finish_reason", pa.string()),
                    ]
                ),
            ),
        ]
    )


BATCH_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("epoch", pa.int32()),
        ("input", pa.string()),
        ("reference", pa.string()),
        ("answer", pa.string()),
        ("score", pa.float64()),
        ("correct", pa.bool_()),
        ("finish_reason", pa.string()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("reasoning_tokens", pa.int64()),
        ("cached_input_tokens", pa.int64()),
        ("latency_ms", pa.float64()),
        ("record_id", pa.string()),
        ("choices", _STRINGS),
    ]
)


def fast_path_applies(facts: AggregateFacts | None) -> bool:
    """Records of other tools with an aggregate: the columns say everything the import keeps
    (itemeval's own records carry per-row facets in their metadata: the line path reads them)."""
    return facts is not None and not facts.itemeval


def read_batches(path: str, facts: AggregateFacts, file_sha256: str) -> Iterator[Any]:
    """The instance records of `path` as `SampleBatch`es, parsed by Arrow's JSON reader a
    chunk of whole lines at a time. A chunk with a line the reader or the checks refuse (bad
    JSON, a missing field, a blank line) is read line by line instead, so that each record
    still imports or is rejected with its reason and line."""
    name = os.path.basename(path)
    line_number = 1
    with open(path, "rb") as handle:
        rest = b""
        while True:
            block = handle.read(CHUNK_BYTES)
            data = rest + block
            if not data:
                break
            if block:
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    rest = data
                    continue
                chunk, rest = data[:cut], data[cut:]
            else:
                chunk, rest = data, b""
            lines = chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
            try:
                batches = _parse_chunk(chunk, lines, facts, name, line_number, file_sha256)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                batches = None  # e.g. an epoch that is not an integer: the lines say which
            if batches is None:
                yield from _lines_of(chunk, path, line_number, facts)
            else:
                yield from batches
            line_number += lines
            if not block:
                break


def _lines_of(
    chunk: bytes, path: str, first: int, facts: AggregateFacts
) -> Iterator[Sample | Rejection]:
    cache: dict[tuple[str, str, str], tuple[GenerateFacts, GradeFacts]] = {}
    for offset, line in enumerate(chunk.splitlines()):
        sample = line_sample(line, facts, path, first + offset, cache)
        if sample is not None:
            yield sample


def _parse_chunk(
    chunk: bytes, lines: int, facts: AggregateFacts, name: str, first: int, file_sha256: str
) -> list[SampleBatch] | None:
    if b"\n\n" in chunk or chunk.startswith(b"\n") or b"\r" in chunk:
        return None
    table = None
    for lists in (True, False):
        try:
            table = pj.read_json(
                pa.BufferReader(chunk),
                read_options=pj.ReadOptions(block_size=len(chunk) + 1, use_threads=False),
                parse_options=pj.ParseOptions(
                    explicit_schema=_arrow_schema(lists), unexpected_field_behavior="ignore"
                ),
            )
            break
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            continue
    if table is None or table.num_rows != lines:
        return None
    table = table.combine_chunks()
    item = table.column("input").chunk(0) if table.num_rows else None
    if item is None:
        return []
    raw = pc.struct_field(item, "raw")
    reference = pc.struct_field(item, "reference")
    if pa.types.is_list(reference.type):
        has_reference = pc.greater(pc.fill_null(pc.list_value_length(reference), 0), 0)
        reference = pc.binary_join(reference, " | ")
    else:
        has_reference = pc.is_valid(reference)
    output = pc.struct_field(table.column("output").chunk(0), "raw")
    answer = pc.binary_join(output, "\n") if pa.types.is_list(output.type) else output
    evaluation = table.column("evaluation").chunk(0)
    score = pc.struct_field(evaluation, "score")
    sample_id = table.column("sample_id").chunk(0)
    version = table.column("schema_version").chunk(0)
    ok = pc.and_(pc.is_valid(sample_id), pc.not_equal(pc.fill_null(sample_id, ""), ""))
    ok = pc.and_(ok, pc.not_equal(pc.utf8_trim_whitespace(pc.fill_null(raw, "")), ""))
    ok = pc.and_(ok, has_reference)
    ok = pc.and_(ok, pc.is_valid(score))
    ok = pc.and_(ok, pc.or_(pc.is_null(version), pc.is_in(version, pa.array(VERSIONS))))
    if not pc.all(ok).as_py():
        return None
    metadata = table.column("metadata").chunk(0)
    epoch_text = pc.struct_field(metadata, "epoch")
    epochs = pc.cast(pc.fill_null(epoch_text, "0"), pa.int32())
    correct = pc.struct_field(evaluation, "is_correct")
    correct = pc.if_else(pc.is_valid(correct), correct, pc.greater_equal(score, 1.0))
    finish = pc.coalesce(
        pc.struct_field(metadata, "finish_reason"), pc.struct_field(metadata, "stop_reason")
    )
    usage = table.column("token_usage").chunk(0)
    performance = table.column("performance").chunk(0)

    def count(name: str) -> pa.Array:
        return pc.fill_null(pc.struct_field(usage, name), 0)

    numbers = pa.array(range(first, first + lines), pa.int64())
    record = pc.binary_join_element_wise(
        pa.repeat(pa.scalar(name), lines), pc.cast(numbers, pa.string()), ":"
    )
    result_ids = pc.fill_null(table.column("evaluation_result_id").chunk(0), "")
    names = table.column("evaluation_name").chunk(0)
    batches = []
    for result_id in pc.unique(result_ids).to_pylist():
        rows = pc.equal(result_ids, result_id)
        pair = facts.results.get(result_id) or facts.results.get("")
        if pair is None:
            return None
        gen, grade = pair
        epoch = epochs
        if gen.tool == "inspect_ai":
            epoch = pc.max_element_wise(pc.subtract(epochs, 1), 0)
        named = facts.dataset or (names.filter(rows)[0].as_py() if len(names) else None)
        dataset = benchmark_dataset(gen.tool, str(named or "imported"))  # keyed by benchmark
        item_id = pc.binary_join_element_wise(
            pa.repeat(pa.scalar(dataset), len(sample_id)), sample_id, ID_SEPARATOR
        )
        columns = [
            item_id,
            epoch,
            raw,
            reference,
            pc.fill_null(answer, ""),
            score,
            correct,
            finish,
            count("input_tokens"),
            count("output_tokens"),
            count("reasoning_tokens"),
            count("input_tokens_cache_read"),
            pc.fill_null(pc.struct_field(performance, "latency_ms"), 0.0),
            record,
            pc.struct_field(item, "choices"),
        ]
        batch = pa.Table.from_arrays(columns, schema=BATCH_SCHEMA).filter(rows)
        batches.append(SampleBatch(gen, grade, dataset, file_sha256, batch))
    return batches
