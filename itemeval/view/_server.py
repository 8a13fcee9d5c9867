"""The viewer's HTTP server: aiohttp, GET only, on 127.0.0.1 unless told otherwise.

* `ViewState` holds the current `ViewIndex` and its overview. A thread looks at the store's
  listing every `refresh_s` seconds and, when fragments landed (a run under way), builds a new
  index and swaps it in; pages keep being served from the previous one meanwhile.
* Pages are rendered in a worker thread (`asyncio.to_thread`), so a slow read never stalls the
  event loop.
* Safety: every handler reads; any method but GET and HEAD is refused (405). Pages carry a
  Content-Security-Policy that allows only the viewer's own script and stylesheet, on top of
  templates that escape every value (`pages`). On a loopback address only requests naming a
  loopback host are answered (a page elsewhere cannot reach the viewer through DNS
  rebinding). On any other address a token is required (`?token=`, then a cookie, or an
  `Authorization: Bearer` header), generated and printed unless given.
"""

from __future__ import annotations

import asyncio
import hmac
import importlib
import logging
import secrets
import socket
import threading
import time
import webbrowser
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from itemeval._util.heap import release_unused_memory, use_system_arrow_pool
from itemeval.errors import InputError, Problem
from itemeval.planning import Plan
from itemeval.report import keep_numbers, kept_numbers, numbers_key
from itemeval.view import _pages as pages
from itemeval.view import _queries as queries
from itemeval.view._index import ViewIndex, build_index, store_version
from itemeval.view._queries import Overview, overview

#: The overview page as last rendered, with what `/api/version` answers (`ViewState`).
FIRST_PAGE_FILE = "analysis/view.json"

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
TOKEN_COOKIE = "itemeval_view_token"
DEFAULT_PORT = 8700
_STATIC = {"view.css": "text/css", "view.js": "text/javascript"}
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


@dataclass(frozen=True)
class ViewOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT  # 0: any free port
    token: str | None = None  # required on a non-loopback host (generated when None)
    open_browser: bool = True
    refresh_s: float = 2.0  # how often the store's listing is looked at (0: never)

    @property
    def local(self) -> bool:
        return self.host in LOCAL_HOSTS


class ViewState:
    """The current index and overview, rebuilt when the store changes.

    The overview page is kept beside the store once rendered (`FIRST_PAGE_FILE`, under the
    key `status` keeps its numbers by: every fragment, the study, the selection,
    `report.keep_numbers`). A viewer started over a store whose key still holds answers `/`
    from it at once and builds the index in a thread; the other pages wait for the index.
    """

    def __init__(self, plan: Plan, refresh_s: float = 2.0) -> None:
        self.plan = plan
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._index: ViewIndex | None = None
        self._overview: Overview | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()  # the index is built (or failed to be: `_failed`)
        self._failed: BaseException | None = None
        self._kept: dict[str, Any] | None = None  # the kept first page, until the index is
        self.loaded = False  # `load` was called
        self.rebuilds = 0

    def load(self) -> None:
        """Read the store: the kept first page and the index in a thread when the key holds,
        else the index here (and keep its overview page)."""
        self.loaded = True
        key = numbers_key(self.plan)
        kept = kept_numbers(self.plan, key, FIRST_PAGE_FILE) if queries.tiers_hook is None else None
        if kept is not None and kept.get("version") == store_version(self.plan):
            self._kept = kept
            threading.Thread(target=self._build, name="itemeval-view-index", daemon=True).start()
            return
        self._build(raising=True)
        if queries.tiers_hook is None:  # a page of a hook's tiers is not the study's
            self._keep_first_page(key)

    def _build(self, raising: bool = False) -> None:
        try:
            index = build_index(self.plan)
            summary = overview(index)
            index.keep_page_columns()
            release_unused_memory()
            with self._lock:
                self._index, self._overview = index, summary
            self.rebuilds += 1
        except BaseException as exc:
            if raising:
                raise
            self._failed = exc
            log.warning("the viewer could not read the store", exc_info=True)
        finally:
            self._ready.set()

    def _keep_first_page(self, key: str) -> None:
        index = self.index
        _, page = pages.overview_page(self, {})
        numbers = {
            "version": index.version,
            "page": page,
            "solutions": index.cells.answers,
            "grades": index.cells.grades.num_rows,
        }
        keep_numbers(self.plan, key, numbers, FIRST_PAGE_FILE)

    @property
    def ready(self) -> bool:
        """Whether the index is built (pages other than the kept first page wait for it)."""
        return self._ready.is_set() and self._failed is None

    def kept_page(self) -> dict[str, Any] | None:
        """The kept first page and its counts while the index is being built, else None."""
        return None if self._ready.is_set() else self._kept

    @property
    def index(self) -> ViewIndex:
        self._ready.wait()
        with self._lock:
            if self._index is None:
                raise InputError(Problem(f"the viewer could not read the store: {self._failed}"))
            return self._index

    @property
    def overview(self) -> Overview:
        self._ready.wait()
        with self._lock:
            if self._overview is None:
                raise InputError(Problem(f"the viewer could not read the store: {self._failed}"))
            return self._overview

    def refresh_once(self) -> bool:
        """Build a new index if the store changed; whether it did."""
        version = store_version(self.plan)
        if version == self.index.version:
            return False
        index = build_index(self.plan, version)
        summary = overview(index)
        index.keep_page_columns()
        with self._lock:
            self._index, self._overview = index, summary
        del index, summary
        release_unused_memory()  # the previous index, and what the overview computed with
        self.rebuilds += 1
        return True

    def start(self) -> None:
        if self.refresh_s <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._watch, name="itemeval-view", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _watch(self) -> None:
        while not self._stop.wait(self.refresh_s):
            try:
                self.refresh_once()
            except Exception:  # a read during a compaction or a half-listed store: next time
                log.warning("the viewer could not re-read the store", exc_info=True)


def make_app(state: ViewState, token: str | None, *, local: bool) -> web.Application:
    """The web application (routes and guards) over `state`."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "HEAD"])
        if local and token is None and _hostname(request.host) not in LOCAL_HOSTS:
            raise web.HTTPForbidden(text="the viewer answers only requests to 127.0.0.1")
        if token is not None:
            given = request.query.get("token")
            if given is not None and hmac.compare_digest(given, token):
                rest = {k: v for k, v in request.query.items() if k != "token"}
                target = request.path + ("?" + urlencode(rest) if rest else "")
                found = web.HTTPFound(target)
                found.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict")
                raise found
            cookie = request.cookies.get(TOKEN_COOKIE, "")
            bearer = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if not (hmac.compare_digest(cookie, token) or hmac.compare_digest(bearer, token)):
                raise web.HTTPUnauthorized(
                    text="this viewer needs its token: open the URL `itemeval view` printed"
                )
        response = await handler(request)
        response.headers["Content-Security-Policy"] = _CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response

    def page(render: Callable[[ViewState, dict[str, str]], tuple[int, str]]) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            query = dict(request.query)
            status, body = await asyncio.to_thread(render, state, query)
            return web.Response(text=body, status=status, content_type="text/html")

        return handle

    async def version(request: web.Request) -> web.Response:
        kept = state.kept_page()
        if kept is not None:  # the index is being built: what the kept page was rendered from
            return web.json_response(
                {
                    "version": kept["version"],
                    "built_at": None,
                    "solutions": kept["solutions"],
                    "grades": kept["grades"],
                }
            )
        index = await asyncio.to_thread(lambda: state.index)
        return web.json_response(
            {
                "version": index.version,
                "built_at": index.built_at,
                "solutions": index.cells.answers,
                "grades": index.cells.grades.num_rows,
            }
        )

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _STATIC:
            raise web.HTTPNotFound()
        data = resources.files("itemeval.view").joinpath("static", name).read_bytes()
        return web.Response(body=data, content_type=_STATIC[name])

    app = web.Application(middlewares=[guard])
    app.router.add_get("/", page(pages.overview_page))
    app.router.add_get("/items", page(pages.items_page))
    app.router.add_get("/item", page(pages.item_page))
    app.router.add_get("/compare", page(pages.compare_page))
    app.router.add_get("/api/version", version)
    app.router.add_get("/static/{name}", static)
    return app


def _hostname(host: str | None) -> str:
    if not host:
        return ""
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class ViewServer:
    """The viewer over one plan's store, on its own event loop thread (`start`/`stop`), or in
    the foreground until interrupted (`serve`)."""

    def __init__(
        self, plan: Plan, options: ViewOptions | None = None, state: ViewState | None = None
    ) -> None:
        self.options = options or ViewOptions()
        token = self.options.token
        if token is None and not self.options.local:
            token = secrets.token_urlsafe(18)
        self.token = token
        self._owns_state = state is None  # another server's state is shared, not stopped
        self.state = state or ViewState(plan, self.options.refresh_s)
        self.port = self.options.port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.load_seconds = 0.0

    @property
    def url(self) -> str:
        host = self.options.host
        shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
        base = f"http://{shown}:{self.port}/"
        return base + (f"?token={self.token}" if self.token else "")

    def start(self) -> str:
        """Listen, read the store, serve from a background thread; the URL to open. A port
        that is taken fails at once, before the store is read."""
        sock = socket.socket(
            socket.AF_INET6 if ":" in self.options.host else socket.AF_INET, socket.SOCK_STREAM
        )
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.options.host.strip("[]"), self.options.port))
        except OSError as exc:
            sock.close()
            raise InputError(
                Problem(
                    f"cannot listen on {self.options.host}:{self.options.port} ({exc.strerror})",
                    field="--port",
                    hint="choose another port (--port 0 picks a free one) or --host",
                )
            ) from exc
        self.port = sock.getsockname()[1]
        started = time.monotonic()
        if not self.state.loaded:
            use_system_arrow_pool()  # the index's intermediates go back to the system
            try:
                self.state.load()
            except BaseException:
                sock.close()
                raise
        self.load_seconds = time.monotonic() - started
        if self.state.plan.store.root.is_local:  # the first item page need not wait for it
            threading.Thread(target=importlib.import_module, args=("duckdb",), daemon=True).start()
        ready = threading.Event()
        app = make_app(self.state, self.token, local=self.options.local)

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(runner.setup())
            loop.run_until_complete(web.SockSite(runner, sock).start())
            self._runner = runner
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name="itemeval-view-http", daemon=True)
        self._thread.start()
        ready.wait(30)
        self.state.start()
        return self.url

    def stop(self) -> None:
        if self._owns_state:
            self.state.stop()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def serve(self, announce: Callable[[str], object] | None = None) -> None:
        """Serve until interrupted (Ctrl-C), opening the browser unless told not to."""
        announce = announce or (lambda text: print(text, flush=True))
        url = self.start()
        announce(f"Viewing {self.state.plan.study.study} at {url}  (Ctrl-C to stop)")
        if self.options.open_browser:
            webbrowser.open(url)
        try:
            while self._thread is not None and self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()
