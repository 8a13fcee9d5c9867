"""A small aiohttp server that answers with canned bodies, for the wire-format tests.

`base/<fixture>/...` answers with the fixture's (status, headers, body) whatever the rest of the
path; it records every request (path, headers, JSON body) so tests can check what was sent.
"""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Canned:
    status: int
    body: Any  # dict/list (sent as JSON) or str/bytes (sent as is)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


class WireServer:
    def __init__(self, fixtures: dict[str, Canned]):
        self.fixtures = fixtures
        self.seen: list[Seen] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def __aenter__(self) -> WireServer:
        app = web.Application()
        app.router.add_route("*", "/{fixture}/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    def url(self, fixture: str) -> str:
        return f"http://127.0.0.1:{self.port}/{fixture}"

    async def _answer(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        self.seen.append(Seen(request.path, dict(request.headers), body))
        canned = self.fixtures[request.match_info["fixture"]]
        if canned.delay_s:
            await asyncio.sleep(canned.delay_s)
        if isinstance(canned.body, dict | list):
            data = json.dumps(canned.body).encode()
        elif isinstance(canned.body, str):
            data = canned.body.encode()
        else:
            data = canned.body
        return web.Response(
            status=canned.status,
            body=data,
            content_type="application/json",
            headers=canned.headers,
        )
