"""`itemeval demo`: the demo study on local Ray against `itemeval sim-server`, then a leaderboard.

It starts the simulated provider as a real HTTP server on 127.0.0.1 (with a little latency, the
odd 500 and a few malformed judge answers, so retries and parse-failure accounting show up; no
random 429s, which would make the shared limiter back off as a real 429 storm should), runs
`configs/demo.yaml` exactly as `itemeval run` would, and prints the leaderboard and where the
results are. Run again, it finds nothing left to do.

Outside a checkout (no `configs/demo.yaml` under the working directory) it runs the copy the
package carries, `itemeval/_demo/` (the study and its four datasets; `tests/core/test_packaging.py`
holds the copy equal to `configs/`), so an installed wheel runs the demo anywhere. The store goes
under the working directory either way (`./studies/demo`).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from itemeval.api import Study
from itemeval.cli.options import print_json
from itemeval.errors import ConfigError, Problem

if TYPE_CHECKING:
    from itemeval.config import StudyConfig

DEFAULT_STUDY = "configs/demo.yaml"
SERVER_FLAGS = (
    "--latency-ms", "30",
    "--latency-distribution", "lognormal",
    "--latency-spread", "0.4",
    "--fault-500", "0.005",
    "--judge-malformed-rate", "0.02",
)  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    demo = subparsers.add_parser(
        "demo",
        help="run the demo study on local Ray against itemeval sim-server; print a leaderboard",
    )
    demo.add_argument(
        "study",
        nargs="?",
        default=None,
        help=f"default {DEFAULT_STUDY}, or the demo the package carries when there is none here",
    )
    demo.add_argument("--no-ray", action="store_true", help="run in this process, without Ray")
    demo.add_argument("--quiet", action="store_true", help="no progress output")
    demo.add_argument("--json", action="store_true", help="the run outcome as JSON")
    demo.set_defaults(func=cmd_demo)


def packaged_study() -> Path:
    """The demo study the package carries (installed wheels have no `configs/`)."""
    return Path(str(resources.files("itemeval").joinpath("_demo", "demo.yaml")))


def cmd_demo(args: argparse.Namespace) -> int:
    if args.study is None:
        here = Path(DEFAULT_STUDY)
        args.study = str(here if here.is_file() else packaged_study())
    if not Path(args.study).is_file():
        raise ConfigError(
            Problem(
                "demo study not found",
                file=args.study,
                hint="pass a study file, or run `itemeval demo` alone for the demo study",
            )
        )
    config = Study.from_yaml(args.study).config
    with _sim_servers(config) as config:
        study = Study(config)
        quiet = args.quiet or args.json
        outcome = study.run(yes=True, in_process=args.no_ray, quiet=quiet, argv=[])
    if args.json:
        print_json(outcome.to_json())
        return int(outcome.exit_code)
    print()
    print(outcome.message)
    print()
    print(study.leaderboard())
    print()
    print(f"Results: {outcome.store}")
    print(f"Next:    itemeval status {args.study}")
    print(f"         itemeval report {args.study}    (HTML and Markdown report)")
    print(f"         itemeval export {args.study}    (long table, Every Eval Ever records)")
    return int(outcome.exit_code)


@contextmanager
def _sim_servers(study: StudyConfig) -> Iterator[StudyConfig]:
    """Start one sim-server per sim endpoint that names a base_url; yield the study pointing
    at them (a busy port is replaced by a free one)."""
    endpoints = dict(study.endpoints)
    servers: list[subprocess.Popen[str]] = []
    try:
        for name, endpoint in study.endpoints.items():
            if endpoint.kind != "sim" or endpoint.base_url is None:
                continue
            wanted = urlsplit(endpoint.base_url).port or 0
            port = wanted if wanted and _port_free(wanted) else 0
            server, url = _start_server(port)
            servers.append(server)
            endpoints[name] = endpoint.model_copy(update={"base_url": url})
        yield study.model_copy(update={"endpoints": endpoints})
    finally:
        for server in servers:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()


def _start_server(port: int) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "itemeval.cli.sim", "--port", str(port), *SERVER_FLAGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if "listening on" not in line:
        server.kill()
        raise ConfigError(Problem(f"itemeval sim-server did not start ({line.strip()!r})"))
    return server, line.split("listening on", 1)[1].strip() + "/v1"


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
