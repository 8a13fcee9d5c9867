"""An endpoint that is not there stops a run before it starts: exit 2 within seconds, naming the
endpoint, its URL and (for `itemeval sim-server`) the command that starts one, with nothing
written. An endpoint that goes away after that check is retried as any failing call is."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from runtime_files import write_study

from itemeval.cli.main import main
from itemeval.providers import EndpointSettings
from itemeval.providers import _reachability as reachability
from itemeval.providers._reachability import EndpointProbe, probed
from itemeval.store import StudyStore

#: Few, quick retries: without the check a run would end (exit 1) in about a second instead of
#: retrying for minutes, so a broken check fails the assertions rather than the time limit.
QUICK = {"max_attempts": 2, "backoff_initial_s": 0.01, "backoff_max_s": 0.02, "timeout_s": 2}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _study(tmp_path: Path, endpoint: dict) -> Path:
    return write_study(
        tmp_path,
        **{
            "endpoints.sim": {**endpoint, **QUICK},
            "budget.dev_items": 2,
            "facets.replications": 1,
            "facets.prompt": ["builtin:direct"],
        },
    )


def _written(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name != "study.yaml")


def test_a_closed_port_exits_2_at_once_naming_the_server_to_start(tmp_path, capsys):
    port = _closed_port()
    path = _study(tmp_path, {"kind": "sim", "base_url": f"http://127.0.0.1:{port}/v1"})
    started = time.monotonic()
    code = main(["run", str(path), "--yes", "--no-ray"])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 2, err
    assert "endpoint 'sim'" in err and f"http://127.0.0.1:{port}/v1" in err, err
    assert "connection refused" in err and f"itemeval sim-server --port {port}" in err, err
    assert "study.yaml" in err and "endpoints.sim.base_url" in err, err
    assert _written(tmp_path) == []  # no store, no cache, no lock: exit 2 wrote nothing
    assert took < 30, took  # planning only, not minutes of retries


def test_an_unresolvable_host_exits_2(tmp_path, capsys, monkeypatch):
    # The resolver is the boundary: the test stays on 127.0.0.1 and asks no DNS server.
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        if host == "gateway.itemeval-test.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setenv("ITEMEVAL_TEST_UNREACHABLE_KEY", "not-a-real-key")
    url = "https://gateway.itemeval-test.invalid/v1"
    endpoint = {"kind": "openai", "base_url": url, "api_key_env": "ITEMEVAL_TEST_UNREACHABLE_KEY"}
    path = _study(tmp_path, endpoint)
    code = main(["generate", str(path), "--yes", "--no-ray"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert url in err and "does not resolve" in err and "correct base_url" in err, err
    assert "sim-server" not in err
    assert _written(tmp_path) == []


def test_an_endpoint_that_goes_away_after_the_check_is_retried(tmp_path, capsys, monkeypatch):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # the kernel completes the probe's handshake; nobody answers after
    port = listener.getsockname()[1]
    check = EndpointProbe.check

    def check_then_go_away(self, *args, **kwargs):
        check(self, *args, **kwargs)
        listener.close()

    monkeypatch.setattr(EndpointProbe, "check", check_then_go_away)
    path = _study(tmp_path, {"kind": "sim", "base_url": f"http://127.0.0.1:{port}/v1"})
    code = main(["generate", str(path), "--yes", "--no-ray"])
    out = capsys.readouterr()
    assert code == 1, out.err  # cells ended in provider errors: run again to retry them
    rows = StudyStore.open(str(tmp_path / "store")).read("solutions")
    assert rows.num_rows > 0
    assert set(rows.column("error_code").to_pylist()) == {"connection_error"}


def test_what_is_probed():
    assert not probed(EndpointSettings(kind="sim"))  # the in-process simulator
    assert probed(EndpointSettings(kind="sim", base_url="http://127.0.0.1:9/v1"))
    assert probed(EndpointSettings(kind="openai", api_key_env="K"))  # api.openai.com:443
    batch = EndpointSettings(kind="openai", api_key_env="K", batch={"enabled": True})
    assert probed(batch)  # batches are submitted to the same URL
    plugin = EndpointSettings(kind="mypkg.gateway:Gateway", base_url="http://127.0.0.1:9/v1")
    assert not probed(plugin)  # a plugin's transport is its own
    loopback = EndpointSettings(kind="openai", base_url="http://127.0.0.1:8000/v1")
    assert not probed(loopback, on_cluster=True)  # each node's own server
    assert probed(loopback, on_cluster=False)


def test_a_pending_connection_counts_as_there(monkeypatch):
    # A handshake that does not finish within the wait is the retries' business, not exit 2.
    def hang(address, timeout=None):
        time.sleep(timeout or 0)
        raise TimeoutError("timed out")

    monkeypatch.setattr(reachability.socket, "create_connection", hang)
    probe = EndpointProbe(
        {"a": EndpointSettings(kind="sim", base_url="http://127.0.0.1:9/v1")}, wait_s=0.2
    )
    started = time.monotonic()
    assert probe.unreachable() == []
    assert time.monotonic() - started < 1.0


def test_the_probe_sends_nothing():
    # The probe only opens and closes a connection: no bytes reach the server.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    probe = EndpointProbe({"a": EndpointSettings(kind="sim", base_url=url)})
    assert probe.unreachable() == []
    conn, _ = listener.accept()
    conn.settimeout(2)
    assert conn.recv(1024) == b""  # closed without a byte
    conn.close()
    listener.close()
