"""Anthropic Message Batches: the Messages requests of a batch, in one JSON body.

    POST {base}/v1/messages/batches                {requests: [{custom_id, params}, ...]}
    GET  {base}/v1/messages/batches/{id}           processing_status: in_progress, canceling,
                                                   ended; request_counts
    POST {base}/v1/messages/batches/{id}/cancel
    GET  {results_url}                             JSONL, once ended
    GET  {base}/v1/messages/batches?limit&after_id newest first

`params` is the body the live client sends (`HttpProvider.request_body`; no prompt-cache
breakpoints: a batch does not reuse a prefix the way a stream of live calls does). A result is
`{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error":
{"type": "error", "error": {"type", "message"}}} | {"type": "canceled"} | {"type": "expired"}}`:
a message is read by the live parser, an error as the live client reads one (by its type's HTTP
status), and canceled or expired requests were not processed.

Message batches carry no metadata, so a driver that created one but did not record its id finds
it by what it knows: a batch created within `FIND_WINDOW_S` of the record, with the record's
number of requests (`find`). Those are candidates; the batch's custom ids (which start with the
record's id) prove which one is the record's once its results can be read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from itemeval.providers._batch_client import (
    BatchClient,
    BatchResult,
    BatchStatus,
    UncertainCreate,
    result_lines,
)
from itemeval.providers.types import ModelRequest, ModelResult

#: A found batch was created at most this long before (clock skew) or after its record.
FIND_BEFORE_S = 120.0
FIND_WINDOW_S = 900.0
_FIND_PAGES = 20
#: The HTTP status each Anthropic error type stands for (how a live call would have seen it).
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def _epoch(text: Any) -> float:
    if not isinstance(text, str) or not text:
        return 0.0
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class AnthropicBatchClient(BatchClient):
    api = "anthropic"
    provider_max_requests = 100_000

    @property
    def _batches(self) -> str:
        return f"{self.base_url}/v1/messages/batches"

    def encode(self, custom_id: str, request: ModelRequest) -> bytes:
        entry = {"custom_id": custom_id, "params": self.provider.request_body(request)}
        return json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode()

    async def create(self, local_id: str, lines: Sequence[bytes]) -> BatchStatus:
        body = b'{"requests":[' + b",".join(lines) + b"]}"
        raw = await self.request("POST", self._batches, body=body, once=True)
        try:
            return self._status(json.loads(raw))
        except (ValueError, KeyError, TypeError) as exc:
            raise UncertainCreate(
                f"the batch create answered with an unreadable body ({exc})"
            ) from None

    async def find(self, local_id: str, requests: int, since: float) -> list[str]:
        found: list[str] = []
        after: str | None = None
        for _ in range(_FIND_PAGES):
            params = {"limit": "100"} | ({"after_id": after} if after else {})
            page = await self.get_json(self._batches, params)
            data = page.get("data") or []
            for batch in data:
                created = _epoch(batch.get("created_at"))
                total = sum(int(v or 0) for v in (batch.get("request_counts") or {}).values())
                if since - FIND_BEFORE_S <= created <= since + FIND_WINDOW_S and total == requests:
                    found.append(str(batch["id"]))
            if not data or not page.get("has_more"):
                break
            if _epoch(data[-1].get("created_at")) < since - FIND_BEFORE_S:
                break  # newest first: the rest is older than the record
            after = str(data[-1]["id"])
        return found

    async def retrieve(self, batch_id: str) -> BatchStatus:
        return self._status(await self.get_json(f"{self._batches}/{batch_id}"))

    async def cancel(self, batch_id: str) -> BatchStatus:
        raw = await self.request("POST", f"{self._batches}/{batch_id}/cancel")
        return self._status(json.loads(raw))

    async def results(self, status: BatchStatus) -> list[BatchResult]:
        url = (status.raw or {}).get("results_url") or f"{self._batches}/{status.id}/results"
        content = await self.request("GET", str(url))
        return [self._result(line) for line in result_lines(content)]

    # ---------------------------------------------------------------- reading

    def _status(self, batch: dict[str, Any]) -> BatchStatus:
        counts = {k: int(v or 0) for k, v in (batch.get("request_counts") or {}).items()}
        status = str(batch["processing_status"])
        ended = status == "ended"
        return BatchStatus(
            id=str(batch["id"]),
            ended=ended,
            status=status,
            created_at=_epoch(batch.get("created_at")),
            requests=sum(counts.values()),
            succeeded=counts.get("succeeded") if ended else None,
            errored=counts.get("errored") if ended else None,
            raw=batch,
        )

    def _result(self, line: dict[str, Any]) -> BatchResult:
        custom_id = str(line.get("custom_id"))
        result = line.get("result") or {}
        kind = result.get("type")
        if kind == "succeeded":
            message = result.get("message")
            request_id = message.get("id") if isinstance(message, dict) else None
            return BatchResult(custom_id, self.provider.parse_answer(message, request_id))
        if kind == "errored":
            error = result.get("error") or {}
            nested = error.get("error")
            inner = nested if isinstance(nested, dict) else error
            status = ERROR_STATUS.get(str(inner.get("type") or ""), 500)
            parsed: ModelResult = self.provider.error_result(
                status, {"error": inner}, error.get("request_id")
            )
            return BatchResult(custom_id, parsed)
        return BatchResult(custom_id, None)  # canceled, expired
