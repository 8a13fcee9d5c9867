"""`HttpProvider`: the HTTP half every client shares (aiohttp session, limiter, retries, errors).

A wire format (OpenAI chat completions, Anthropic messages, Gemini generateContent) subclasses it
and supplies four small pieces: the URL, the request body, the parse of a 2xx body into a result,
and the parse of an error body. Everything else is here, once:

* one `aiohttp.ClientSession` per provider (= per endpoint per process), created on first use in
  the running event loop, with a connector sized to the limiter's concurrency;
* each attempt: a permit from the `RateLimiter` (concurrency slot + rate permit with a token
  reservation), one POST under the per-attempt timeout and the endpoint's `deadline_s`
  (`deadline.py`), classification of the answer;
* `RetryPolicy` (tenacity) around the attempts; 429s reported to the limiter at once;
* nothing raises out of `complete` except cancellation; messages pass through `redact`.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from itemeval.errors import MalformedBody, PermitsUnavailable
from itemeval.providers._deadline import AttemptDeadline
from itemeval.providers._failures import code_for_error, describe, failure
from itemeval.providers._retry import RetryPolicy, TransientFailure, retry_after_from_headers
from itemeval.providers._settings import EndpointSettings
from itemeval.providers.limits import RateLimiter
from itemeval.providers.types import ErrorCode, ModelRequest, ModelResult
from itemeval.secrets import Secret, redact

#: Output tokens reserved against a tokens-per-minute limit when a request sets no max_tokens.
DEFAULT_OUTPUT_ESTIMATE = 1024

# One encoder for all requests (json.dumps with options builds a new encoder on every call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)

_TRANSIENT = frozenset({ErrorCode.RATE_LIMITED, ErrorCode.SERVER_ERROR, ErrorCode.TIMEOUT})


def estimate_tokens(request: ModelRequest) -> int:
    """Input at ~4 characters a token plus the output budget: the reservation before a call."""
    chars = sum(len(m.get("content") or "") for m in request.messages)
    output = request.params.max_tokens or DEFAULT_OUTPUT_ESTIMATE
    return chars // 4 + 4 * len(request.messages) + output + (request.params.thinking_budget or 0)


class HttpProvider:
    """Base class of the HTTP clients; see the module docstring. Subclasses set `wire_name` and
    implement `url_for`, `build_body`, `parse_success`, `parse_error` and `auth_headers`."""

    wire_name = "http"
    request_id_header = "x-request-id"

    def __init__(
        self,
        settings: EndpointSettings,
        *,
        limiter: RateLimiter,
        api_key: Secret | None = None,
        extra_headers: Mapping[str, Secret | str] | None = None,
        send_sim_hints: bool = False,
    ):
        self.settings = settings
        self.limiter = limiter
        self.base_url = settings.url
        self._send_sim_hints = send_sim_hints
        self._retry = RetryPolicy(
            max_attempts=settings.max_attempts,
            backoff_initial_s=settings.backoff_initial_s,
            backoff_max_s=settings.backoff_max_s,
            max_retry_after_s=settings.max_retry_after_s,
            max_rate_limited_attempts=settings.max_rate_limited_attempts,
        )
        self._timeout = aiohttp.ClientTimeout(
            total=settings.timeout_s, sock_connect=settings.connect_timeout_s
        )
        # Built once; the only place a key is revealed is this dict handed to aiohttp.
        headers: dict[str, str] = {"Content-Type": "application/json", **settings.headers}
        for name, value in (extra_headers or {}).items():
            headers[name] = value.reveal() if isinstance(value, Secret) else value
        if api_key is not None:
            headers.update(self.auth_headers(api_key.reveal()))
        self._headers = headers
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def __reduce__(self) -> tuple[object, ...]:
        # The headers hold the revealed key: a provider must never travel (e.g. to a Ray actor).
        raise TypeError(
            "providers are not serialisable (they hold credentials); build them where they are "
            "used, with make_provider(settings)"
        )

    # ---------------------------------------------------------------- for subclasses

    def auth_headers(self, key: str) -> dict[str, str]:
        raise NotImplementedError

    def url_for(self, request: ModelRequest) -> str:
        raise NotImplementedError

    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def parse_success(self, body: Any, request_id: str | None) -> ModelResult:
        """A 2xx body to a result (ok, or a final failure such as content_filter); raise
        `MalformedBody` when it is not the documented shape."""
        raise NotImplementedError

    def parse_error(self, body: Any) -> tuple[str, str, str]:
        """An error body to (error type, error code, message); '' where absent."""
        raise NotImplementedError

    # ---------------------------------------------------------------- Provider

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The body this client sends for `request` (with the simulator's hints for `sim`
        endpoints): also what the batch tier puts in a batch, so both ask the same."""
        body = self.build_body(request)
        if self._send_sim_hints and request.sim_hints is not None:
            body["itemeval_sim"] = request.sim_hints
        return body

    def request_headers(self) -> dict[str, str]:
        """The headers every request carries, credentials included: for another session of
        this process (the batch API's), never for a log or a file."""
        return dict(self._headers)

    def parse_answer(self, body: Any, request_id: str | None, status: int = 200) -> ModelResult:
        """A 2xx body (already decoded) to a result, exactly as a live answer is read; a body
        that is not the documented shape is `malformed_response`."""
        try:
            return self.parse_success(body, request_id)
        except (ValueError, MalformedBody, KeyError, IndexError, TypeError, AttributeError) as exc:
            snippet = json.dumps(body)[:200] if not isinstance(body, str) else body[:200]
            return failure(
                ErrorCode.MALFORMED_RESPONSE,
                f"HTTP {status} from {self.base_url} with a body that is not a "
                f"{self.wire_name} response ({type(exc).__name__}: {exc}); body starts {snippet!r}",
                http_status=status,
                request_id=request_id,
            )

    def error_result(self, status: int, body: Any, request_id: str | None) -> ModelResult:
        """An error answer (status and decoded body) to a failure result with its stable code,
        as a live call's last attempt would end (transient codes included)."""
        try:
            error_type, error_code, message = self.parse_error(body)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            error_type, error_code, message = "", "", str(body)[:300]
        code = code_for_error(status, error_type, error_code, message)
        text = describe(status, self.base_url, error_type or error_code, message)
        return failure(code, text, http_status=status, request_id=request_id)

    async def complete(self, request: ModelRequest) -> ModelResult:
        try:
            url = self.url_for(request)
            body = self.request_body(request)
            payload = _ENCODER.encode(body).encode()
        except (TypeError, ValueError) as exc:
            return failure(ErrorCode.BAD_REQUEST, f"cannot encode the request: {exc}")
        estimate = estimate_tokens(request)
        # a partial, not a closure coroutine: one coroutine frame fewer per call
        attempt = functools.partial(self._attempt, url, payload, estimate)
        try:
            return await self._retry.run(attempt)
        except asyncio.CancelledError:
            raise
        except PermitsUnavailable as exc:  # waited long enough for the limiter: not sent
            return failure(ErrorCode.CONNECTION_ERROR, str(exc))
        except Exception as exc:  # a bug of ours: report it as a result, never raise
            return failure(
                ErrorCode.INTERNAL,
                f"internal error in the {self.wire_name} client: {type(exc).__name__}: {exc}",
            )

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
        self._session_loop = None
        await self.limiter.aclose()

    # ---------------------------------------------------------------- one attempt

    def _open_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session_loop is loop and self._session is not None:
            return self._session
        if self._session is None or self._session.closed or self._session_loop is not loop:
            connector = aiohttp.TCPConnector(
                limit=self.limiter.max_concurrency, limit_per_host=0, ttl_dns_cache=300
            )
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, timeout=self._timeout
            )
            self._session_loop = loop
        return self._session

    async def _attempt(self, url: str, payload: bytes, estimate: int) -> ModelResult:
        session = self._open_session()
        where = self.base_url or url
        async with (
            self.limiter.acquire(estimate) as permit,
            AttemptDeadline(self.settings.deadline_s, where),
        ):
            try:
                async with session.post(url, data=payload) as response:
                    raw = await response.read()
                    status = response.status
                    headers = response.headers
            except TimeoutError:
                raise TransientFailure(
                    ErrorCode.TIMEOUT,
                    f"no complete answer from {where} within {self.settings.timeout_s:g} s",
                ) from None
            except aiohttp.InvalidURL as exc:
                return failure(ErrorCode.BAD_REQUEST, f"invalid URL {exc}")
            except aiohttp.ClientError as exc:
                raise TransientFailure(
                    ErrorCode.CONNECTION_ERROR,
                    redact(f"{type(exc).__name__} talking to {where}: {exc}"),
                    # refused or unresolvable: the request never reached the provider
                    sent=not isinstance(exc, aiohttp.ClientConnectorError),
                ) from None
            request_id = headers.get(self.request_id_header)
            if 200 <= status < 300:
                result = self._success(raw, request_id, status)
                if result.ok:
                    usage = result.usage
                    permit.settle(usage.input_tokens + usage.output_tokens)
                return result
        return await self._error(status, headers, raw, request_id, where)

    def _success(self, raw: bytes, request_id: str | None, status: int) -> ModelResult:
        try:
            body = json.loads(raw.decode("utf-8"))
            return self.parse_success(body, request_id)
        except (ValueError, MalformedBody, KeyError, IndexError, TypeError, AttributeError) as exc:
            # (UnicodeDecodeError is a ValueError)
            snippet = raw[:200].decode("utf-8", "replace")
            return failure(
                ErrorCode.MALFORMED_RESPONSE,
                f"HTTP {status} from {self.base_url} with a body that is not a "
                f"{self.wire_name} response ({type(exc).__name__}: {exc}); body starts {snippet!r}",
                http_status=status,
                request_id=request_id,
            )

    async def _error(
        self,
        status: int,
        headers: Mapping[str, str],
        raw: bytes,
        request_id: str | None,
        where: str,
    ) -> ModelResult:
        try:
            error_type, error_code, message = self.parse_error(json.loads(raw))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            error_type, error_code = "", ""
            message = raw[:300].decode("utf-8", "replace")
        code = code_for_error(status, error_type, error_code, message)
        text = describe(status, where, error_type or error_code, message)
        if code in _TRANSIENT:
            retry_after = retry_after_from_headers(headers)
            if code == ErrorCode.RATE_LIMITED:
                await self.limiter.report_429(retry_after)
            raise TransientFailure(
                code, text, http_status=status, retry_after_s=retry_after, request_id=request_id
            )
        return failure(code, text, http_status=status, request_id=request_id)
