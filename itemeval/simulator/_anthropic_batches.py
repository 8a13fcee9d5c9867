"""Anthropic's Message Batches on the sim-server, enough for the official SDK to drive them.

Routes (base URL `http://127.0.0.1:PORT`, as for messages):

    POST   /v1/messages/batches                {requests: [{custom_id, params}, ...]}
    GET    /v1/messages/batches                ?before_id= &after_id= &limit=
    GET    /v1/messages/batches/{id}
    POST   /v1/messages/batches/{id}/cancel
    GET    /v1/messages/batches/{id}/results   JSONL, once processing has ended
    DELETE /v1/messages/batches/{id}           once processing has ended

As Anthropic does: the request list is checked at creation (custom_ids of 1 to 64 letters,
digits, `-` and `_`, unique; `params` an object), each request's `params` only when it is
processed (an invalid one ends `errored` with `invalid_request_error`). `processing_status` is
`in_progress`, `canceling` (for an instant after a cancel) or `ended`; `request_counts` show
every request as `processing` until the batch has ended, then `succeeded`, `errored`,
`canceled` and `expired`. `results_url` is set once ended; each results line is `{"custom_id",
"result": {"type": "succeeded", "message"} | {"type": "errored", "error": {"type": "error",
"error": {"type", "message"}}} | {"type": "canceled"} | {"type": "expired"}}`.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from aiohttp import web

from itemeval.simulator._batches import (
    Batch,
    BatchAnswer,
    BatchItem,
    BatchRunner,
    lines_of,
    page,
    rfc3339,
)

MAX_REQUESTS = 100_000
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z")


def _error(status: int, kind: str, message: str) -> web.Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return web.json_response(body, status=status)


class AnthropicBatches:
    """The Message Batches routes, and the results format for `BatchRunner`."""

    api = "anthropic"

    def __init__(self, runner: BatchRunner):
        self.runner = runner

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages/batches", self._create)
        app.router.add_get("/v1/messages/batches", self._list)
        app.router.add_get("/v1/messages/batches/{batch_id}", self._get)
        app.router.add_delete("/v1/messages/batches/{batch_id}", self._delete)
        app.router.add_post("/v1/messages/batches/{batch_id}/cancel", self._cancel)
        app.router.add_get("/v1/messages/batches/{batch_id}/results", self._results)

    # ---------------------------------------------------------------- routes

    async def _create(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError as exc:
            return _error(400, "invalid_request_error", f"invalid JSON body: {exc}")
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return _error(400, "invalid_request_error", "requests: a non-empty list is required")
        if len(requests) > MAX_REQUESTS:
            return _error(
                400,
                "invalid_request_error",
                f"requests: at most {MAX_REQUESTS} requests in a batch",
            )
        items: list[BatchItem] = []
        seen: set[str] = set()
        for index, entry in enumerate(requests):
            custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
                return _error(
                    400,
                    "invalid_request_error",
                    f"requests.{index}.custom_id: 1 to 64 letters, digits, '-' or '_' required",
                )
            if custom_id in seen:
                return _error(
                    400,
                    "invalid_request_error",
                    f"requests.{index}.custom_id: duplicate custom_id {custom_id!r}",
                )
            seen.add(custom_id)
            if not isinstance(entry.get("params"), dict):
                return _error(
                    400, "invalid_request_error", f"requests.{index}.params: an object is required"
                )
            items.append(BatchItem(custom_id, entry["params"]))
        now = time.time()
        batch = Batch(
            id=self.runner.new_id("msgbatch_"),
            format=self,
            items=items,
            created_at=now,
            expires_at=now + self.runner.window_s(),
        )
        self.runner.submit(batch)
        return web.json_response(self.to_json(batch, request))

    def _batch(self, request: web.Request) -> Batch | None:
        return self.runner.find(request.match_info["batch_id"], self.api)

    @staticmethod
    def _missing(request: web.Request) -> web.Response:
        batch_id = request.match_info["batch_id"]
        return _error(404, "not_found_error", f"No Message Batch found with id {batch_id!r}")

    async def _get(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if batch is None:
            return self._missing(request)
        return web.json_response(self.to_json(batch, request))

    async def _cancel(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if batch is None:
            return self._missing(request)
        self.runner.cancel(batch)  # an ended batch is returned as it is
        return web.json_response(self.to_json(batch, request))

    async def _results(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if batch is None:
            return self._missing(request)
        if not batch.ended:
            return _error(
                404,
                "not_found_error",
                f"Message Batch {batch.id} has not finished processing; its results are "
                "available once processing_status is 'ended'",
            )
        body = b"".join(line + b"\n" for line in lines_of(batch))
        return web.Response(body=body, content_type="application/binary")

    async def _delete(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if batch is None:
            return self._missing(request)
        if not batch.ended:
            return _error(
                400,
                "invalid_request_error",
                f"Message Batch {batch.id} is still processing: cancel it before deleting it",
            )
        del self.runner.batches[batch.id]
        return web.json_response({"id": batch.id, "type": "message_batch_deleted"})

    async def _list(self, request: web.Request) -> web.Response:
        try:
            limit = max(1, min(1000, int(request.query.get("limit", 20))))
        except ValueError:
            return _error(400, "invalid_request_error", "limit: an integer is required")
        chosen, more = page(
            self.runner.listed(self.api),
            lambda b: b.id,
            after=request.query.get("after_id"),
            before=request.query.get("before_id"),
            limit=limit,
        )
        data = [self.to_json(b, request) for b in chosen]
        return web.json_response(
            {
                "data": data,
                "has_more": more,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        )

    # ---------------------------------------------------------------- the runner's side

    def validate(self, batch: Batch) -> tuple[list[BatchItem], list[dict[str, Any]]]:
        return batch.items, []  # checked at creation; params one by one as they are processed

    def result_line(self, batch: Batch, index: int, item: BatchItem, answer: BatchAnswer) -> bytes:
        if answer.status == 200:
            result: dict[str, Any] = {"type": "succeeded", "message": answer.body}
        else:
            result = {"type": "errored", "error": {**answer.body, "request_id": answer.request_id}}
        return json.dumps({"custom_id": item.custom_id, "result": result}).encode()

    def unfinished_line(self, batch: Batch, index: int, item: BatchItem, outcome: str) -> bytes:
        return json.dumps({"custom_id": item.custom_id, "result": {"type": outcome}}).encode()

    def ended(self, batch: Batch) -> None:
        pass

    # ---------------------------------------------------------------- JSON

    def to_json(self, batch: Batch, request: web.Request) -> dict[str, Any]:
        if batch.ended:
            status = "ended"
            counts = {
                "processing": 0,
                "succeeded": batch.succeeded,
                "errored": batch.errored,
                "canceled": batch.canceled,
                "expired": batch.expired,
            }
            results_url = (
                f"{request.scheme}://{request.host}/v1/messages/batches/{batch.id}/results"
            )
        else:
            status = "canceling" if batch.status == "cancelling" else "in_progress"
            counts = {
                "processing": len(batch.items),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            }
            results_url = None
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "ended_at": rfc3339(batch.ended_at),
            "created_at": rfc3339(batch.created_at),
            "expires_at": rfc3339(batch.expires_at),
            "archived_at": None,
            "cancel_initiated_at": rfc3339(batch.cancelled_at),
            "results_url": results_url,
        }
