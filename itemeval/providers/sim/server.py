"""`itemeval sim-server`: the simulator behind the OpenAI, Anthropic and Gemini wire formats.

Routes: `POST /v1/chat/completions`, `GET /v1/models` (OpenAI), `POST /v1/messages`
(Anthropic), `POST /v1beta/models/{model}:generateContent` (Gemini); `GET /_sim/stats` and
`POST /_sim/reset` for tests and benchmarks. Hints travel as an extra `itemeval_sim` body field
(our clients add it for endpoints of kind `sim`; official SDKs do not, and still get plausible
answers).

Like a real provider it enforces its own per-minute limits: a token bucket per dimension that
starts full, holds `burst_s` seconds' worth and refills at the limit's rate; a request that finds
it empty gets a 429 with `retry-after` / `retry-after-ms`, and every response carries the
rate-limit headers of its wire format (`x-ratelimit-*` or `anthropic-ratelimit-*`).

The handlers are written for throughput (several thousand requests/s on one core): stdlib `json`,
no access log, no per-request objects beyond the reply.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from aiohttp import web

from itemeval.providers.settings import SimSettings
from itemeval.providers.sim.engine import SimReply, Simulator, input_tokens

_JSON = "application/json"


@dataclass(slots=True)
class ServerStats:
    """What the server saw (served at `/_sim/stats`)."""

    requests: int = 0
    ok: int = 0
    rate_limited: int = 0  # 429s from the server's own limits
    faults: dict[str, int] = field(default_factory=dict)
    errors: int = 0  # 400/404 for bad requests
    first_arrival_s: float | None = None  # monotonic seconds since the server started
    last_arrival_s: float | None = None


class _Bucket:
    """A provider-side limit: starts full, holds `burst_s` of the rate, refills continuously."""

    __slots__ = ("capacity", "last", "level", "limit", "rate")

    def __init__(self, per_minute: int, burst_s: float):
        self.limit = per_minute
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, per_minute * burst_s / 60.0)
        self.level = self.capacity
        self.last = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.last) * self.rate)
        self.last = now

    def wait_for(self, amount: float) -> float:
        return max(0.0, (amount - self.level) / self.rate)

    def reset_s(self) -> float:
        return max(0.0, (self.capacity - self.level) / self.rate)


@dataclass(frozen=True, slots=True)
class ServerLimits:
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    burst_s: float = 1.0


class SimServer:
    """The aiohttp application around one `Simulator`."""

    def __init__(self, settings: SimSettings | None = None, limits: ServerLimits | None = None):
        self.simulator = Simulator(settings)
        self.limits = limits or ServerLimits()
        self._requests = (
            _Bucket(self.limits.requests_per_minute, self.limits.burst_s)
            if self.limits.requests_per_minute
            else None
        )
        self._tokens = (
            _Bucket(self.limits.tokens_per_minute, self.limits.burst_s)
            if self.limits.tokens_per_minute
            else None
        )
        self.stats = ServerStats()
        self._started = time.monotonic()
        self._ids = itertools.count(1)
        self._hang_s = self.simulator.settings.faults.hang_s

    def app(self) -> web.Application:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1beta/models/{model:.+}", self._gemini)
        app.router.add_get("/_sim/stats", self._stats)
        app.router.add_post("/_sim/reset", self._reset)
        app.router.add_get("/health", self._health)
        return app

    # ---------------------------------------------------------------- limits

    def _admit(self, tokens: int) -> float | None:
        """Take one request and `tokens` from the buckets; the wait in seconds when refused."""
        now = time.monotonic()
        wait = 0.0
        if self._requests is not None:
            self._requests.refill(now)
            if self._requests.level < 1.0:
                wait = self._requests.wait_for(1.0)
        if self._tokens is not None:
            self._tokens.refill(now)
            if self._tokens.level <= 0.0:
                wait = max(wait, self._tokens.wait_for(min(tokens, self._tokens.capacity)))
        if wait > 0:
            return wait
        if self._requests is not None:
            self._requests.level -= 1.0
        if self._tokens is not None:
            self._tokens.level -= tokens
        return None

    def _openai_limit_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        for bucket, dim in ((self._requests, "requests"), (self._tokens, "tokens")):
            if bucket is not None:
                headers[f"x-ratelimit-limit-{dim}"] = str(bucket.limit)
                headers[f"x-ratelimit-remaining-{dim}"] = str(max(0, int(bucket.level)))
                headers[f"x-ratelimit-reset-{dim}"] = f"{bucket.reset_s():.3f}s"
        return headers

    def _anthropic_limit_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        now = time.time()
        for bucket, dim in ((self._requests, "requests"), (self._tokens, "tokens")):
            if bucket is not None:
                reset = datetime.fromtimestamp(now + bucket.reset_s(), tz=UTC)
                headers[f"anthropic-ratelimit-{dim}-limit"] = str(bucket.limit)
                headers[f"anthropic-ratelimit-{dim}-remaining"] = str(max(0, int(bucket.level)))
                headers[f"anthropic-ratelimit-{dim}-reset"] = reset.isoformat().replace(
                    "+00:00", "Z"
                )
        return headers

    # ---------------------------------------------------------------- the common path

    async def _serve(
        self,
        request: web.Request,
        wire: _Wire,
        parse: Callable[[Any], tuple[str, list[dict[str, Any]], dict[str, Any]]],
    ) -> web.Response:
        now = time.monotonic() - self._started
        stats = self.stats
        stats.requests += 1
        if stats.first_arrival_s is None:
            stats.first_arrival_s = now
        stats.last_arrival_s = now
        try:
            body = json.loads(await request.read())
            model, messages, options = parse(body)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            stats.errors += 1
            return wire.error(400, "invalid_request", f"invalid request body: {exc}", {})
        reply = self.simulator.reply(
            model,
            messages,
            hints=options.get("hints"),
            max_tokens=options.get("max_tokens"),
            reasoning_effort=options.get("reasoning_effort"),
            thinking_budget=options.get("thinking_budget"),
        )
        tokens = reply.usage.input_tokens + reply.usage.output_tokens or input_tokens(messages)
        wait = self._admit(tokens)
        headers = wire.limit_headers(self)
        if wait is not None:
            stats.rate_limited += 1
            return wire.rate_limited(wait, headers)
        if reply.kind == "unknown_model":
            stats.errors += 1
            return wire.error(404, "not_found", reply.message, headers)
        if reply.kind != "ok":
            stats.faults[reply.kind] = stats.faults.get(reply.kind, 0) + 1
        if reply.kind == "rate_limit":
            return wire.rate_limited(reply.retry_after_s, headers)
        if reply.delay_s > 0:
            await asyncio.sleep(reply.delay_s)
        if reply.kind == "timeout":
            await asyncio.sleep(self._hang_s)
            return wire.error(500, "server_error", "simulated hang ended", headers)
        if reply.kind == "server_error":
            return wire.error(500, "server_error", "simulated server error (injected)", headers)
        if reply.kind == "malformed":
            return web.Response(body=wire.malformed, content_type=_JSON, headers=headers)
        if reply.kind == "empty":
            reply = SimReply("ok", text="", usage=reply.usage)
        stats.ok += 1
        serial = next(self._ids)
        payload = wire.success(model, reply, serial)
        headers[wire.request_id_header] = f"req_sim{serial:010d}"
        return web.Response(
            body=json.dumps(payload, ensure_ascii=False).encode(),
            content_type=_JSON,
            headers=headers,
        )

    async def _openai(self, request: web.Request) -> web.Response:
        return await self._serve(request, OPENAI, _parse_openai)

    async def _anthropic(self, request: web.Request) -> web.Response:
        return await self._serve(request, ANTHROPIC, _parse_anthropic)

    async def _gemini(self, request: web.Request) -> web.Response:
        name = request.match_info["model"]
        model, _, action = name.rpartition(":")
        if action != "generateContent" or not model:
            return GEMINI.error(404, "NOT_FOUND", f"unsupported method {name!r}", {})

        def parse(body: Any) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
            return _parse_gemini(model, body)

        return await self._serve(request, GEMINI, parse)

    async def _models(self, request: web.Request) -> web.Response:
        data = [
            {"id": mid, "object": "model", "created": 0, "owned_by": "itemeval-sim"}
            for mid in self.simulator.model_ids()
        ]
        return web.json_response({"object": "list", "data": data})

    async def _stats(self, request: web.Request) -> web.Response:
        # The server's own CPU time lets a benchmark tell whether the server was the bottleneck.
        return web.json_response({**asdict(self.stats), "cpu_s": time.process_time()})

    async def _reset(self, request: web.Request) -> web.Response:
        self.stats = ServerStats()
        return web.json_response({"ok": True})

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})


# --------------------------------------------------------------------------- request parsing


def _parse_openai(body: Any) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    if body.get("stream"):
        raise ValueError("streaming is not supported by the simulator")
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise ValueError("`messages` must be a non-empty list")
    options = {
        "hints": body.get("itemeval_sim"),
        "max_tokens": body.get("max_completion_tokens") or body.get("max_tokens"),
        "reasoning_effort": body.get("reasoning_effort"),
    }
    return str(body["model"]), messages, options


def _parse_anthropic(body: Any) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    if body.get("stream"):
        raise ValueError("streaming is not supported by the simulator")
    if not isinstance(body.get("max_tokens"), int):
        raise ValueError("max_tokens: field required")
    messages = list(body["messages"])
    system = body.get("system")
    if system:
        messages.insert(0, {"role": "system", "content": system})
    thinking = body.get("thinking") or {}
    options = {
        "hints": body.get("itemeval_sim"),
        "max_tokens": body["max_tokens"],
        "thinking_budget": thinking.get("budget_tokens")
        if thinking.get("type") == "enabled"
        else None,
    }
    return str(body["model"]), messages, options


def _parse_gemini(model: str, body: Any) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    system = body.get("systemInstruction")
    if system:
        messages.append({"role": "system", "content": system.get("parts", [])})
    for content in body["contents"]:
        messages.append({"role": content.get("role", "user"), "content": content["parts"]})
    config = body.get("generationConfig") or {}
    thinking = config.get("thinkingConfig") or {}
    options = {
        "hints": body.get("itemeval_sim"),
        "max_tokens": config.get("maxOutputTokens"),
        "thinking_budget": thinking.get("thinkingBudget"),
    }
    return model.removeprefix("models/"), messages, options


# --------------------------------------------------------------------------- wire formats


class _Wire:
    """How one wire format writes successes, errors and limit headers."""

    request_id_header = "x-request-id"
    malformed = b'{"id": "x", "choices": [{"index": 0, "mess'

    def success(self, model: str, reply: SimReply, serial: int) -> dict[str, Any]:
        raise NotImplementedError

    def error_body(self, status: int, kind: str, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def limit_headers(self, server: SimServer) -> dict[str, str]:
        return server._openai_limit_headers()

    def error(
        self, status: int, kind: str, message: str, headers: Mapping[str, str]
    ) -> web.Response:
        return web.Response(
            status=status,
            body=json.dumps(self.error_body(status, kind, message)).encode(),
            content_type=_JSON,
            headers=dict(headers),
        )

    def rate_limited(self, wait_s: float, headers: dict[str, str]) -> web.Response:
        headers["retry-after"] = str(max(1, math.ceil(wait_s)))
        headers["retry-after-ms"] = str(max(1, math.ceil(wait_s * 1000)))
        return self.error(429, "rate_limit", "rate limit exceeded, please retry later", headers)


class _OpenAIWire(_Wire):
    _ERROR_TYPES: ClassVar[dict[str, Any]] = {
        "invalid_request": ("invalid_request_error", None),
        "not_found": ("invalid_request_error", "model_not_found"),
        "rate_limit": ("requests", "rate_limit_exceeded"),
        "server_error": ("server_error", None),
    }

    def success(self, model: str, reply: SimReply, serial: int) -> dict[str, Any]:
        usage = reply.usage
        return {
            "id": f"chatcmpl-sim{serial}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": usage.input_tokens,
                "completion_tokens": usage.output_tokens,
                "total_tokens": usage.input_tokens + usage.output_tokens,
                "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
                "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
            },
            "system_fingerprint": "itemeval-sim",
        }

    def error_body(self, status: int, kind: str, message: str) -> dict[str, Any]:
        error_type, code = self._ERROR_TYPES.get(kind, (kind, None))
        return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


class _AnthropicWire(_Wire):
    request_id_header = "request-id"
    malformed = b'{"id": "msg_x", "type": "message", "content": [{"type": "te'
    _ERROR_TYPES: ClassVar[dict[str, Any]] = {
        "invalid_request": "invalid_request_error",
        "not_found": "not_found_error",
        "rate_limit": "rate_limit_error",
        "server_error": "api_error",
    }
    _STOP: ClassVar[dict[str, Any]] = {"stop": "end_turn", "length": "max_tokens"}

    def success(self, model: str, reply: SimReply, serial: int) -> dict[str, Any]:
        usage = reply.usage
        return {
            "id": f"msg_sim{serial}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": reply.text}],
            "stop_reason": self._STOP.get(reply.finish_reason, reply.finish_reason),
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": usage.cached_input_tokens,
            },
        }

    def error_body(self, status: int, kind: str, message: str) -> dict[str, Any]:
        error_type = self._ERROR_TYPES.get(kind, kind)
        return {"type": "error", "error": {"type": error_type, "message": message}}

    def limit_headers(self, server: SimServer) -> dict[str, str]:
        return server._anthropic_limit_headers()


class _GeminiWire(_Wire):
    request_id_header = "x-goog-request-id"
    malformed = b'{"candidates": [{"content": {"parts": [{"te'
    _STATUS: ClassVar[dict[str, Any]] = {
        "invalid_request": "INVALID_ARGUMENT",
        "not_found": "NOT_FOUND",
        "rate_limit": "RESOURCE_EXHAUSTED",
        "server_error": "INTERNAL",
    }
    _FINISH: ClassVar[dict[str, Any]] = {"stop": "STOP", "length": "MAX_TOKENS"}

    def success(self, model: str, reply: SimReply, serial: int) -> dict[str, Any]:
        usage = reply.usage
        return {
            "candidates": [
                {
                    "content": {"parts": [{"text": reply.text}], "role": "model"},
                    "finishReason": self._FINISH.get(reply.finish_reason, "OTHER"),
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": usage.input_tokens,
                "candidatesTokenCount": usage.output_tokens - usage.reasoning_tokens,
                "thoughtsTokenCount": usage.reasoning_tokens,
                "totalTokenCount": usage.input_tokens + usage.output_tokens,
            },
            "modelVersion": model,
            "responseId": f"sim{serial}",
        }

    def error_body(self, status: int, kind: str, message: str) -> dict[str, Any]:
        return {
            "error": {"code": status, "message": message, "status": self._STATUS.get(kind, kind)}
        }


OPENAI = _OpenAIWire()
ANTHROPIC = _AnthropicWire()
GEMINI = _GeminiWire()


# --------------------------------------------------------------------------- running it


@dataclass
class RunningServer:
    """A started server: its port and how to stop it."""

    runner: web.AppRunner
    port: int
    server: SimServer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_server(
    settings: SimSettings | None = None, limits: ServerLimits | None = None, *, port: int = 0
) -> RunningServer:
    """Start the simulator on 127.0.0.1:`port` (0 = any free port) in the running event loop."""
    server = SimServer(settings, limits)
    # A short shutdown: hanging requests (injected timeouts) must not hold up a stop.
    runner = web.AppRunner(
        server.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0
    )
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    site = web.SockSite(runner, sock, backlog=1024)
    await site.start()
    return RunningServer(runner, sock.getsockname()[1], server)
