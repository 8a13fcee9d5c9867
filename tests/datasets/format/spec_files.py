"""Helpers for the spec tests: raw dataset files written through fsspec (local or S3)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

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


def item(identifier: str, **fields: Any) -> dict[str, Any]:
    base = {"identifier": identifier, "modality": "boolean", "prompt": "Is it?", "response": "True"}
    base.update(fields)
    return base


def put(url: str, data: bytes | str) -> None:
    resolve(url).write_atomic(data.encode("utf-8") if isinstance(data, str) else data)


def jsonl(records: list[Any]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


WriteRaw = Callable[..., str]


def raw_writer() -> WriteRaw:
    """write_raw(directory_url, parts={name: text}, **meta overrides) -> directory url."""

    def write(
        directory: str, parts: dict[str, str | bytes], meta_name: str | None = None, **meta: Any
    ) -> str:
        fields = {**META, "hasPart": list(parts), **meta}
        fields = {k: v for k, v in fields.items() if v is not None}
        name = meta_name or f"{fields.get('identifier', 'demo')}.yaml"
        put(f"{directory}/{name}", yaml.safe_dump(fields, sort_keys=False, allow_unicode=True))
        for part, text in parts.items():
            put(f"{directory}/{part}", text)
        return directory

    return write
