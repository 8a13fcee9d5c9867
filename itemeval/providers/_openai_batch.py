"""The OpenAI Batch API: a JSONL file of chat-completion requests, uploaded and batched.

    POST {base}/files                 multipart: purpose=batch, file=<one request per line>
    POST {base}/batches               {input_file_id, endpoint: /v1/chat/completions,
                                       completion_window: 24h, metadata: {itemeval_batch: ID}}
    GET  {base}/batches/{id}          status: validating, in_progress, finalizing, cancelling
                                      (running); completed, expired, cancelled, failed (ended)
    POST {base}/batches/{id}/cancel
    GET  {base}/files/{id}/content    output_file_id (succeeded), error_file_id (the others)
    GET  {base}/batches?limit&after   newest first: how a restarted driver finds a batch it
                                      created but did not record, by its `metadata`

A line is `{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body": <the live
client's body>}`. An output line is `{"custom_id", "response": {"status_code", "request_id",
"body"}, "error"}`: a 200 body is read by the live parser, another status as the live client
reads an error; `response: null` with `error.code` `batch_expired` or `batch_cancelled` means
the request was not processed. One model per batch (OpenAI requires it): the tier batches one
condition at a time.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

import aiohttp

from itemeval.providers._batch_client import (
    BatchApiError,
    BatchClient,
    BatchResult,
    BatchStatus,
    UncertainCreate,
    result_lines,
)
from itemeval.providers._failures import code_for_error, failure
from itemeval.providers.types import ModelRequest, ModelResult

ENDPOINT = "/v1/chat/completions"
#: The metadata key that names the batch's record in the study's store.
METADATA_KEY = "itemeval_batch"
_ENDED = frozenset({"completed", "expired", "cancelled", "failed"})
_NOT_PROCESSED = frozenset({"batch_expired", "batch_cancelled"})
#: A restarted driver looks this far before its record's time for its batch (clock skew).
FIND_SLACK_S = 600.0
_FIND_PAGES = 50


class OpenAIBatchClient(BatchClient):
    api = "openai"
    provider_max_requests = 50_000

    def encode(self, custom_id: str, request: ModelRequest) -> bytes:
        line = {
            "custom_id": custom_id,
            "method": "POST",
            "url": ENDPOINT,
            "body": self.provider.request_body(request),
        }
        return json.dumps(line, separators=(",", ":"), ensure_ascii=False).encode()

    async def create(self, local_id: str, lines: Sequence[bytes]) -> BatchStatus:
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field(
            "file",
            b"\n".join(lines) + b"\n",
            filename=f"{local_id}.jsonl",
            content_type="application/jsonl",
        )
        uploaded = json.loads(await self.request("POST", f"{self.base_url}/files", form=form))
        body = {
            "input_file_id": uploaded["id"],
            "endpoint": ENDPOINT,
            "completion_window": "24h",
            "metadata": {METADATA_KEY: local_id},
        }
        raw = await self.request(
            "POST", f"{self.base_url}/batches", body=json.dumps(body).encode(), once=True
        )
        try:
            return self._status(json.loads(raw))
        except (ValueError, KeyError, TypeError) as exc:
            raise UncertainCreate(
                f"the batch create answered with an unreadable body ({exc})"
            ) from None

    async def find(self, local_id: str, requests: int, since: float) -> list[str]:
        after: str | None = None
        for _ in range(_FIND_PAGES):
            params = {"limit": "100"} | ({"after": after} if after else {})
            page = await self.get_json(f"{self.base_url}/batches", params)
            data = page.get("data") or []
            for batch in data:
                if (batch.get("metadata") or {}).get(METADATA_KEY) == local_id:
                    return [str(batch["id"])]
            if not data or not page.get("has_more"):
                return []
            if float(data[-1].get("created_at") or 0) < since - FIND_SLACK_S:
                return []  # newest first: everything further is older than the record
            after = str(data[-1]["id"])
        return []

    async def retrieve(self, batch_id: str) -> BatchStatus:
        return self._status(await self.get_json(f"{self.base_url}/batches/{batch_id}"))

    async def cancel(self, batch_id: str) -> BatchStatus:
        raw = await self.request("POST", f"{self.base_url}/batches/{batch_id}/cancel")
        return self._status(json.loads(raw))

    async def results(self, status: BatchStatus) -> list[BatchResult]:
        raw = status.raw or {}
        out: list[BatchResult] = []
        for name in ("output_file_id", "error_file_id"):
            file_id = raw.get(name)
            if not file_id:
                continue
            content = await self.request("GET", f"{self.base_url}/files/{file_id}/content")
            out.extend(self._result(line) for line in result_lines(content))
        return out

    async def cleanup(self, status: BatchStatus) -> None:
        file_id = (status.raw or {}).get("input_file_id")
        if file_id:
            # Best effort: an input file left behind costs nothing but storage.
            with contextlib.suppress(BatchApiError):
                await self.request("DELETE", f"{self.base_url}/files/{file_id}")

    # ---------------------------------------------------------------- reading

    def _status(self, batch: dict[str, Any]) -> BatchStatus:
        counts = batch.get("request_counts") or {}
        status = str(batch["status"])
        failure_text = None
        if status == "failed":
            errors = (batch.get("errors") or {}).get("data") or []
            failure_text = (
                "; ".join(
                    f"line {e.get('line')}: {e.get('code')}: {e.get('message')}" for e in errors[:5]
                )
                or "the batch failed"
            )
        return BatchStatus(
            id=str(batch["id"]),
            ended=status in _ENDED,
            status=status,
            created_at=float(batch.get("created_at") or 0),
            requests=int(counts.get("total") or 0),
            succeeded=counts.get("completed"),
            errored=counts.get("failed"),
            failure=failure_text,
            raw=batch,
        )

    def _result(self, line: dict[str, Any]) -> BatchResult:
        custom_id = str(line.get("custom_id"))
        response = line.get("response")
        if not isinstance(response, dict):
            error = line.get("error") or {}
            code = str(error.get("code") or "")
            if code in _NOT_PROCESSED:
                return BatchResult(custom_id, None)
            message = str(error.get("message") or "the batch request failed")
            failed = failure(code_for_error(400, code, "", message), f"batch: {code}: {message}")
            return BatchResult(custom_id, failed)
        status = int(response.get("status_code") or 0)
        body = response.get("body")
        request_id = response.get("request_id")
        result: ModelResult
        if 200 <= status < 300:
            result = self.provider.parse_answer(body, request_id, status)
        else:
            result = self.provider.error_result(status, body, request_id)
        return BatchResult(custom_id, result)
