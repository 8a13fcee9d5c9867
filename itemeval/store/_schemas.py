"""The arrow schemas of everything the store keeps, column by column, and the two gates to them.

Every fragment in `solutions/`, `grades/` and the response cache is written with exactly one of the
schemas below; `docs/store.md` lists the same columns for users (generated from `COLUMNS`).
The partition column (`condition_id`, `grade_condition_id`) is never stored inside a fragment: it
comes from the hive path (`solutions/condition_id=<id>/...`), as in pyarrow, DuckDB and polars.

Two gates keep fragments exact:

* `build_table(schema, rows)` turns row dicts into a conforming table, filling documented
  defaults (and `text_hash` from `text`);
* `check_table(table, schema)` accepts a table only if every column has exactly the stored type;
  anything else is a `StoreError` naming the column. Nothing is cast silently.

Versions: each schema is named with its version (`solutions/2`). Fragments written with an older
version stay readable: `OLDER_SCHEMAS` lists each older version exactly, with the value every
column added since takes in its rows (`solutions/1` and `grades/1` had no `tier`: `live`).
Readers fill them in (`conform_older`, `fill_columns`); nothing else is accepted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import repeat
from operator import is_
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from itemeval.errors import Problem, StoreError

#: The only two values of every `status` column.
STATUS_OK = "ok"
STATUS_ERROR = "error"
STATUSES = (STATUS_OK, STATUS_ERROR)

TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True, slots=True)
class Column:
    """One stored column: its arrow field and what it means."""

    name: str
    type: pa.DataType
    nullable: bool
    doc: str

    @property
    def field(self) -> pa.Field:
        return pa.field(self.name, self.type, nullable=self.nullable)


def _c(name: str, type_: pa.DataType, doc: str, *, null: bool = False) -> Column:
    return Column(name, type_, null, doc)


# For a response-cache hit, tokens and latency are those of the original call (they describe
# the answer); `usd` is 0 and `attempts` 0 because nothing was paid or sent.
_USAGE_COLUMNS: tuple[Column, ...] = (
    _c("input_tokens", pa.int64(), "prompt tokens the provider counted"),
    _c("output_tokens", pa.int64(), "completion tokens, reasoning tokens included"),
    _c("cached_input_tokens", pa.int64(), "part of input_tokens served by the provider's cache"),
    _c("reasoning_tokens", pa.int64(), "part of output_tokens spent on hidden reasoning"),
    _c("usd", pa.float64(), "what this row cost (pricing table); 0 for response-cache hits"),
    _c("latency_ms", pa.float64(), "wall time of the call, retries included"),
    _c("request_id", pa.string(), "the provider's id of the (last) request", null=True),
    _c("attempts", pa.int32(), "HTTP attempts made for this row (0 for a response-cache hit)"),
    _c("cached", pa.bool_(), "true if the row was answered from the response cache"),
    _c(
        "tier",
        pa.string(),
        "`live` (one call) or `batch` (the provider's batch API, at its batch price): the path "
        "that answered the cell (a response-cache hit: the path that looked it up; scorers: "
        "`live`)",
    ),
)

SOLUTION_COLUMNS: tuple[Column, ...] = (
    _c("item_id", pa.string(), "the work item's id (unique across the study's datasets)"),
    _c("epoch", pa.int32(), "replication number, 0 .. replications-1"),
    _c("status", pa.string(), "`ok` (a model answer) or `error` (no answer; retried on resume)"),
    _c("error_code", pa.string(), "stable code (`ErrorCode`) when status is error", null=True),
    _c("error_message", pa.string(), "what went wrong, secrets redacted", null=True),
    _c("text", pa.string(), "the model's answer text (empty for errors)"),
    _c("text_hash", pa.string(), "first 16 hex digits of sha256(text): what a grade refers to"),
    _c("finish_reason", pa.string(), "the provider's finish/stop reason", null=True),
    *_USAGE_COLUMNS,
    _c("request_hash", pa.string(), "sha256 of the exact request (model, messages, params)"),
    _c("model", pa.string(), "the model id as the endpoint knows it"),
    _c("run_id", pa.string(), "the run that wrote the row (`manifests/<run_id>.json`)"),
    _c("written_at", TIMESTAMP, "when the row was written (UTC, microseconds)"),
)

GRADE_COLUMNS: tuple[Column, ...] = (
    _c("gen_condition_id", pa.string(), "the generate condition of the graded solution"),
    _c("item_id", pa.string(), "the work item's id"),
    _c("epoch", pa.int32(), "replication number of the graded solution"),
    _c("status", pa.string(), "`ok` (a grade, parse failures too) or `error` (provider error)"),
    _c("score", pa.float64(), "the score (judge score or scorer result)", null=True),
    _c("correct", pa.bool_(), "verifiable scorers: whether the answer matched", null=True),
    _c("extracted", pa.string(), "the answer a verifiable scorer extracted", null=True),
    _c("parse_ok", pa.bool_(), "false when a judge's output had no valid score block (final)"),
    _c("parse_code", pa.string(), "judge parse failure code, e.g. `no_json_object`", null=True),
    _c("reasoning", pa.string(), "the judge's reasoning from its JSON block", null=True),
    _c("judge_text", pa.string(), "the judge's raw output", null=True),
    _c("solution_hash", pa.string(), "the `text_hash` of the solution that was graded"),
    _c("error_code", pa.string(), "stable code when status is error", null=True),
    _c("error_message", pa.string(), "what went wrong, secrets redacted", null=True),
    *_USAGE_COLUMNS,
    _c("request_hash", pa.string(), "sha256 of the judge request; null for scorers", null=True),
    _c("grader", pa.string(), "the judge model id or the scorer name"),
    _c("run_id", pa.string(), "the run that wrote the row"),
    _c("written_at", TIMESTAMP, "when the row was written (UTC, microseconds)"),
)

RESPONSE_COLUMNS: tuple[Column, ...] = (
    _c(
        "key",
        pa.string(),
        "sha256 of canonical JSON {request: request_hash, epoch}: request content only",
    ),
    _c("item_id", pa.string(), "the work item the request was built from"),
    _c("epoch", pa.int32(), "replication number (part of the key: replications never share)"),
    _c("request_hash", pa.string(), "sha256 of the exact request content"),
    _c("model", pa.string(), "the model id as the endpoint knows it"),
    _c("text", pa.string(), "the answer text"),
    _c("finish_reason", pa.string(), "the provider's finish/stop reason", null=True),
    _c("input_tokens", pa.int64(), "prompt tokens of the original call"),
    _c("output_tokens", pa.int64(), "completion tokens of the original call"),
    _c("cached_input_tokens", pa.int64(), "provider-cached prompt tokens of the original call"),
    _c("reasoning_tokens", pa.int64(), "reasoning tokens of the original call"),
    _c("usd", pa.float64(), "what the original call cost (hits are recorded with usd = 0)"),
    _c("latency_ms", pa.float64(), "wall time of the original call"),
    _c("request_id", pa.string(), "the provider's id of the original request", null=True),
    _c("written_at", TIMESTAMP, "when the response was cached (UTC)"),
)


def _schema(columns: Iterable[Column], name: str) -> pa.Schema:
    return pa.schema([c.field for c in columns], metadata={"itemeval.schema": name})


SOLUTION_SCHEMA = _schema(SOLUTION_COLUMNS, "solutions/2")
GRADE_SCHEMA = _schema(GRADE_COLUMNS, "grades/2")
RESPONSE_SCHEMA = _schema(RESPONSE_COLUMNS, "responses/1")

#: The values of `tier`.
TIER_LIVE = "live"
TIER_BATCH = "batch"
TIERS = (TIER_LIVE, TIER_BATCH)


@dataclass(frozen=True, slots=True)
class OlderSchema:
    """An earlier version of a schema, and what its fragments' rows hold in the columns added
    since (every row the same value)."""

    schema: pa.Schema
    fills: dict[str, Any]


def _without(columns: Iterable[Column], dropped: str) -> list[Column]:
    return [c for c in columns if c.name != dropped]


#: Older versions still read, per current schema name (newest first).
OLDER_SCHEMAS: dict[str, tuple[OlderSchema, ...]] = {
    "solutions/2": (
        OlderSchema(_schema(_without(SOLUTION_COLUMNS, "tier"), "solutions/1"), {"tier": "live"}),
    ),
    "grades/2": (
        OlderSchema(_schema(_without(GRADE_COLUMNS, "tier"), "grades/1"), {"tier": "live"}),
    ),
}


def conform_older(stored: pa.Schema, schema: pa.Schema) -> dict[str, Any] | None:
    """The fills that make a fragment of schema `stored` read as `schema` ({} when it already
    is `schema`), or None when `stored` is no version of it."""
    if stored.equals(schema, check_metadata=False):
        return {}
    for older in OLDER_SCHEMAS.get(schema_name(schema), ()):
        if stored.equals(older.schema, check_metadata=False):
            return older.fills
    return None


def fill_columns(
    table: pa.Table, schema: pa.Schema, columns: Sequence[str], fills: Mapping[str, Any]
) -> pa.Table:
    """`table` (read from an older fragment without the `fills` columns) with exactly
    `columns`, in that order, the missing ones filled."""
    arrays = []
    for name in columns:
        if name in fills:
            value = pa.scalar(fills[name], schema.field(name).type)
            arrays.append(pa.chunked_array([pa.repeat(value, len(table))]))
        else:
            arrays.append(table.column(name))
    return pa.Table.from_arrays(arrays, schema=pa.schema([schema.field(c) for c in columns]))


#: Column documentation per schema (what `docs/store.md` shows).
COLUMNS: dict[str, tuple[Column, ...]] = {
    "solutions": SOLUTION_COLUMNS,
    "grades": GRADE_COLUMNS,
    "responses": RESPONSE_COLUMNS,
}

_REQUIRED_WITHOUT_DEFAULT = {
    "item_id",
    "epoch",
    "status",
    "request_hash",
    "model",
    "run_id",
    "gen_condition_id",
    "solution_hash",
    "grader",
    "key",
}


def text_hash(text: str) -> str:
    """What `text_hash` and `solution_hash` hold: the first 16 hex digits of sha256(text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def schema_name(schema: pa.Schema) -> str:
    meta = schema.metadata or {}
    return meta.get(b"itemeval.schema", b"table").decode()


def _row_default(name: str) -> Callable[[Mapping[str, Any]], Any] | None:
    """The default of a column computed from the rest of its row, or None."""
    if name == "text_hash":
        return lambda row: text_hash(row.get("text") or "")
    if name == "parse_ok":
        return lambda row: row.get("status") == STATUS_OK
    return None


def _constant_default(column: Column, now: datetime) -> Any:
    """The default of a column that is the same for every row (KeyError: it has none)."""
    name = column.name
    if name == "written_at":
        return now
    if name == "text":
        return ""
    if name == "attempts":
        return 1
    if name == "cached":
        return False
    if name == "tier":
        return TIER_LIVE
    if column.nullable:
        return None
    if pa.types.is_integer(column.type):
        return 0
    if pa.types.is_floating(column.type):
        return 0.0
    raise KeyError(name)


def build_table(schema: pa.Schema, rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """A table with exactly `schema` from row dicts, defaults filled (see `docs/store.md`).

    Unknown keys, missing required values and values of the wrong kind are a `StoreError`
    naming the row and the column. The result would pass `check_table`.
    """
    columns = [Column(f.name, f.type, f.nullable, "") for f in schema]
    names = {c.name for c in columns}
    now = datetime.now(UTC)
    what = schema_name(schema)
    rows = list(rows)
    for index, row in enumerate(rows):
        if not row.keys() <= names:
            raise StoreError(
                Problem(
                    f"unknown column(s) {sorted(set(row) - names)} in row {index}",
                    file=what,
                    hint=f"the {what} columns are {sorted(names)}",
                )
            )
    # Every row written goes through here (a run writes three per call): each row's values
    # are taken in one C-level pass and transposed, not looked up cell by cell in Python.
    order = [c.name for c in columns]
    by_column = list(zip(*[list(map(row.get, order)) for row in rows], strict=True))
    if not by_column:
        by_column = [()] * len(columns)
    data: dict[str, Sequence[Any] | pa.Array] = {}
    hashed_here = False  # every text_hash computed below, so none to verify
    for column, values in zip(columns, by_column, strict=True):
        if column.nullable or not any(map(is_, values, repeat(None))):  # identity, not ==
            data[column.name] = values
            continue
        missing = [index for index, value in enumerate(values) if value is None]
        if column.name in _REQUIRED_WITHOUT_DEFAULT:
            raise StoreError(
                Problem(f"row {missing[0]} has no value", file=what, field=column.name)
            )
        from_row = _row_default(column.name)
        if from_row is not None:
            filled = list(values)
            for index in missing:
                filled[index] = from_row(rows[index])
            data[column.name] = filled
            hashed_here = hashed_here or (column.name == "text_hash" and len(missing) == len(rows))
            continue
        constant = _constant_default(column, now)
        if len(missing) == len(rows):
            data[column.name] = pa.repeat(pa.scalar(constant, column.type), len(rows))
        else:
            data[column.name] = [constant if value is None else value for value in values]
    try:
        table = pa.Table.from_pydict(data, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise StoreError(Problem(f"a value has the wrong type: {exc}", file=what)) from exc
    # The table has the schema's types, order and flags, and no null in a required column,
    # by construction: of `check_table` only the checks of values remain.
    _check_values(table, what, verify_text_hash=not hashed_here)
    return table


def check_table(table: pa.Table, schema: pa.Schema, *, what: str | None = None) -> pa.Table:
    """`table` with `schema`'s column order and field flags, or a `StoreError` saying why not.

    Types must already match exactly (no cast happens here); required columns must hold no nulls;
    `status` must be `ok`/`error`, error rows need an `error_code`, and `text_hash` must be the
    hash of `text`.
    """
    what = what or schema_name(schema)
    expected = set(schema.names)
    present = set(table.column_names)
    problems: list[Problem] = []
    for name in sorted(present - expected):
        hint = None
        if name in ("condition_id", "grade_condition_id"):
            hint = "the partition column is not stored in fragments; pass the id to the writer"
        problems.append(Problem("unexpected column", file=what, field=name, hint=hint))
    for name in sorted(expected - present):
        problems.append(Problem("missing column", file=what, field=name))
    if problems:
        raise StoreError(problems)
    for field in schema:
        actual = table.schema.field(field.name).type
        if actual != field.type:
            problems.append(
                Problem(
                    f"column has type {actual}, the store keeps {field.type}",
                    file=what,
                    field=field.name,
                    hint="cast to its schema in itemeval.store (SOLUTION_SCHEMA, GRADE_SCHEMA...)",
                )
            )
        elif not field.nullable and table.column(field.name).null_count:
            first = pc.index(pc.is_null(table.column(field.name)), True).as_py()
            problems.append(Problem(f"null value in row {first}", file=what, field=field.name))
    if problems:
        raise StoreError(problems)
    table = pa.Table.from_arrays([table.column(n) for n in schema.names], schema=schema)
    _check_values(table, what)
    return table


def _first_true(mask: pa.ChunkedArray | pa.Array) -> int | None:
    index = pc.index(mask, True).as_py()
    return None if index < 0 else int(index)


_STATUS_SET = pa.array(STATUSES)
_TIER_SET = pa.array(TIERS)


def _check_values(table: pa.Table, what: str, *, verify_text_hash: bool = True) -> None:
    names = table.column_names
    if "status" in names:
        status = table.column("status")
        bad = _first_true(pc.invert(pc.is_in(status, value_set=_STATUS_SET)))
        if bad is not None:
            raise StoreError(
                Problem(
                    f"row {bad} has status {status[bad].as_py()!r}; expected 'ok' or 'error'",
                    file=what,
                    field="status",
                )
            )
        if "error_code" in names:
            missing = pc.and_(pc.equal(status, STATUS_ERROR), pc.is_null(table["error_code"]))
            bad = _first_true(missing)
            if bad is not None:
                raise StoreError(
                    Problem(f"error row {bad} has no error_code", file=what, field="error_code")
                )
    if "tier" in names:
        bad = _first_true(pc.invert(pc.is_in(table.column("tier"), value_set=_TIER_SET)))
        if bad is not None:
            raise StoreError(
                Problem(
                    f"row {bad} has tier {table.column('tier')[bad].as_py()!r}; expected one of "
                    f"{', '.join(TIERS)}",
                    file=what,
                    field="tier",
                )
            )
    if "epoch" in names:
        bad = _first_true(pc.less(table.column("epoch"), 0))
        if bad is not None:
            raise StoreError(Problem(f"row {bad} has a negative epoch", file=what, field="epoch"))
    if "text_hash" in names and verify_text_hash:
        wrong = pc.not_equal(text_hashes(table.column("text")), table.column("text_hash"))
        bad = _first_true(wrong)
        if bad is not None:
            raise StoreError(
                Problem(
                    f"row {bad}: text_hash is not sha256(text)[:16]",
                    file=what,
                    field="text_hash",
                    hint="leave text_hash out of the row dict; build_table computes it",
                )
            )


def text_hashes(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`text_hash` of every string in `texts` (nulls hash as the empty string)."""
    return pa.array([text_hash(t or "") for t in texts.to_pylist()], type=pa.string())
