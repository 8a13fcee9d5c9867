"""`itemeval sim-server`: the simulator behind the OpenAI, Anthropic and Gemini wire formats.

Live routes: `POST /v1/chat/completions`, `GET /v1/models` (OpenAI), `POST /v1/messages`
(Anthropic), `POST /v1beta/models/{model}:generateContent` and the same under `/v1` (Gemini).
A request asking for structured output gets a value of its schema (`structured.py`). Batch
routes: OpenAI Files and Batches (`openai_batches.py`), Anthropic Message Batches
(`anthropic_batches.py`). For tests and benchmarks: `GET /_sim/stats` (`stats.py`;
`?window_s=60` adds the most admitted requests and tokens in any window of that length,
`?arrivals=1` the arrival times themselves) and `POST /_sim/reset`. Hints travel as an extra
`itemeval_sim` body field (our clients add it for endpoints of kind `sim`; official SDKs do not,
and still get plausible answers).

Like a real provider it enforces its own per-minute limits on the live routes, and when asked a
limit on requests in flight (`limits.py`: 429 with `retry-after` / `retry-after-ms`, and the
rate-limit headers of each wire format); every arrival over a limit is counted (`over_rpm`,
`over_tpm`, `over_concurrency`), so a test can hold a client's limiter to zero; and it
reports prompt caching (`prompt_cache.py`) and hidden reasoning the way each provider does
(`wire.py`). Batches are not subject to the live limits.

The live handler is written for throughput (several thousand requests/s on one core): stdlib
`json`, no access log, O(1) bookkeeping per request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import math
import socket
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from itemeval.simulator._anthropic_batches import AnthropicBatches
from itemeval.simulator._batches import BatchAnswer, BatchRunner
from itemeval.simulator._engine import SimReply, Simulator, input_tokens
from itemeval.simulator._limits import Limiter, ServerLimits
from itemeval.simulator._model import model_name
from itemeval.simulator._openai_batches import OpenAIBatches
from itemeval.simulator._prompt_cache import NO_CACHE, CacheUsage, PromptCache
from itemeval.simulator._settings import SimSettings
from itemeval.simulator._stats import ServerStats
from itemeval.simulator._structured import structure
from itemeval.simulator._wire import ANTHROPIC, GEMINI, JSON_TYPE, OPENAI, Call, Wire

__all__ = ["RunningServer", "ServerLimits", "SimServer", "start_server"]

_PARSE_ERRORS = (ValueError, KeyError, TypeError, AttributeError)
_BATCH_WIRES = {"openai": OPENAI, "anthropic": ANTHROPIC}
#: The Retry-After of a 429 for an arrival over the server's `max_concurrency`.
CONCURRENCY_RETRY_S = 0.1


class SimServer:
    """The aiohttp application around one `Simulator`."""

    def __init__(self, settings: SimSettings | None = None, limits: ServerLimits | None = None):
        self.simulator = Simulator(settings)
        settings = self.simulator.settings
        self.limits = limits or ServerLimits()
        self.limiter = Limiter(self.limits)
        self.prompt_cache = PromptCache(settings.prompt_cache)
        # No prompt shorter than this is ever cached (infinite: caching is off).
        self._min_cacheable = (
            min(spec.min_cacheable_tokens for spec in self.simulator.models.values())
            if settings.prompt_cache.enabled
            else math.inf
        )
        self.stats = ServerStats()
        self._started = time.monotonic()
        self._ids = itertools.count(1)
        self._hang_s = settings.faults.hang_s
        self.batches = BatchRunner(settings.batch, settings.seed, self, lambda: self.stats.batch)
        self.openai_batches = OpenAIBatches(self.batches)
        self.anthropic_batches = AnthropicBatches(self.batches)

    def app(self) -> web.Application:
        # Batch input files may be large (OpenAI allows 200 MB).
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/messages", self._anthropic)
        # Gemini under both API versions (the google-genai SDK's `api_version`).
        app.router.add_post("/v1beta/models/{model:.+}", self._gemini)
        app.router.add_post("/v1/models/{model:.+}", self._gemini)
        self.openai_batches.add_routes(app)
        self.anthropic_batches.add_routes(app)
        app.router.add_get("/_sim/stats", self._stats)
        app.router.add_post("/_sim/reset", self._reset)
        app.router.add_get("/health", self._health)
        app.on_shutdown.append(self._shutdown)
        return app

    # ---------------------------------------------------------------- the live path

    async def _serve(
        self, request: web.Request, wire: Wire, model: str | None = None
    ) -> web.Response:
        stats = self.stats
        stats.in_flight += 1
        if stats.in_flight > stats.max_concurrent:
            stats.max_concurrent = stats.in_flight
        try:
            now = time.monotonic() - self._started
            stats.requests += 1
            if stats.first_arrival_s is None:
                stats.first_arrival_s = now
            stats.last_arrival_s = now
            most = self.limits.max_concurrency
            if most is not None and stats.in_flight > most:
                stats.over_concurrency += 1
                stats.rate_limited += 1
                return wire.rate_limited(CONCURRENCY_RETRY_S, {})
            try:
                call = wire.parse(json.loads(await request.read()), model)
            except _PARSE_ERRORS as exc:
                stats.errors += 1
                return wire.error(400, "invalid_request", f"invalid request body: {exc}", {})
            reply = self.simulator.reply(
                call.model,
                call.messages,
                hints=call.hints,
                max_tokens=call.max_tokens,
                reasoning_effort=call.reasoning_effort,
                thinking_budget=call.thinking_budget,
                structured=call.output is not None,
            )
            if call.output is not None:
                reply = self._structure(reply, call)
            tokens = reply.usage.input_tokens + reply.usage.output_tokens or input_tokens(
                call.messages
            )
            clock = time.monotonic()
            wait = self.limiter.admit(tokens, clock)
            headers = wire.limit_headers(self.limiter)
            if wait is not None:
                stats.rate_limited += 1
                if self.limiter.refused_by == "requests":
                    stats.over_rpm += 1
                else:
                    stats.over_tpm += 1
                return wire.rate_limited(wait, headers)
            stats.admitted(clock - self._started, tokens)
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
                return web.Response(body=wire.malformed, content_type=JSON_TYPE, headers=headers)
            if reply.kind == "empty":
                reply = SimReply("ok", text="", usage=reply.usage)
            # After the latency, as a provider writes its cache entry when it has processed the
            # prompt: identical requests already in flight miss it.
            cache = self._prompt_cache(wire, call, reply)
            if self.limits.overreport_input or self.limits.overreport_output:
                reply.usage = dataclasses.replace(
                    reply.usage,
                    input_tokens=reply.usage.input_tokens + self.limits.overreport_input,
                    output_tokens=reply.usage.output_tokens + self.limits.overreport_output,
                )
            # `self.stats`, not `stats`: the latency may have spanned a reset.
            self.stats.answered(call.model, wire.route, reply.usage, cache)
            serial = next(self._ids)
            payload = wire.success(call.model, reply, serial, cache, call=call)
            headers[wire.request_id_header] = f"req_sim{serial:010d}"
            return web.Response(
                body=json.dumps(payload, ensure_ascii=False).encode(),
                content_type=JSON_TYPE,
                headers=headers,
            )
        finally:
            self.stats.in_flight -= 1  # `self.stats`: a reset may have replaced it meanwhile

    def _structure(self, reply: SimReply, call: Call) -> SimReply:
        assert call.output is not None
        return structure(
            reply,
            call.output,
            model=call.model,
            messages=call.messages,
            hints=call.hints,
            max_tokens=call.max_tokens,
            seed=self.simulator.settings.seed,
        )

    def _prompt_cache(self, wire: Wire, call: Call, reply: SimReply) -> CacheUsage:
        if reply.usage.input_tokens < self._min_cacheable and not call.breakpoints:
            return NO_CACHE  # the common case, decided at once
        spec = self.simulator.models.get(model_name(call.model))
        if spec is None:
            return NO_CACHE
        return wire.prompt_cache(
            self.prompt_cache, call, reply.usage.input_tokens, spec.min_cacheable_tokens
        )

    async def _openai(self, request: web.Request) -> web.Response:
        return await self._serve(request, OPENAI)

    async def _anthropic(self, request: web.Request) -> web.Response:
        return await self._serve(request, ANTHROPIC)

    async def _gemini(self, request: web.Request) -> web.Response:
        name = request.match_info["model"]
        model, _, action = name.rpartition(":")
        if action != "generateContent" or not model:
            return GEMINI.error(404, "NOT_FOUND", f"unsupported method {name!r}", {})
        return await self._serve(request, GEMINI, model)

    # ---------------------------------------------------------------- batches

    def batch_answer(self, api: str, body: Any, fail: bool) -> BatchAnswer:
        """One batch request, answered as the live route would (without limits, latency or
        injected faults); `fail` turns it into a server error (the batch error rate)."""
        wire = _BATCH_WIRES[api]
        stats = self.stats.batch
        serial = next(self._ids)
        request_id = f"req_sim{serial:010d}"
        try:
            call = wire.parse(body)
        except _PARSE_ERRORS as exc:
            stats.errored += 1
            body = wire.error_body(400, "invalid_request", f"invalid request body: {exc}")
            return BatchAnswer(400, body, request_id)
        reply = self.simulator.answer(
            call.model,
            call.messages,
            hints=call.hints,
            max_tokens=call.max_tokens,
            reasoning_effort=call.reasoning_effort,
            thinking_budget=call.thinking_budget,
            structured=call.output is not None,
        )
        if call.output is not None:
            reply = self._structure(reply, call)
        if reply.kind == "unknown_model":
            stats.errored += 1
            return BatchAnswer(404, wire.error_body(404, "not_found", reply.message), request_id)
        if fail:
            stats.errored += 1
            message = "simulated server error (batch error rate)"
            return BatchAnswer(500, wire.error_body(500, "server_error", message), request_id)
        cache = self._prompt_cache(wire, call, reply)
        stats.ok += 1
        stats.ok_by_model[call.model] = stats.ok_by_model.get(call.model, 0) + 1
        stats.usage.add(reply.usage, cache)
        payload = wire.success(call.model, reply, serial, cache, batch=True, call=call)
        return BatchAnswer(200, payload, request_id, call.model)

    # ---------------------------------------------------------------- the rest

    async def _models(self, request: web.Request) -> web.Response:
        data = [
            {"id": mid, "object": "model", "created": 0, "owned_by": "itemeval-sim"}
            for mid in self.simulator.model_ids()
        ]
        return web.json_response({"object": "list", "data": data})

    async def _stats(self, request: web.Request) -> web.Response:
        query = request.query
        window_s: float | None = None
        if "window_s" in query:
            try:
                window_s = float(query["window_s"])
            except ValueError:
                window_s = -1.0
            if not window_s > 0:
                return web.json_response(
                    {"error": "window_s must be a positive number of seconds"}, status=400
                )
        arrivals = query.get("arrivals", "0").lower() in ("1", "true", "yes")
        # The server's own CPU time lets a benchmark tell whether the server was the bottleneck.
        body = self.stats.to_json(window_s=window_s, arrivals=arrivals, cpu_s=time.process_time())
        body["prompt_cache_entries"] = len(self.prompt_cache)
        return web.json_response(body)

    async def _reset(self, request: web.Request) -> web.Response:
        """Forget what was counted and cached; batches and files stay (drivers may poll them)."""
        self.stats = ServerStats(in_flight=self.stats.in_flight)
        self.prompt_cache.clear()
        return web.json_response({"ok": True})

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def _shutdown(self, app: web.Application) -> None:
        await self.batches.close()


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
