"""Helpers of the batch-tier tests: `itemeval sim-server` as a subprocess (its own counts are the
physical truth), small studies whose endpoint has `batch.enabled`, a proxy that loses or holds
the answer to a batch create (the provider boundary), and store readers without dedup."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml
from aiohttp import ClientSession, web

from itemeval.store import StudyStore

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / "configs" / "datasets"
CREATE_PATHS = ("/v1/batches", "/v1/messages/batches")


class SimServer:
    """`python -m itemeval.cli.sim --port 0 ARGS` on 127.0.0.1."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "itemeval.cli.sim", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=REPO,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.stop()
            raise RuntimeError(f"sim-server did not start: {line!r}")
        self.url = line.split("listening on", 1)[1].strip()

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/_sim/stats", timeout=10) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@contextlib.contextmanager
def sim_server(*args: str) -> Iterator[SimServer]:
    server = SimServer(*args)
    try:
        yield server
    finally:
        server.stop()


def base_url(url: str, wire: str) -> str:
    """The endpoint's base_url for a wire (OpenAI's includes /v1)."""
    return f"{url}/v1" if wire == "openai" else url


def write_study(
    folder: Path,
    url: str,
    *,
    wire: str = "openai",
    items: int = 5,
    epochs: int = 1,
    judge: bool = False,
    batch: dict[str, Any] | None = None,
    judge_batch: bool = True,
    **overrides: Any,
) -> Path:
    """A small study over the arithmetic sample: sim/strong, the direct prompt; with `judge`, a
    judge (sim/judge) on its own endpoint (batched too unless `judge_batch` is False). Runs
    leave their fragments as written (`runtime.compact: false`): the tests read the rows they
    wrote, duplicates included."""
    tier = {"enabled": True, "poll_interval_s": 0.1} | (batch or {})
    endpoint: dict[str, Any] = {"kind": "sim", "base_url": base_url(url, wire), "batch": tier}
    if wire != "openai":
        endpoint["sim"] = {"wire_format": wire}
    judge_endpoint = copy.deepcopy(endpoint)
    if not judge_batch:
        judge_endpoint.pop("batch")
    study: dict[str, Any] = {
        "study": "batch-tier",
        "store": str(folder / "store"),
        "datasets": [{"name": "arithmetic", "path": str(DATASETS / "arithmetic")}],
        "endpoints": {"sim": endpoint, "judges": judge_endpoint},
        "models": [{"id": "sim/strong", "endpoint": "sim"}],
        "facets": {
            "prompt": ["builtin:direct"],
            "replications": epochs,
            "grader": ["judge"] if judge else [],
        },
        "budget": {"policy": "dev", "dev_items": items},
        "cache": {"enabled": True, "location": str(folder / "cache")},
        "runtime": {"compact": False},
    }
    if judge:
        study["graders"] = {
            "judge": {"model": "sim/judge", "endpoint": "judges", "max_tokens": 200}
        }
    for key, value in overrides.items():
        node = study
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def rows(store_url: str, stage: str = "solutions", columns: list[str] | None = None) -> pa.Table:
    """Physical rows, without deduplication."""
    wanted = columns or ["item_id", "epoch", "status", "tier", "cached", "usd"]
    return StudyStore.open(store_url).read(stage, columns=wanted, dedup=False)


def batch_states(store_url: str) -> list[dict[str, Any]]:
    folder = Path(store_url) / "batches"
    if not folder.exists():
        return []
    states = []
    for folder_ in sorted(folder.iterdir()):
        state = folder_ / "state.json"
        if state.exists():  # a record being prepared has its cells first, its state last
            states.append(json.loads(state.read_text()))
    return states


def run_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "itemeval", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


class CreateProxy:
    """A reverse proxy in front of the sim-server that passes everything through, except the
    answer to a batch create (`POST /v1/batches`, `POST /v1/messages/batches`) when told:

    * `drop`: the create reaches the server, its answer is lost (the connection is closed);
    * `hold`: the create reaches the server, its answer waits until `release()` (a driver can
      be killed meanwhile: the batch exists, the driver never learned its id).
    """

    def __init__(self, upstream: str, mode: str = "pass"):
        self.upstream = upstream
        self.mode = mode
        self.creates = 0  # creates that reached the server
        self.held = threading.Event()
        self._release: asyncio.Event | None = None
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()
        self._started.wait(10)
        self.url = f"http://127.0.0.1:{self._port}"

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._started.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        self._release = asyncio.Event()
        self._session = ClientSession()
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("host", "content-length", "transfer-encoding")
        }
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            data=body,
            headers=headers,
        ) as upstream:
            payload = await upstream.read()
            status = upstream.status
            content_type = upstream.headers.get("Content-Type", "application/json")
        is_create = request.method == "POST" and request.path in CREATE_PATHS
        if is_create:
            self.creates += 1
            if self.mode == "drop":
                self.mode = "pass"  # the next create goes through
                assert request.transport is not None
                request.transport.close()
                raise ConnectionResetError("answer lost on purpose")
            if self.mode == "hold":
                self.held.set()
                assert self._release is not None
                await self._release.wait()
        response = web.Response(body=payload, status=status)
        response.headers["Content-Type"] = content_type
        return response

    def release(self) -> None:
        self.mode = "pass"
        assert self._release is not None
        self._loop.call_soon_threadsafe(self._release.set)

    def close(self) -> None:
        async def stop() -> None:
            await self._session.close()
            await self._runner.cleanup()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@contextlib.contextmanager
def create_proxy(upstream: str, mode: str = "pass") -> Iterator[CreateProxy]:
    proxy = CreateProxy(upstream, mode)
    try:
        yield proxy
    finally:
        proxy.close()
