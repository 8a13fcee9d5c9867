"""Is anything listening? One TCP connection to each endpoint a run needs, before it dispatches.

A run against an endpoint that is not there would otherwise retry every cell (`connection_error`,
`max_attempts` times each, with backoff) for minutes before saying anything. `EndpointProbe`
opens one TCP connection to each distinct host and port, all at once in daemon threads, as soon
as the run starts; the driver asks for the verdict just before dispatch. Only two answers are
certain enough to stop a run: the connection was refused (nothing listens on that port) or the
host name does not resolve. A timeout, a slow handshake or any other error lets the run go on and
its calls retry as before; so does an endpoint that goes away after the probe.

What is probed: the built-in wire formats (`openai`, `anthropic`, `gemini`, and `sim` over HTTP),
live or through the batch tier (batches are submitted to the same URL). Not probed: the in-process
simulator (nothing to reach); provider plugins, whose transport is their own (a plugin may not
send anything to its `base_url`, or reach it through an SDK or a proxy); and, on a Ray cluster,
loopback URLs, which name each node's own server (a vLLM beside every worker), not the driver's.

Cost: a refused loopback connection answers in well under a millisecond and a hosted API's
handshake in one round trip; the threads run while the run plans, so the verdict is usually
ready when it is asked for. Nothing is sent over the connection (no HTTP request, no key).
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from itemeval.errors import ConfigError, Problem
from itemeval.providers._settings import EndpointSettings

#: The longest the driver waits for a verdict, counted from the probe's start; a connection
#: still pending then counts as reachable (a slow network is the retries' business).
PROBE_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class Unreachable:
    """An endpoint that is certainly not there, and why."""

    name: str
    url: str
    reason: str


def probed(settings: EndpointSettings, *, on_cluster: bool = False) -> bool:
    """True when a run checks that `settings`' endpoint is there (see the module doc)."""
    if settings.in_process or settings.is_plugin or not settings.url:
        return False
    return not (on_cluster and settings.is_loopback)


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname or "", port


class EndpointProbe:
    """One TCP connect per distinct (host, port) of `endpoints`, started at construction
    (`on_cluster`: the run's workers are on a Ray cluster, whose loopback is not this one)."""

    def __init__(
        self,
        endpoints: dict[str, EndpointSettings],
        *,
        on_cluster: bool = False,
        wait_s: float = PROBE_WAIT_S,
    ):
        self._endpoints = {
            name: s for name, s in endpoints.items() if probed(s, on_cluster=on_cluster)
        }
        self._started = time.monotonic()
        self._results: dict[tuple[str, int], str | None] = {}
        self._threads: dict[tuple[str, int], threading.Thread] = {}
        self._wait_s = wait_s
        for settings in self._endpoints.values():
            address = _address(settings.url)
            if address in self._threads:
                continue
            timeout = min(settings.connect_timeout_s, wait_s)
            thread = threading.Thread(
                target=self._connect, args=(address, timeout), daemon=True, name="endpoint-probe"
            )
            self._threads[address] = thread
            thread.start()

    def _connect(self, address: tuple[str, int], timeout: float) -> None:
        host, port = address
        reason: str | None = None
        try:
            socket.create_connection(address, timeout=timeout).close()
        except socket.gaierror as exc:
            reason = f"the host name {host!r} does not resolve ({exc.strerror or exc})"
        except ConnectionRefusedError:
            reason = f"nothing is listening on {host}:{port} (connection refused)"
        except OSError:
            reason = None  # a timeout or a network error: not certain; the retries decide
        self._results[address] = reason

    def unreachable(self, names: set[str] | None = None) -> list[Unreachable]:
        """The endpoints among `names` (default: all probed) that are certainly not there;
        waits for the probe at most until `wait_s` after it started."""
        chosen = {n: s for n, s in self._endpoints.items() if names is None or n in names}
        found: list[Unreachable] = []
        for name, settings in sorted(chosen.items()):
            address = _address(settings.url)
            left = self._wait_s - (time.monotonic() - self._started)
            self._threads[address].join(max(left, 0.0))
            reason = self._results.get(address)
            if reason is not None:
                found.append(Unreachable(name, settings.url, reason))
        return found

    def check(self, names: set[str] | None = None, study_file: str | None = None) -> None:
        """Raise `ConfigError` (exit 2) naming every endpoint among `names` that is not there,
        its URL, and for an `itemeval sim-server` endpoint the command that starts one."""
        problems = [
            Problem(
                f"endpoint {u.name!r} at {u.url} is not reachable: {u.reason}",
                file=study_file,
                field=f"endpoints.{u.name}.base_url",
                hint=_hint(self._endpoints[u.name]),
            )
            for u in self.unreachable(names)
        ]
        if problems:
            raise ConfigError(problems)


def _hint(settings: EndpointSettings) -> str:
    if settings.kind == "sim":
        host, port = _address(settings.url)
        command = f"itemeval sim-server --port {port}"
        if host not in ("127.0.0.1", "localhost"):
            command += f" (on {host})"
        return (
            f"start the simulated provider first: `{command}` (`itemeval demo` starts one "
            "for configs/demo.yaml), or drop base_url to use the in-process simulator; "
            "nothing was sent or written"
        )
    return (
        "start the server, or correct base_url (and check the network or VPN it needs); "
        "nothing was sent or written"
    )
