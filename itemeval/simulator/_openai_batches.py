"""OpenAI's Files and Batch APIs on the sim-server, enough for the official SDK to drive them.

Routes (base URL `http://127.0.0.1:PORT/v1`, as for chat completions):

    POST   /v1/files                     multipart: file, purpose (batch for batch input)
    GET    /v1/files                     ?purpose= &after= &limit= &order=
    GET    /v1/files/{file_id}
    GET    /v1/files/{file_id}/content
    DELETE /v1/files/{file_id}
    POST   /v1/batches                   {input_file_id, endpoint: /v1/chat/completions,
                                          completion_window: 24h, metadata}
    GET    /v1/batches                   ?after= &limit=
    GET    /v1/batches/{batch_id}
    POST   /v1/batches/{batch_id}/cancel

The input file is validated when the batch starts (status `validating`, then `failed` with
`errors.data[]` of {code, message, param, line} if a line is not JSON, lacks a custom_id, repeats
one, is not `POST` to the batch's endpoint, or has no body). Results: `output_file_id` holds a
line per succeeded request, `{"id", "custom_id", "response": {"status_code": 200, "request_id",
"body": <chat completion>}, "error": null}`; `error_file_id` holds the others: requests that
errored (`response.status_code` 4xx/5xx, `body.error`) and, with `response: null`, those
expired (`error.code: batch_expired`) or cancelled (`batch_cancelled`). `request_counts`:
`total`, `completed` (succeeded), `failed` (errored); they move while the batch runs. A cancel
of an ended batch returns it unchanged.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from itemeval.simulator._batches import (
    CANCELED,
    ERRORED,
    EXPIRED,
    SUCCEEDED,
    Batch,
    BatchAnswer,
    BatchItem,
    BatchRunner,
    lines_of,
    page,
)

ENDPOINT = "/v1/chat/completions"
MAX_REQUESTS = 50_000
FILE_PURPOSES = frozenset(
    {"assistants", "batch", "fine-tune", "vision", "user_data", "evals"}
)  # what may be uploaded
_UNFINISHED = {
    "expired": (
        "batch_expired",
        "This request could not be executed before the completion window expired.",
    ),
    "canceled": (
        "batch_cancelled",
        "This request was not executed because the batch was cancelled.",
    ),
}
_STATUS = {
    "completed": "completed",
    "expired": "expired",
    "cancelled": "cancelled",
    "failed": "failed",
}


@dataclass(slots=True)
class SimFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


def _error(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> web.Response:
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }
    return web.json_response(body, status=status)


def _limit(request: web.Request, default: int, most: int) -> int | None:
    """The `limit` query parameter within [1, most]; None when it is not an integer."""
    try:
        return max(1, min(most, int(request.query.get("limit", default))))
    except ValueError:
        return None


class OpenAIBatches:
    """The Files and Batches routes, and the OpenAI line formats for `BatchRunner`."""

    api = "openai"

    def __init__(self, runner: BatchRunner):
        self.runner = runner
        self.files: dict[str, SimFile] = {}

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files", self._list_files)
        app.router.add_get("/v1/files/{file_id}", self._get_file)
        app.router.add_get("/v1/files/{file_id}/content", self._file_content)
        app.router.add_delete("/v1/files/{file_id}", self._delete_file)
        app.router.add_post("/v1/batches", self._create)
        app.router.add_get("/v1/batches", self._list)
        app.router.add_get("/v1/batches/{batch_id}", self._get)
        app.router.add_post("/v1/batches/{batch_id}/cancel", self._cancel)

    # ---------------------------------------------------------------- files

    def add_file(self, filename: str, purpose: str, data: bytes) -> SimFile:
        sim_file = SimFile(self.runner.new_id("file-"), filename, purpose, data, int(time.time()))
        self.files[sim_file.id] = sim_file
        return sim_file

    async def _upload(self, request: web.Request) -> web.Response:
        try:
            form = await request.post()
        except ValueError as exc:
            return _error(400, f"expected a multipart form with `file` and `purpose`: {exc}")
        purpose = form.get("purpose")
        upload = form.get("file")
        if not isinstance(purpose, str) or purpose not in FILE_PURPOSES:
            return _error(400, f"purpose must be one of {sorted(FILE_PURPOSES)}", param="purpose")
        if not isinstance(upload, web.FileField):
            return _error(400, "missing required parameter: file", param="file")
        data = upload.file.read()
        sim_file = self.add_file(upload.filename or "upload.jsonl", purpose, data)
        return web.json_response(sim_file.to_json())

    def _file(self, request: web.Request) -> SimFile:
        file_id = request.match_info["file_id"]
        sim_file = self.files.get(file_id)
        if sim_file is None:
            raise _NotFound(f"No such File object: {file_id}")
        return sim_file

    async def _get_file(self, request: web.Request) -> web.Response:
        try:
            return web.json_response(self._file(request).to_json())
        except _NotFound as exc:
            return _error(404, str(exc), param="id")

    async def _file_content(self, request: web.Request) -> web.Response:
        try:
            sim_file = self._file(request)
        except _NotFound as exc:
            return _error(404, str(exc), param="id")
        return web.Response(body=sim_file.data, content_type="application/octet-stream")

    async def _delete_file(self, request: web.Request) -> web.Response:
        try:
            sim_file = self._file(request)
        except _NotFound as exc:
            return _error(404, str(exc), param="id")
        del self.files[sim_file.id]
        return web.json_response({"id": sim_file.id, "object": "file", "deleted": True})

    async def _list_files(self, request: web.Request) -> web.Response:
        purpose = request.query.get("purpose")
        files = [f for f in self.files.values() if purpose is None or f.purpose == purpose]
        if request.query.get("order", "desc") == "desc":
            files.reverse()
        limit = _limit(request, 10_000, 10_000)
        if limit is None:
            return _error(400, "limit must be an integer", param="limit")
        chosen, more = page(files, lambda f: f.id, after=request.query.get("after"), limit=limit)
        return web.json_response(_list_body([f.to_json() for f in chosen], more))

    # ---------------------------------------------------------------- batches

    async def _create(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError as exc:
            return _error(400, f"invalid JSON body: {exc}")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object")
        for name in ("input_file_id", "endpoint", "completion_window"):
            if not isinstance(body.get(name), str):
                return _error(400, f"Missing required parameter: '{name}'.", param=name)
        if body["completion_window"] != "24h":
            return _error(
                400, "completion_window: only '24h' is supported", param="completion_window"
            )
        if body["endpoint"] != ENDPOINT:
            return _error(
                400,
                f"endpoint {body['endpoint']!r}: the simulator batches {ENDPOINT} only",
                param="endpoint",
            )
        sim_file = self.files.get(body["input_file_id"])
        if sim_file is None:
            return _error(
                404, f"No such File object: {body['input_file_id']}", param="input_file_id"
            )
        if sim_file.purpose != "batch":
            return _error(
                400,
                f"the input file must be uploaded with purpose 'batch', not {sim_file.purpose!r}",
                param="input_file_id",
            )
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            return _error(400, "metadata must be an object of strings", param="metadata")
        now = time.time()
        batch = Batch(
            id=self.runner.new_id("batch_"),
            format=self,
            items=[],
            created_at=now,
            expires_at=now + self.runner.window_s(),
            fields={
                "input_file_id": sim_file.id,
                "input": sim_file.data,  # a snapshot: deleting the file later changes nothing
                "metadata": metadata,
                "output_file_id": None,
                "error_file_id": None,
                "model": None,
            },
        )
        self.runner.submit(batch)
        return web.json_response(self.to_json(batch))

    def _batch(self, request: web.Request) -> Batch | None:
        return self.runner.find(request.match_info["batch_id"], self.api)

    async def _get(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if batch is None:
            return _error(404, f"No batch found with id '{request.match_info['batch_id']}'.")
        return web.json_response(self.to_json(batch))

    async def _cancel(self, request: web.Request) -> web.Response:
        batch = self._batch(request)
        if batch is None:
            return _error(404, f"No batch found with id '{request.match_info['batch_id']}'.")
        self.runner.cancel(batch)  # an ended batch is returned as it is
        return web.json_response(self.to_json(batch))

    async def _list(self, request: web.Request) -> web.Response:
        batches = self.runner.listed(self.api)
        limit = _limit(request, 20, 100)
        if limit is None:
            return _error(400, "limit must be an integer", param="limit")
        chosen, more = page(batches, lambda b: b.id, after=request.query.get("after"), limit=limit)
        return web.json_response(_list_body([self.to_json(b) for b in chosen], more))

    # ---------------------------------------------------------------- the runner's side

    def validate(self, batch: Batch) -> tuple[list[BatchItem], list[dict[str, Any]]]:
        errors: list[dict[str, Any]] = []
        items: list[BatchItem] = []
        seen: set[str] = set()

        def problem(code: str, message: str, line: int, param: str | None = None) -> None:
            if len(errors) < 100:
                errors.append({"code": code, "message": message, "param": param, "line": line})

        for number, raw in enumerate(batch.fields["input"].splitlines(), 1):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                problem("invalid_json_line", "This line is not parseable as valid JSON.", number)
                continue
            if not isinstance(entry, dict):
                problem("invalid_json_line", "This line is not a JSON object.", number)
                continue
            custom_id = entry.get("custom_id")
            if not isinstance(custom_id, str) or not custom_id:
                problem("missing_required_parameter", "custom_id is missing.", number, "custom_id")
                continue
            if custom_id in seen:
                problem(
                    "duplicate_custom_id",
                    f"The custom_id {custom_id!r} is used more than once in this file.",
                    number,
                    "custom_id",
                )
                continue
            seen.add(custom_id)
            if entry.get("method") != "POST":
                problem("invalid_method", "method must be POST.", number, "method")
                continue
            if entry.get("url") != ENDPOINT:
                problem(
                    "mismatched_endpoint",
                    f"url must be the batch's endpoint {ENDPOINT}.",
                    number,
                    "url",
                )
                continue
            if not isinstance(entry.get("body"), dict):
                problem("missing_required_parameter", "body is missing.", number, "body")
                continue
            items.append(BatchItem(custom_id, entry["body"]))
        if not items and not errors:
            problem("empty_file", "The input file has no requests.", 0)
        if len(items) > MAX_REQUESTS:
            problem("too_many_requests", f"A batch holds at most {MAX_REQUESTS} requests.", 0)
        if errors:
            return [], errors
        batch.fields["model"] = items[0].body.get("model")
        return items, errors

    def result_line(self, batch: Batch, index: int, item: BatchItem, answer: BatchAnswer) -> bytes:
        if answer.status == 200:
            usage = answer.body["usage"]
            batch.add_usage(
                {
                    "input_tokens": usage["prompt_tokens"],
                    "cached_tokens": usage["prompt_tokens_details"]["cached_tokens"],
                    "output_tokens": usage["completion_tokens"],
                    "reasoning_tokens": usage["completion_tokens_details"]["reasoning_tokens"],
                }
            )
        line = {
            "id": f"batch_req_{batch.id.removeprefix('batch_')}_{index}",
            "custom_id": item.custom_id,
            "response": {
                "status_code": answer.status,
                "request_id": answer.request_id,
                "body": answer.body,
            },
            "error": None,
        }
        return json.dumps(line, ensure_ascii=False).encode()

    def unfinished_line(self, batch: Batch, index: int, item: BatchItem, outcome: str) -> bytes:
        code, message = _UNFINISHED[outcome]
        line = {
            "id": f"batch_req_{batch.id.removeprefix('batch_')}_{index}",
            "custom_id": item.custom_id,
            "response": None,
            "error": {"code": code, "message": message},
        }
        return json.dumps(line, ensure_ascii=False).encode()

    def ended(self, batch: Batch) -> None:
        if batch.outcome == "failed":
            return
        stem = batch.id
        output = b"".join(line + b"\n" for line in lines_of(batch, [SUCCEEDED]))
        errors = b"".join(line + b"\n" for line in lines_of(batch, [ERRORED, EXPIRED, CANCELED]))
        if output:
            batch.fields["output_file_id"] = self.add_file(
                f"{stem}_output.jsonl", "batch_output", output
            ).id
        if errors:
            batch.fields["error_file_id"] = self.add_file(
                f"{stem}_error.jsonl", "batch_output", errors
            ).id

    # ---------------------------------------------------------------- JSON

    def status(self, batch: Batch) -> str:
        if batch.ended:
            return _STATUS[batch.outcome or "completed"]
        return batch.status

    def to_json(self, batch: Batch) -> dict[str, Any]:
        fields = batch.fields
        outcome = batch.outcome if batch.ended else None
        ended = _int(batch.ended_at)
        usage = batch.usage
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": ENDPOINT,
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "input_file_id": fields["input_file_id"],
            "completion_window": "24h",
            "status": self.status(batch),
            "output_file_id": fields["output_file_id"],
            "error_file_id": fields["error_file_id"],
            "created_at": int(batch.created_at),
            "in_progress_at": _int(batch.in_progress_at),
            "expires_at": int(batch.expires_at),
            "finalizing_at": ended if outcome in ("completed", "expired") else None,
            "completed_at": ended if outcome == "completed" else None,
            "failed_at": ended if outcome == "failed" else None,
            "expired_at": ended if outcome == "expired" else None,
            "cancelling_at": _int(batch.cancelled_at),
            "cancelled_at": ended if outcome == "cancelled" else None,
            "request_counts": {
                "total": len(batch.items),
                "completed": batch.succeeded,
                "failed": batch.errored,
            },
            "metadata": fields["metadata"],
            "model": fields["model"],
            "usage": {
                "input_tokens": usage.get("input_tokens", 0),
                "input_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
                "output_tokens": usage.get("output_tokens", 0),
                "output_tokens_details": {"reasoning_tokens": usage.get("reasoning_tokens", 0)},
                "total_tokens": usage.get("input_tokens", 0) + usage.get("output_tokens", 0),
            },
        }


def _int(epoch: float | None) -> int | None:
    return None if epoch is None else int(epoch)


def _list_body(data: list[dict[str, Any]], more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": more,
    }


class _NotFound(LookupError):
    pass
