"""A plugin package, installed with pip into this environment, serves a study on local Ray: its
scorer (entry point `itemeval.scorers`) grades and its provider (entry point
`itemeval.providers`, a client of a gateway with its own HTTP API) answers, inside the Ray
worker processes, with the endpoint's concurrency limit and retries holding.

The Ray workers of the session may have started before the install. A regular (non-editable)
install puts the package and its metadata into site-packages, a folder already on every
worker's `sys.path`; Python's import system and `importlib.metadata` notice a new entry there
(their caches follow the folder's modification time), so running workers import the plugin
and find its entry points. (An editable install would add a `.pth` line, which only processes
started afterwards read.) The package is uninstalled afterwards.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pyarrow.compute as pc
import pytest
from aiohttp import web
from plugin_files import sim_server, sim_stats, write_study, write_wheel

import itemeval
from itemeval import plugins
from itemeval.store import StudyStore

pytestmark = pytest.mark.ray

DISTRIBUTION = "itemeval-test-plugin"
PACKAGE = "itemeval_test_plugin"

ENTRY_POINTS = {
    "itemeval.scorers": {"unit_match": f"{PACKAGE}.scorers:unit_match"},
    "itemeval.providers": {"test-gateway": f"{PACKAGE}.gateway:GatewayProvider"},
}

SCORERS = '''
"""A unit-aware numeric match: "15 apples", "15.0" and "$15" all match the target 15."""

import os
import re

import itemeval
from itemeval.scoring import answer_span

NUMBER = re.compile(r"-?\\d+(?:\\.\\d+)?")
MARKER = {marker!r}


@itemeval.scorer(version="1")
def unit_match(text, target, modality):
    with open(MARKER, "a") as handle:  # which process scored: the test checks it is a worker
        handle.write(f"{{os.getpid()}}\\n")
    found = NUMBER.findall(answer_span(text).replace(",", ""))
    wanted = NUMBER.findall(target.replace(",", ""))
    if not found or not wanted:
        return itemeval.Score(0.0, False, found[-1] if found else None)
    ok = abs(float(found[-1]) - float(wanted[-1])) < 1e-9
    return itemeval.Score(float(ok), ok, found[-1])
'''

GATEWAY = '''
"""A client of an internal gateway with its own HTTP API (`POST {base_url}/complete`)."""

import os

from itemeval.providers import HttpProvider, ModelResult, Usage
from itemeval.errors import MalformedBody


class GatewayProvider(HttpProvider):
    wire_name = "test gateway"
    request_id_header = "x-gateway-request"

    def url_for(self, request):
        return f"{self.base_url}/complete"

    def build_body(self, request):
        return {
            "route": self.settings.options["route"],
            "model": request.model,
            "turns": [[m["role"], m["content"]] for m in request.messages],
            # The output bound the budget cap reserves for: the request's max_tokens.
            "limit": request.params.max_tokens,
            "client_pid": os.getpid(),
        }

    def parse_success(self, body, request_id):
        if not isinstance(body, dict) or "output" not in body:
            raise MalformedBody("no `output`")
        tokens = body["tokens"]
        return ModelResult(
            ok=True,
            text=body["output"],
            finish_reason=body.get("stop"),
            usage=Usage(input_tokens=tokens["in"], output_tokens=tokens["out"]),
            request_id=request_id,
        )

    def parse_error(self, body):
        return "", "", str(body.get("error", "")) if isinstance(body, dict) else ""
'''


class Gateway:
    """The gateway: its own API in front of `itemeval sim-server` (in a thread of this
    process), counting what it saw: requests, the most in flight, the clients' pids."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.client_pids: set[int] = set()
        self.routes: set[str] = set()
        self.url = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Gateway:
        self._thread.start()
        assert self._ready.wait(30), "gateway did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_post("/complete", self._complete)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as self._session:
            self._ready.set()
            await self._stop.wait()
        await runner.cleanup()

    async def _complete(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.client_pids.add(body["client_pid"])
        self.routes.add(body["route"])
        try:
            upstream = {
                "model": body["model"],
                "messages": [{"role": r, "content": c} for r, c in body["turns"]],
                "max_tokens": body["limit"],
            }
            async with self._session.post(
                f"{self.upstream}/v1/chat/completions", json=upstream
            ) as answer:
                data = await answer.json()
                if answer.status != 200:
                    headers = {
                        k: v for k, v in answer.headers.items() if k.lower().startswith("retry")
                    }
                    message = data.get("error", {}).get("message", "")
                    return web.json_response(
                        {"error": message}, status=answer.status, headers=headers
                    )
            choice = data["choices"][0]
            usage = data["usage"]
            return web.json_response(
                {
                    "output": choice["message"]["content"],
                    "stop": choice["finish_reason"],
                    "tokens": {"in": usage["prompt_tokens"], "out": usage["completion_tokens"]},
                }
            )
        finally:
            self.in_flight -= 1


@pytest.fixture
def installed_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The package as a wheel, pip-installed (not editable) into this environment; yields the
    file its scorer writes its pid to. Uninstalled afterwards."""
    root = tmp_path_factory.mktemp("plugin")
    marker = root / "scored-by.txt"
    files = {
        f"{PACKAGE}/__init__.py": '"""A plugin package for itemeval\'s tests."""\n',
        f"{PACKAGE}/scorers.py": textwrap.dedent(SCORERS.format(marker=str(marker))),
        f"{PACKAGE}/gateway.py": textwrap.dedent(GATEWAY),
    }
    wheel = write_wheel(root, DISTRIBUTION, "0.1.0", files, ENTRY_POINTS)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "--no-index", str(wheel)], check=True, cwd=root)
    importlib.invalidate_caches()
    try:
        yield marker
    finally:
        subprocess.run([*pip, "uninstall", "-y", DISTRIBUTION], check=True, cwd=root)
        importlib.invalidate_caches()
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]
        plugins._loaded.clear()  # the loaded objects of a package that is gone


def _worker_pids() -> set[int]:
    """Start Ray worker processes now (before the install), and say which."""
    import ray

    @ray.remote(num_cpus=1)
    def pid() -> int:
        return os.getpid()

    return set(ray.get([pid.remote() for _ in range(4)]))


def test_an_installed_plugin_scores_and_answers_inside_ray_workers(
    ray_local: None, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert _worker_pids()  # Ray's worker processes exist before the plugin does
    marker = request.getfixturevalue("installed_plugin")
    assert (
        DISTRIBUTION
        in subprocess.run(
            [sys.executable, "-m", "pip", "list", "--format=json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )

    with sim_server("--fault-500", "0.3", "--latency-ms", "20") as root, Gateway(root) as gw:
        path = write_study(
            tmp_path,
            **{
                "endpoints": {
                    "gw": {
                        "kind": "test-gateway",
                        "base_url": gw.url,
                        "options": {"route": "eu-1"},
                        "max_concurrency": 2,
                        "backoff_initial_s": 0.01,
                        "backoff_max_s": 0.05,
                        "max_attempts": 10,
                    }
                },
                "models": [{"id": "sim/strong", "endpoint": "gw", "name": "strong"}],
                "facets.scorer": ["auto", "unit_match"],
                "facets.replications": 2,
                "budget.dev_items": 6,
                "runtime": {"workers": 2, "shard_size": 3},
            },
        )
        study = itemeval.Study.from_yaml(path)
        outcome = study.run(quiet=True)
        stats = sim_stats(root)

    assert outcome.ok, outcome.message
    cells = 2 * 6 * 2  # datasets x items x epochs
    assert outcome.stages["generate"].counts.done == cells
    assert outcome.stages["grade"].counts.done == 2 * cells  # auto and unit_match

    # The provider plugin ran in the Ray workers, through the gateway's own API ...
    assert gw.client_pids and os.getpid() not in gw.client_pids
    assert gw.routes == {"eu-1"}
    # ... within the endpoint's concurrency (the gateway's and the server's own counts) ...
    assert gw.max_in_flight <= 2 and stats["max_concurrent"] <= 2
    # ... and retried the server's 500s until every cell was answered.
    assert stats["faults"].get("server_error", 0) > 0
    assert stats["ok"] == cells and gw.requests == stats["requests"] >= cells
    design = study.design()
    store = StudyStore.open(outcome.store)
    solutions = store.read_solutions(
        [c.id for c in design.generate], columns=["status", "attempts"], dedup=False
    )
    assert solutions.num_rows == cells
    assert pc.all(pc.equal(solutions["status"], "ok")).as_py()
    assert pc.sum(solutions["attempts"]).as_py() == stats["requests"]  # retries included

    # The scorer plugin graded in the workers too, under an id from its name and version.
    scored_by = {int(line) for line in marker.read_text().split()}
    assert scored_by and scored_by <= gw.client_pids  # the same worker actors
    condition = next(c for c in design.scorers if c.scorer == "unit_match")
    assert condition.slug == "unit_match"
    assert condition.payload == {
        "stage": "grade",
        "scorer": f"{PACKAGE}.scorers:unit_match",
        "version": "1",
    }
    grades = store.read_grades([condition.id], columns=["grader", "correct", "extracted"])
    assert grades.num_rows == cells
    assert set(grades["grader"].to_pylist()) == {"unit_match"}
    auto = next(c for c in design.scorers if c.scorer == "auto")
    assert auto.id == "auto--58c489581943"  # built-in ids do not move
    plan_json = json.dumps(study.plan().to_json())
    assert f"{PACKAGE}.scorers:unit_match" in plan_json  # plan --json names the function
