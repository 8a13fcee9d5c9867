"""Streaming records out of data files: JSON Lines line by line, small JSON/YAML lists whole.

Each record comes with its `Where` (file and line); a line that is not UTF-8 or not JSON becomes
a `Problem` in the stream instead of an exception, so a reader can report every bad line at once.
Files are read in 1 MiB chunks through fsspec, so memory does not grow with the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import yaml

from itemeval._util.yaml_lines import safe_load
from itemeval.datasets.format._findings import Where
from itemeval.errors import Problem
from itemeval.storage import Location

CHUNK_BYTES = 1 << 20
UTF8_BOM = b"\xef\xbb\xbf"
UTF8_HINT = "save the file as UTF-8"

Record = tuple[Where, Any]  # the record, or a Problem in its place


def iter_lines(location: Location) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line bytes without the newline), reading in chunks."""
    line_no = 0
    pending = b""
    with location.open("rb") as handle:
        while True:
            chunk = handle.read(CHUNK_BYTES)
            if not chunk:
                break
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                line_no += 1
                yield line_no, line
    if pending:
        yield line_no + 1, pending


def decode_line(raw: bytes, where: Where) -> str | Problem:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return where.error(
            f"not valid UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})",
            hint=UTF8_HINT,
        )


def iter_jsonl(location: Location, display: str | None = None) -> Iterator[Record]:
    """One JSON value per non-blank line; a UTF-8 BOM at the start is skipped with a warning."""
    base = Where(file=display or location.url)
    for line_no, raw in iter_lines(location):
        where = base.at(line=line_no)
        if line_no == 1 and raw.startswith(UTF8_BOM):
            raw = raw[len(UTF8_BOM) :]
            yield where, where.warning("the file starts with a UTF-8 byte order mark; ignored")
        text = decode_line(raw, where)
        if isinstance(text, Problem):
            yield where, text
            continue
        if not text.strip():
            continue
        try:
            yield where, json.loads(text)
        except json.JSONDecodeError as exc:
            yield (
                where,
                where.error(
                    f"not valid JSON: {exc.msg} (column {exc.colno})",
                    hint="each line must be one complete JSON object",
                ),
            )


def iter_document_list(location: Location, display: str | None = None) -> Iterator[Record]:
    """The elements of a `.json` or `.yaml` file holding one list (read whole: small files)."""
    where = Where(file=display or location.url)
    data = location.read_bytes()
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        yield (
            where,
            where.at(line=line).error(
                f"not valid UTF-8 text (byte 0x{data[exc.start]:02x})", hint=UTF8_HINT
            ),
        )
        return
    is_yaml = location.path.lower().endswith((".yaml", ".yml"))
    try:
        document = safe_load(text) if is_yaml else json.loads(text)
    except json.JSONDecodeError as exc:
        yield where, where.at(line=exc.lineno).error(f"not valid JSON: {exc.msg}")
        return
    except yaml.YAMLError as exc:
        yield where, yaml_problem(exc, where)
        return
    if not isinstance(document, list):
        yield where, where.error("expected a list of items at the top of the file")
        return
    for index, record in enumerate(document):
        yield where.at(item=f"[{index}]"), record


def yaml_problem(exc: yaml.YAMLError, where: Where) -> Problem:
    """A YAML syntax error as a Problem with its line."""
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    column = f", column {mark.column + 1}" if mark is not None else ""
    return where.at(line=line).error(
        f"not valid YAML: {reason}{column}", hint="check indentation and quoting near that line"
    )


def iter_records(location: Location, display: str | None = None) -> Iterator[Record]:
    """Records of a part file, by its suffix (`.jsonl` streamed; `.json`/`.yaml` whole)."""
    if location.path.lower().endswith(".jsonl"):
        return iter_jsonl(location, display)
    return iter_document_list(location, display)
