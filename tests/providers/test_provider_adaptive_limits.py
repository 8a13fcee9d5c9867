"""An endpoint that declares no limit, behind a gateway that enforces one: its 429s (without a
hint, as LiteLLM's proxy sends them, in a fixed window that counts rejected attempts too) are
paced away by a rate found from them, shared by every caller of the endpoint on the machine;
no call ends rate-limited. A real HTTP server on 127.0.0.1; the clients are itemeval's own."""

from __future__ import annotations

import asyncio
import socket
import time

from aiohttp import web

from itemeval.providers import EndpointSettings, ModelRequest, SamplingParams, make_provider
from itemeval.providers.limits._machine import machine_source

WINDOW_S, PER_WINDOW = 1.0, 8


class Gateway:
    """Chat completions behind a fixed-window limit of `PER_WINDOW` attempts (rejected ones
    count); a 429 carries `hint` headers, or none."""

    def __init__(self, hint: dict[str, str] | None = None):
        self.hint = hint or {}
        self.ok = self.rejected = 0
        self._window, self._count = -1, 0
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> Gateway:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _answer(self, request: web.Request) -> web.Response:
        await request.read()
        window = int(time.monotonic() / WINDOW_S)
        if window != self._window:
            self._window, self._count = window, 0
        self._count += 1
        if self._count > PER_WINDOW:
            self.rejected += 1
            error = {"error": {"message": "Rate limit exceeded", "type": "rate_limit_error"}}
            return web.json_response(error, status=429, headers=self.hint)
        self.ok += 1
        await asyncio.sleep(0.02)
        return web.json_response(
            {
                "id": f"c{self.ok}",
                "object": "chat.completion",
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "4"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
            }
        )


REQUEST = ModelRequest(
    model="m",
    messages=({"role": "user", "content": "2 + 2 = ?"},),
    params=SamplingParams(max_tokens=8),
)


async def _calls(providers, count: int, concurrency: int) -> list:
    queue = list(range(count))
    results = []

    async def worker(provider) -> None:
        while queue:
            queue.pop()
            results.append(await provider.complete(REQUEST))

    await asyncio.gather(*(worker(providers[i % len(providers)]) for i in range(concurrency)))
    return results


def _settings(url: str) -> EndpointSettings:
    return EndpointSettings(
        kind="openai", base_url=url, max_attempts=2, backoff_initial_s=0.05, backoff_max_s=0.1
    )


def test_unhinted_429s_are_paced_by_a_rate_found_and_shared_by_every_caller(tmp_path):
    async def main() -> tuple[Gateway, list, list, float]:
        async with Gateway() as gateway:
            settings = _settings(gateway.url)
            sources = [machine_source(settings, tmp_path) for _ in range(2)]  # two processes
            providers = [make_provider(settings, permit_source=s, slot_source=s) for s in sources]
            started = time.monotonic()
            results = await _calls(providers, 60, 16)
            took = time.monotonic() - started
            states = [s.limiter.state()["bucket"] for s in sources]
            for provider in providers:
                await provider.aclose()
        return gateway, results, states, took

    gateway, results, states, took = asyncio.run(asyncio.wait_for(main(), 120))
    # Every call is answered, though each may be attempted only twice for other failures ...
    assert all(r.ok for r in results), {r.error_message for r in results if not r.ok}
    assert gateway.ok == 60
    # ... because the 429s did not hammer on: the callers found a rate and kept to it together.
    assert states[0]["found_per_minute"] is not None
    assert gateway.rejected < gateway.ok, (gateway.rejected, took)
    assert took >= 60 / PER_WINDOW * WINDOW_S * 0.8


def test_a_429_with_a_hint_makes_its_call_wait_without_pacing_the_endpoint(tmp_path):
    async def main() -> tuple[Gateway, list, dict]:
        async with Gateway({"llm_provider-retry-after": "0.3"}) as gateway:
            settings = _settings(gateway.url)
            source = machine_source(settings, tmp_path)
            provider = make_provider(settings, permit_source=source, slot_source=source)
            results = await _calls([provider], 24, 8)
            state = source.limiter.state()["bucket"]
            await provider.aclose()
        return gateway, results, state

    gateway, results, state = asyncio.run(asyncio.wait_for(main(), 120))
    assert all(r.ok for r in results)
    assert gateway.rejected > 0 and state["found_per_minute"] is None
    assert max(r.attempts for r in results) > 2  # 429s do not use up the attempts
