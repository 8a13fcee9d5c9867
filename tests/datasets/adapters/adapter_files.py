"""Helpers for the adapter tests: data files written through fsspec (local disk or S3)."""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from itemeval.storage import resolve

META = {
    "identifier": "demo",
    "created": "2025-05-19",
    "creator": "Test Author",
    "description": "A small dataset for tests",
    "language": "eng",
    "license": "CC0-1.0",
    "publisher": "itemeval tests",
    "source": "written in the test",
    "subject": "testing",
}


def put(url: str, data: bytes | str) -> str:
    resolve(url).write_atomic(data.encode("utf-8") if isinstance(data, str) else data)
    return url


def put_jsonl(url: str, rows: list[Any]) -> str:
    return put(url, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def put_parquet(url: str, rows: list[dict[str, Any]], row_group_size: int = 1000) -> str:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer, row_group_size=row_group_size)
    return put(url, buffer.getvalue())


def put_items_dataset(directory: str, items: list[dict[str, Any]], **meta: Any) -> str:
    identifier = meta.get("identifier", META["identifier"])
    fields = {**META, **meta, "hasPart": [f"{identifier}.jsonl"]}
    put(f"{directory}/{identifier}.yaml", yaml.safe_dump(fields, sort_keys=False))
    put_jsonl(f"{directory}/{identifier}.jsonl", items)
    return directory
