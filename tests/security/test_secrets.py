"""Secrets never leave the environment: a run with a canary API key leaves no trace of it in
anything the project writes (store, manifests, cache, exports, report, logs, Ray's logs), even
when the provider echoes the key back; error messages and reprs never show one; and nothing
read from a dataset, a store or a provider is ever unpickled or evaluated."""

from __future__ import annotations

import ast
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from runtime_files import DATASETS, sim_server

from itemeval.cli.main import main
from itemeval.config import load_study
from itemeval.secrets import Secret, read_key

REPO = Path(__file__).resolve().parents[2]
CANARY = "sk-canary-" + secrets.token_hex(12)


def _study(folder: Path, base_url: str, key_env: str) -> Path:
    data = {
        "study": "canary",
        "store": str(folder / "store"),
        "datasets": [{"name": "science-mc", "path": str(DATASETS / "science-mc")}],
        "endpoints": {
            "hosted": {
                "kind": "openai",
                "base_url": base_url,
                "api_key_env": key_env,
                "headers_env": {"X-Org-Token": key_env},
                "max_attempts": 2,
                "backoff_initial_s": 0.05,
            }
        },
        "models": [{"id": "sim/strong", "endpoint": "hosted"}],
        "facets": {"grader": ["judge"]},
        "graders": {"judge": {"model": "sim/judge", "endpoint": "hosted"}},
        "budget": {"policy": "dev", "dev_items": 6},
        "cache": {"location": str(folder / "cache")},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _files_with(root: Path, needle: bytes) -> list[str]:
    found = []
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            try:
                if needle in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


def _run(args: list[str], env: dict[str, str], log: Path) -> int:
    with open(log, "ab") as out:
        return subprocess.run(
            [sys.executable, "-m", "itemeval", *args], env=env, stdout=out, stderr=out, timeout=600
        ).returncode


@pytest.mark.ray
@pytest.mark.slow
def test_a_canary_key_leaves_no_trace(tmp_path):
    env = {**os.environ, "ITEMEVAL_TEST_CANARY": CANARY}
    env.pop("RAY_ADDRESS", None)
    log = tmp_path / "commands.log"
    ray_root = Path("/tmp/ray")
    sessions_before = set(ray_root.glob("session_2*")) if ray_root.exists() else set()
    with sim_server("--latency-ms", "2", "--judge-malformed-rate", "0.2") as url:
        path = _study(tmp_path, url, "ITEMEVAL_TEST_CANARY")
        assert _run(["run", str(path), "--yes"], env, log) in (0, 1)  # local Ray
    assert _run(["status", str(path), "--json"], env, log) == 0
    assert _run(["export", str(path), "--out", str(tmp_path / "exports")], env, log) == 0
    assert _run(["report", str(path), "--out", str(tmp_path / "report")], env, log) == 0
    assert (tmp_path / "store" / "manifests").is_dir() and any((tmp_path / "exports").iterdir())
    assert _files_with(tmp_path, CANARY.encode()) == []
    assert _files_with(tmp_path, CANARY[-12:].encode()) == []  # not even a tail of it
    new_sessions = (
        set(ray_root.glob("session_2*")) - sessions_before if ray_root.exists() else set()
    )
    for session in new_sessions:
        assert _files_with(session, CANARY.encode()) == [], f"Ray logs of {session}"


@contextmanager
def echoing_provider() -> Iterator[str]:
    """A provider that rejects every call with a 401 whose message echoes the key it was sent,
    as real providers do ("Incorrect API key provided: sk-...")."""
    import asyncio

    from aiohttp import web

    async def reject(request: web.Request) -> web.Response:
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        body = {
            "error": {
                "message": f"Incorrect API key provided: {key}. Org token "
                f"{request.headers.get('X-Org-Token')} is not valid.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        }
        return web.json_response(body, status=401)

    loop = asyncio.new_event_loop()
    holder: dict = {}

    async def start() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", reject)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        holder["runner"] = runner
        holder["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield f"http://127.0.0.1:{holder['port']}/v1"
    finally:
        asyncio.run_coroutine_threadsafe(holder["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def test_a_provider_echoing_the_key_is_redacted(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ITEMEVAL_TEST_CANARY", CANARY)
    with echoing_provider() as url:
        path = _study(tmp_path, url, "ITEMEVAL_TEST_CANARY")
        code = main(["generate", str(path), "--yes", "--no-ray"])
    out = capsys.readouterr()
    assert code == 1  # every cell ended in an auth error
    assert "auth" in out.out
    assert CANARY not in out.out + out.err
    assert _files_with(tmp_path, CANARY.encode()) == []
    from itemeval.store import StudyStore

    rows = StudyStore.open(str(tmp_path / "store")).read("solutions")
    messages = rows.column("error_message").to_pylist()
    assert set(rows.column("error_code").to_pylist()) == {"auth"}
    assert all("Incorrect API key provided: ***" in m for m in messages)


def test_reprs_and_errors_never_show_a_key(tmp_path, monkeypatch):
    monkeypatch.setenv("ITEMEVAL_TEST_CANARY", CANARY)
    secret = read_key("ITEMEVAL_TEST_CANARY")
    assert isinstance(secret, Secret)
    for text in (repr(secret), str(secret), f"{secret}", f"{secret!r}"):
        assert CANARY not in text
    with pytest.raises(TypeError):
        __import__("pickle").dumps(secret)
    study = load_study(_study(tmp_path, "http://127.0.0.1:9/v1", "ITEMEVAL_TEST_CANARY"))
    for text in (repr(study), str(study), study.model_dump_json()):
        assert CANARY not in text
    # a key pasted into plain headers is refused, and the error does not repeat it
    data = yaml.safe_load((tmp_path / "study.yaml").read_text())
    data["endpoints"]["hosted"]["headers"] = {"Authorization": f"Bearer {CANARY}"}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(Exception) as info:
        load_study(tmp_path / "study.yaml")
    assert getattr(info.value, "exit_code", None) == 2
    assert CANARY not in str(info.value)


UNSAFE_CALLS = {
    ("pickle", "load"),
    ("pickle", "loads"),
    ("cloudpickle", "load"),
    ("cloudpickle", "loads"),
    ("marshal", "load"),
    ("marshal", "loads"),
    ("yaml", "load"),
    ("yaml", "unsafe_load"),
    ("yaml", "full_load"),
    ("shelve", "open"),
    ("dill", "loads"),
}
#: PyYAML's loaders that build any Python object: only SafeLoader and CSafeLoader may be used.
UNSAFE_YAML_LOADERS = {"Loader", "UnsafeLoader", "FullLoader", "CLoader", "CUnsafeLoader"}
UNSAFE_YAML_LOADERS |= {"CFullLoader"}


def test_nothing_read_is_unpickled_or_evaluated():
    offences = []
    for path in sorted((REPO / "itemeval").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id in ("eval", "exec", "compile"):
                    offences.append(f"{path}:{node.lineno} {func.id}()")
                if (
                    isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Name)
                    and (func.value.id, func.attr) in UNSAFE_CALLS
                ):
                    offences.append(f"{path}:{node.lineno} {func.value.id}.{func.attr}()")
                if isinstance(func, ast.Attribute) and func.attr == "read_pickle":
                    offences.append(f"{path}:{node.lineno} read_pickle()")
            if (
                isinstance(node, ast.Attribute)
                and node.attr in UNSAFE_YAML_LOADERS
                and ast.unparse(node) != "importlib.abc.Loader"  # the import system's, not YAML's
            ):
                offences.append(f"{path}:{node.lineno} {node.attr}")  # any use, not only calls
            if isinstance(node, ast.Constant) and node.value in UNSAFE_YAML_LOADERS:
                offences.append(f"{path}:{node.lineno} {node.value!r}")  # getattr(yaml, ...)
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names]
                module = getattr(node, "module", None) or ""
                if {"pickle", "marshal", "shelve", "dill"} & {*names, module}:
                    offences.append(f"{path}:{node.lineno} imports {module or names}")
    assert offences == []
