"""An HTTP proxy in front of the moto S3 server that fails a share of object writes.

It stands where a flaky object store would (the storage boundary): s3fs talks to it as to S3;
it forwards every request to moto, except that a seeded fraction of PUTs (uploads) get a 503
`SlowDown` or a 500 `InternalError`, as S3 sends under load. botocore retries some of these
itself; the rest reach itemeval as failed writes.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
from aiohttp import web

_ERRORS = (
    (503, "SlowDown", "Please reduce your request rate."),
    (500, "InternalError", "We encountered an internal error. Please try again."),
)


@contextmanager
def s3_fault_proxy(
    upstream: str,
    *,
    put_failure_rate: float = 0.0,
    seed: int = 7,
    fail_objects: int = 0,
    fail_object_rate: float = 0.0,
    only_paths: str = "",
    put_delay_s: float = 0.0,
) -> Iterator[dict]:
    """Run the proxy on 127.0.0.1 in a thread; yields {"url": ..., "failed": n, "puts": n,
    "requests": Counter by method}.

    Besides the random `put_failure_rate`, `fail_objects` fails every PUT (retries included) of
    the first N distinct objects whose path contains `only_paths` (every PUT when it is ""):
    exactly N writes fail, whatever the client retries; `fail_object_rate` dooms each further
    matching object with that probability (seeded). `put_delay_s` holds every matching PUT
    that long before forwarding it (a slow object store)."""
    doomed: set[str] = set()
    judged: set[str] = set()
    rng = random.Random(seed)
    stats: dict = {
        "url": "",
        "failed": 0,
        "puts": 0,
        "enabled": True,
        "matching": 0,
        "requests": Counter(),  # every request forwarded or failed, by method
    }
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        stats["requests"][request.method] += 1
        if request.method == "PUT":
            stats["puts"] += 1
            matches = only_paths in request.path
            if matches:
                stats["matching"] += 1
                if put_delay_s:
                    await asyncio.sleep(put_delay_s)
            if matches and request.path not in judged:
                judged.add(request.path)
                if len(doomed) < fail_objects or rng.random() < fail_object_rate:
                    doomed.add(request.path)
            forced = request.path in doomed
            if stats["enabled"] and (forced or rng.random() < put_failure_rate):
                stats["failed"] += 1
                status, code, message = _ERRORS[stats["failed"] % 2]
                xml = f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"
                return web.Response(status=status, text=xml, content_type="application/xml")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host",)}
        async with holder["session"].request(
            request.method, upstream + request.path_qs, data=body, headers=headers
        ) as response:
            payload = await response.read()
            skip = {"transfer-encoding", "content-encoding"}
            if request.method != "HEAD":  # HEAD answers carry the object's length, no body
                skip.add("content-length")
            headers = {k: v for k, v in response.headers.items() if k.lower() not in skip}
            return web.Response(status=response.status, body=payload, headers=headers)

    async def start() -> None:
        holder["session"] = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        stats["url"] = f"http://127.0.0.1:{port}"
        holder["runner"] = runner
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop)
    if not started.wait(10):
        raise RuntimeError("S3 fault proxy did not start")
    try:
        yield stats
    finally:

        async def stop() -> None:
            await holder["runner"].cleanup()
            await holder["session"].close()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
