"""Fixtures of the store suite: a fresh `StudyStore` on local disk and on S3, and row factories."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from itemeval.store import StudyStore

SolutionFactory = Callable[..., dict[str, Any]]


@pytest.fixture
def store(root_url: str) -> StudyStore:
    return StudyStore.open(root_url)


def _solution(
    item_id: str,
    epoch: int = 0,
    *,
    ok: bool = True,
    text: str | None = None,
    run_id: str = "run-a",
    at: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "item_id": item_id,
        "epoch": epoch,
        "status": "ok" if ok else "error",
        "text": (text if text is not None else f"answer to {item_id}/{epoch}") if ok else "",
        "request_hash": f"req-{item_id}-{epoch}",
        "model": "sim/model-a",
        "run_id": run_id,
        "input_tokens": 10,
        "output_tokens": 5,
        "usd": 0.001,
    }
    if not ok:
        row["error_code"] = "server_error"
        row["error_message"] = "HTTP 503"
    if at is not None:
        row["written_at"] = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=at)
    row.update(extra)
    return row


def _grade(
    gen: str,
    item_id: str,
    epoch: int = 0,
    *,
    solution_hash: str,
    ok: bool = True,
    parse_ok: bool = True,
    score: float | None = 1.0,
    **extra: Any,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "gen_condition_id": gen,
        "item_id": item_id,
        "epoch": epoch,
        "status": "ok" if ok else "error",
        "score": score if ok and parse_ok else None,
        "parse_ok": parse_ok if ok else False,
        "parse_code": None if parse_ok or not ok else "no_json_object",
        "solution_hash": solution_hash,
        "request_hash": f"judge-{item_id}",
        "grader": "sim/judge",
        "run_id": "run-g",
        "usd": 0.0005,
    }
    if not ok:
        row["error_code"] = "rate_limited"
    row.update(extra)
    return row


@pytest.fixture
def solution() -> SolutionFactory:
    """`solution(item_id, epoch, ok=True, text=None, at=None, **columns)` -> a row dict."""
    return _solution


@pytest.fixture
def grade() -> Callable[..., dict[str, Any]]:
    """`grade(gen, item_id, epoch, solution_hash=..., ok=True, parse_ok=True)` -> a row dict."""
    return _grade
