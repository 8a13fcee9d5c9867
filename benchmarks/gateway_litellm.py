"""itemeval's OpenAI-compatible and Anthropic clients through a real LiteLLM proxy.

    .venv/bin/python benchmarks/gateway_litellm.py --litellm /path/to/venv/bin/litellm
    .venv/bin/python benchmarks/gateway_litellm.py --proxy-rpm 60 --declared-rpm 50 --items 40

LiteLLM's proxy (`litellm[proxy]`: about 120 packages and 750 MB, so not one of itemeval's own
dependencies; install it into a venv of its own, `python -m venv /tmp/litellm && /tmp/litellm/
bin/pip install "litellm[proxy]"`) is started on 127.0.0.1 with one model per wire format, each
routed to `itemeval sim-server`'s route of that format and limited to `--proxy-rpm` requests a
minute (the deployment's `rpm`: LiteLLM's router refuses with a 429 beyond it, without a
Retry-After, in calendar minutes). Then `itemeval generate` runs a study with two endpoints on
the proxy, `kind: openai` (`/v1/chat/completions`) and `kind: anthropic` (`/v1/messages`),
`--items` items each, twice: declaring no limit (the rate is found from the 429s), and declaring
`--declared-rpm` (below the proxy's). For each it prints the cells answered, the proxy's 429s
the calls saw (attempts beyond the first), the wall time and the exit code. Without a `litellm`
executable it says so and exits 0 (nothing measured). Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "benchmarks"), str(REPO / "tests" / "runtime"), str(REPO / "tests")]

from runtime_files import write_items, write_study  # noqa: E402
from sim_server import sim_server  # noqa: E402

KEY = "sk-itemeval-bench"  # the proxy's master key (a local test key, passed by environment)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _proxy_config(path: Path, sim_url: str, rpm: int) -> None:
    # Each wire format to the sim-server's route of the same format (LiteLLM sends an
    # Anthropic-format request for an OpenAI model to the Responses API, which the sim-server
    # does not serve).
    config = {
        "model_list": [
            {
                "model_name": "gw-openai",
                "litellm_params": {
                    "model": "openai/sim/strong",
                    "api_base": f"{sim_url}/v1",
                    "api_key": "none",
                    "rpm": rpm,
                },
            },
            {
                "model_name": "gw-anthropic",
                "litellm_params": {
                    "model": "anthropic/sim/strong",
                    "api_base": sim_url,
                    "api_key": "none",
                    "rpm": rpm,
                },
            },
        ],
        "litellm_settings": {"drop_params": True, "num_retries": 0},
        "router_settings": {"enable_pre_call_checks": True},
        "general_settings": {"master_key": f"os.environ/{'LITELLM_MASTER_KEY'}"},
    }
    path.write_text(yaml.safe_dump(config))


def _start_proxy(litellm: str, config: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LITELLM_MASTER_KEY": KEY, "LITELLM_TELEMETRY": "False"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [litellm, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"litellm exited {proc.returncode}; see {log}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health/liveliness", timeout=2)
            return proc
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError(f"litellm did not answer within 180 s; see {log}")


def _study(folder: Path, items: Path, proxy: str, declared_rpm: int | None) -> Path:
    limit = {"requests_per_minute": declared_rpm} if declared_rpm else {}
    common = {"api_key_env": "LITELLM_BENCH_KEY", "max_concurrency": 8, **limit}
    return write_study(
        folder,
        study=folder.name,
        datasets=[{"name": "sums", "path": str(items)}],
        endpoints={
            "gw_openai": {"kind": "openai", "base_url": f"{proxy}/v1", **common},
            "gw_anthropic": {"kind": "anthropic", "base_url": proxy, **common},
        },
        models=[
            {"id": "gw-openai", "endpoint": "gw_openai", "params": {"max_tokens": 32}},
            {"id": "gw-anthropic", "endpoint": "gw_anthropic", "params": {"max_tokens": 32}},
        ],
        **{
            "facets.prompt": ["builtin:direct"],
            "facets.replications": 1,
            "facets.grader": [],
            "graders": {},
            "budget.policy": "full",
            "cache.location": str(folder / "cache"),
        },
    )


def _rows(store_url: str) -> tuple[int, int, int]:
    from itemeval.store import StudyStore

    rows = (
        StudyStore.open(store_url)
        .read("solutions", columns=["status", "attempts"], dedup=False)
        .to_pydict()
    )
    answered = sum(1 for status in rows["status"] if status == "ok")
    retried = sum(max(0, (a or 1) - 1) for a in rows["attempts"])
    return answered, len(rows["status"]), retried


def run_case(root: Path, proxy: str, items: Path, declared_rpm: int | None) -> dict:
    from itemeval.config import load_study

    name = f"declared-{declared_rpm}" if declared_rpm else "undeclared"
    path = _study(root / name, items, proxy, declared_rpm)
    env = {**os.environ, "LITELLM_BENCH_KEY": KEY, "ITEMEVAL_LIMITS_DIR": str(root / "limits")}
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "itemeval", "generate", str(path), "--yes", "--quiet", "--no-ray"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    took = time.monotonic() - started
    answered, rows, retried = _rows(str(load_study(path).store_url))
    print(
        f"{name:<12} cells answered {answered} of {rows} rows, 429s and other retries seen "
        f"{retried}, {took:.0f} s, exit {run.returncode}",
        flush=True,
    )
    if run.returncode:
        print(run.stderr[-1500:], flush=True)
    return {"case": name, "answered": answered, "retried": retried, "s": took}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--litellm", default=shutil.which("litellm"), help="litellm executable")
    parser.add_argument("--proxy-rpm", type=int, default=60)
    parser.add_argument("--declared-rpm", type=int, default=50)
    parser.add_argument("--items", type=int, default=40, help="items per endpoint")
    args = parser.parse_args()
    if not args.litellm or not Path(args.litellm).exists():
        print("skipped: no `litellm` executable (pass --litellm PATH; see the docstring)")
        return 0
    print(os.getloadavg(), "load (1, 5, 15 min)", flush=True)
    with tempfile.TemporaryDirectory(prefix="itemeval-gateway-") as tmp:
        root = Path(tmp)
        items = write_items(root / "items" / "sums", args.items)
        with sim_server("--latency-ms", "50") as sim_url:
            config = root / "litellm.yaml"
            _proxy_config(config, sim_url.removesuffix("/v1"), args.proxy_rpm)
            port = _free_port()
            proxy_proc = _start_proxy(args.litellm, config, port, root / "litellm.log")
            proxy = f"http://127.0.0.1:{port}"
            try:
                print(
                    f"LiteLLM proxy at {proxy}, rpm {args.proxy_rpm} per model, routing to "
                    f"{sim_url}; {args.items} items per endpoint (openai and anthropic wires)",
                    flush=True,
                )
                for declared in (None, args.declared_rpm):
                    run_case(root, proxy, items, declared)
            finally:
                proxy_proc.terminate()
                try:
                    proxy_proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proxy_proc.kill()
    print(os.getloadavg(), "load (1, 5, 15 min)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
