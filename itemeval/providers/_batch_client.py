"""The providers' batch APIs: what the batch tier (`runtime/batch/`) needs of each, in one shape.

    client = make_batch_client(settings, field="endpoints.openai")
    line = client.encode(custom_id, request)          # the live client's body, as a batch line
    status = await client.create(local_id, lines)     # one batch (never retried blindly)
    status = await client.retrieve(status.id)         # ... until status.ended
    for result in await client.results(status):       # custom_id -> ModelResult | None
        ...

A batch request is the request the live client would send: `encode` takes the body from the
endpoint's own client (`HttpProvider.request_body`), and results are read by the same parser
(`parse_answer`, `error_result`), so a batch answer and a live answer become identical rows
(except `tier`, `usd` and latency). A result of `None` means the request was not processed
(the batch expired or was cancelled first).

Management calls (listing, status, results, cancel, file upload) are retried on 429, 5xx and
connection failures. Creating a batch is not: a create whose answer was lost may have created
it, so it raises `UncertainCreate` and the caller looks for it (`find`: OpenAI by the `metadata`
the create carried, Anthropic by creation time and request count) before trying again.

The wire formats live in `openai_batch.py` (Files and Batches) and `anthropic_batch.py` (Message
Batches). Plain async Python over one aiohttp session per client.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import aiohttp

from itemeval.errors import BatchApiError, UncertainCreate
from itemeval.providers._settings import EndpointSettings
from itemeval.providers._transport import HttpProvider
from itemeval.providers.types import ModelRequest, ModelResult

#: Management calls get this many attempts (listing, status, results, cancel, upload).
MANAGEMENT_ATTEMPTS = 6
#: Uploads and result files can be large: at least this long per attempt.
TRANSFER_TIMEOUT_S = 600.0
#: The most bytes itemeval puts in one batch (OpenAI allows 200 MB, Anthropic 256 MB).
MAX_BATCH_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """A batch as the provider describes it now."""

    id: str
    ended: bool  # processing is over: results (of whatever was done) can be read
    status: str  # the provider's own word (in_progress, finalizing, completed, ended, ...)
    created_at: float  # epoch seconds
    requests: int
    succeeded: int | None = None  # when the provider says
    errored: int | None = None
    failure: str | None = None  # the batch failed as a whole (OpenAI: its input file), why
    raw: dict[str, Any] | None = None  # the provider's object (results locations)


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One request's outcome: a result (ok, or a failure with its stable code), or None when
    it was not processed (expired or cancelled)."""

    custom_id: str
    result: ModelResult | None


class BatchClient:
    """One endpoint's batch API (see the module doc); subclasses are the wire formats."""

    api: ClassVar[str] = ""
    provider_max_requests: ClassVar[int] = 50_000

    def __init__(self, settings: EndpointSettings, provider: HttpProvider):
        self.settings = settings
        self.provider = provider
        self.base_url = provider.base_url
        headers = provider.request_headers()
        headers.pop("Content-Type", None)  # uploads are multipart; bodies say their own type
        self._headers = headers
        self._session: aiohttp.ClientSession | None = None
        batch = settings.batch
        self.max_requests = min(
            self.provider_max_requests,
            batch.max_requests if batch and batch.max_requests else self.provider_max_requests,
        )
        self.max_bytes = MAX_BATCH_BYTES

    # ---------------------------------------------------------------- for subclasses

    def encode(self, custom_id: str, request: ModelRequest) -> bytes:
        """One request as the batch carries it (a JSONL line, or an entry of a list)."""
        raise NotImplementedError

    async def create(self, local_id: str, lines: Sequence[bytes]) -> BatchStatus:
        """Submit one batch of `lines` (raises `UncertainCreate` when it may exist anyway)."""
        raise NotImplementedError

    async def find(self, local_id: str, requests: int, since: float) -> list[str]:
        """Batches that a create for `local_id` (of `requests` requests, started at epoch
        `since`) may have made: exact for OpenAI, candidates for Anthropic."""
        raise NotImplementedError

    async def retrieve(self, batch_id: str) -> BatchStatus:
        raise NotImplementedError

    async def cancel(self, batch_id: str) -> BatchStatus:
        raise NotImplementedError

    async def results(self, status: BatchStatus) -> list[BatchResult]:
        """Every result line of an ended batch."""
        raise NotImplementedError

    async def cleanup(self, status: BatchStatus) -> None:
        """Delete what the batch left at the provider that nobody needs (best effort)."""

    # ---------------------------------------------------------------- HTTP

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            timeout = aiohttp.ClientTimeout(
                total=max(self.settings.timeout_s, TRANSFER_TIMEOUT_S),
                sock_connect=self.settings.connect_timeout_s,
            )
            self._session = aiohttp.ClientSession(headers=self._headers, timeout=timeout)
        return self._session

    async def request(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None = None,
        form: aiohttp.FormData | None = None,
        params: dict[str, str] | None = None,
        once: bool = False,
    ) -> bytes:
        """The response body of a 2xx answer; `BatchApiError` otherwise. Retried on 429, 5xx
        and connection failures unless `once` (a create: `UncertainCreate` when it may have
        happened)."""
        attempts = 1 if once else MANAGEMENT_ATTEMPTS
        delay = self.settings.backoff_initial_s
        for attempt in range(1, attempts + 1):
            try:
                status, raw, retry_after = await self._send(method, url, body, form, params)
            except (TimeoutError, aiohttp.ClientError) as exc:
                message = f"{type(exc).__name__} talking to {self.base_url}: {exc}"
                if once:
                    raise UncertainCreate(message, transient=True) from None
                if attempt == attempts:
                    raise BatchApiError(message, transient=True) from None
            else:
                if 200 <= status < 300:
                    return raw
                transient = status == 429 or status >= 500 or status == 409
                message = self._describe(status, raw)
                if once and status >= 500:
                    raise UncertainCreate(message, status=status, transient=True)
                if not transient or once or attempt == attempts:
                    raise BatchApiError(message, status=status, transient=transient)
                if retry_after is not None:
                    delay = max(delay, retry_after)
            await asyncio.sleep(min(delay, self.settings.backoff_max_s) * random.uniform(0.5, 1))
            delay = min(max(delay * 2, 0.1), self.settings.backoff_max_s)
        raise AssertionError("unreachable")

    async def _send(
        self,
        method: str,
        url: str,
        body: bytes | None,
        form: aiohttp.FormData | None,
        params: dict[str, str] | None,
    ) -> tuple[int, bytes, float | None]:
        headers = {"Content-Type": "application/json"} if body is not None else None
        data: Any = form if form is not None else body
        async with self.session().request(
            method, url, data=data, params=params, headers=headers
        ) as response:
            raw = await response.read()
            retry_after = response.headers.get("retry-after")
            try:
                wait = float(retry_after) if retry_after is not None else None
            except ValueError:
                wait = None
            return response.status, raw, wait

    def _describe(self, status: int, raw: bytes) -> str:
        try:
            _, _, message = self.provider.parse_error(json.loads(raw))
        except (ValueError, KeyError, TypeError, AttributeError):
            message = raw[:300].decode("utf-8", "replace")
        return f"HTTP {status} from the batch API at {self.base_url}: {message}"

    async def get_json(self, url: str, params: dict[str, str] | None = None) -> Any:
        return _json(await self.request("GET", url, params=params), url)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
        await self.provider.aclose()


def _json(raw: bytes, url: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise BatchApiError(f"{url} answered with a body that is not JSON: {exc}") from None


def result_lines(raw: bytes) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL results file (blank lines skipped)."""
    out = []
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise BatchApiError(f"line {number} of a batch's results is not JSON: {exc}") from None
        if isinstance(entry, dict):
            out.append(entry)
    return out


def make_batch_client(settings: EndpointSettings, *, field: str | None = None) -> BatchClient:
    """The batch client of an endpoint whose `batch` is enabled (its key read here)."""
    from itemeval.providers._anthropic_batch import AnthropicBatchClient
    from itemeval.providers._factory import make_provider
    from itemeval.providers._openai_batch import OpenAIBatchClient

    provider = make_provider(settings, field=field)
    if not isinstance(provider, HttpProvider) or settings.wire not in ("openai", "anthropic"):
        raise ValueError(f"{settings.kind} endpoints have no batch API itemeval drives")
    cls = OpenAIBatchClient if settings.wire == "openai" else AnthropicBatchClient
    return cls(settings, provider)
