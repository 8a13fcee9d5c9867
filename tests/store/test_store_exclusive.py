"""Exclusive creation (`Location.create_exclusive`) and the probe that guards it.

Runs on local disk, moto and SeaweedFS (an independent S3 implementation); a backend that
ignores or rejects the create condition (s3rver, or moto behind `ConditionProxy`) must be
refused with a `StorageCapabilityError` naming the location, with nothing left behind.
"""

from __future__ import annotations

import errno
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pytest
import s3fs
from botocore.exceptions import ClientError
from fsspec.implementations.memory import MemoryFileSystem
from s3_servers import ConditionProxy, make_bucket, storage_options
from s3fs.errors import translate_boto_error

from itemeval.errors import ExitCode, StorageCapabilityError
from itemeval.storage import (
    Location,
    _is_precondition_failed,
    check_exclusive_create,
    resolve,
)
from itemeval.store import RunManifest, StudyStore, write_manifest_start


def _new_bucket(options: dict[str, Any]) -> str:
    name = f"excl-{uuid.uuid4().hex[:12]}"
    make_bucket(options, name)
    return name


@pytest.fixture(params=["local", "moto", "seaweedfs"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, dict[str, Any]]:
    """(name, root URL, storage_options) of a fresh root on each backend that must pass."""
    if request.param == "local":
        return "local", str(tmp_path / "root"), {}
    if request.param == "moto":
        options = storage_options(request.getfixturevalue("s3_server"), {})
    else:
        options = request.getfixturevalue("seaweedfs_server")
    return request.param, f"s3://{_new_bucket(options)}/root", options


def _listing(location: Location) -> list[str]:
    location.fs.invalidate_cache()
    return sorted(str(p) for p in location.fs.find(location.path))


def test_second_create_is_refused_and_the_first_content_kept(backend) -> None:
    _, url, options = backend
    marker = resolve(f"{url}/items/ds/_complete.json", options)
    assert marker.create_exclusive(b"first")
    assert not marker.create_exclusive(b"second")
    assert marker.read_bytes() == b"first"
    # The probe cleaned up after itself: the marker is all there is.
    root = resolve(url, options)
    assert [p.rsplit("/", 1)[1] for p in _listing(root)] == ["_complete.json"]


def test_racing_creators_have_exactly_one_winner(backend) -> None:
    name, url, options = backend
    root = resolve(url, options)
    root.join("warm").create_exclusive(b"probe done before the race")
    # SeaweedFS queues racing conditional PUTs of one key on a lock it polls once a second.
    threads_per_key, keys = (4, 3) if name == "seaweedfs" else (6, 8)
    for k in range(keys):
        location = root.join(f"race-{k}.json")
        barrier = threading.Barrier(threads_per_key)
        won: list[int] = []

        def create(i: int, location: Location = location, barrier=barrier, won=won) -> None:
            barrier.wait(timeout=30)
            if location.create_exclusive(f"writer {i}".encode()):
                won.append(i)

        threads = [threading.Thread(target=create, args=(i,)) for i in range(threads_per_key)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(won) == 1, f"key {k}: winners {won}"
        assert location.read_bytes() == f"writer {won[0]}".encode()


def test_the_probe_runs_once_per_bucket_and_cleans_up(s3_server: str) -> None:
    options = storage_options(s3_server, {})
    bucket = _new_bucket(options)
    with ConditionProxy(s3_server, "pass") as proxy:
        via = {**options, "endpoint_url": proxy.endpoint}
        first = resolve(f"s3://{bucket}/study-a/dataset_locks.json", via)
        assert first.create_exclusive(b"{}")
        # Probe: PUT (created), PUT (412), DELETE; then the real PUT.
        assert proxy.count("PUT", 200) == 2 and proxy.count("PUT", 412) == 1
        assert proxy.count("GET") == 0 and proxy.count("DELETE") == 1
        second = resolve(f"s3://{bucket}/study-b/manifests/run.json", via)
        assert second.create_exclusive(b"{}")
        assert proxy.count("PUT") == 4 and proxy.count("DELETE") == 1  # no second probe
    names = [p.rsplit("/", 1)[1] for p in _listing(resolve(f"s3://{bucket}", options))]
    assert sorted(names) == ["dataset_locks.json", "run.json"]


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("ignore", "overwrote it instead of failing"),
        ("reject", "rejected the condition (NotImplemented, HTTP 501)"),
    ],
)
def test_a_backend_without_conditional_writes_is_refused(
    s3_server: str, mode: str, reason: str
) -> None:
    options = storage_options(s3_server, {})
    bucket = _new_bucket(options)
    with ConditionProxy(s3_server, mode) as proxy:
        store = StudyStore.open(f"s3://{bucket}/study", {**options, "endpoint_url": proxy.endpoint})
        with pytest.raises(StorageCapabilityError) as caught:
            store.dataset_locks.create_exclusive(b"{}")
    text = str(caught.value)
    assert f"s3://{bucket}/study" in text
    assert "conditional writes" in text and "If-None-Match" in text and reason in text
    assert "hint:" in text and caught.value.exit_code == ExitCode.BAD_INPUT
    assert _listing(resolve(f"s3://{bucket}", options)) == []  # probe removed, nothing written


def test_s3rver_which_overwrites_is_refused(s3rver_server: dict[str, Any]) -> None:
    """A real, popular fake S3 that ignores `If-None-Match` (checked first, without itemeval)."""
    bucket = _new_bucket(s3rver_server)
    raw = s3fs.S3FileSystem(skip_instance_cache=True, **s3rver_server)
    raw.pipe_file(f"{bucket}/check", b"1", mode="create")
    raw.pipe_file(f"{bucket}/check", b"2", mode="create")  # no error: it overwrote
    assert raw.cat_file(f"{bucket}/check") == b"2"
    raw.rm_file(f"{bucket}/check")

    store = StudyStore.open(f"s3://{bucket}/study", s3rver_server)
    with pytest.raises(StorageCapabilityError, match="overwrote it instead of failing"):
        write_manifest_start(store, _manifest())
    assert raw.find(bucket) == []


def test_a_conflicting_write_is_retried(s3_server: str) -> None:
    options = storage_options(s3_server, {})
    bucket = _new_bucket(options)
    with ConditionProxy(s3_server, "conflict") as proxy:
        location = resolve(
            f"s3://{bucket}/study/_complete.json", {**options, "endpoint_url": proxy.endpoint}
        )
        assert location.create_exclusive(b"mine")
        assert not location.create_exclusive(b"theirs")
        assert proxy.count("PUT", 409) == 2  # the probe object's first PUT and the marker's
    assert resolve(f"s3://{bucket}/study/_complete.json", options).read_bytes() == b"mine"


def test_a_retried_create_refused_by_its_own_lost_first_attempt_counts_as_created(
    s3_server: str,
) -> None:
    options = storage_options(s3_server, {})
    bucket = _new_bucket(options)
    with ConditionProxy(s3_server, "lose") as proxy:
        via = {**options, "endpoint_url": proxy.endpoint}
        location = resolve(f"s3://{bucket}/study/manifests/run-1.json", via)
        assert location.create_exclusive(b"run 1 started")
        # Each create (probe and manifest): the server wrote it, the client heard a 500,
        # botocore retried and got 412; the bytes it then read were its own.
        assert proxy.count("PUT", 500) == 2 and proxy.count("PUT", 412) >= 2
        assert not location.create_exclusive(b"run 1 started by someone else")
    assert resolve(f"s3://{bucket}/study/manifests/run-1.json", options).read_bytes() == (
        b"run 1 started"
    )


# -- how a refusal is recognised ---------------------------------------------------------------
def _client_error(code: str, status: int, **error: str) -> ClientError:
    response: Any = {
        "Error": {
            "Code": code,
            "Message": "At least one of the pre-conditions did not hold",
            **error,
        },
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "PutObject")


def test_refusals_are_recognised_by_type_and_code_not_text() -> None:
    # s3fs's own translation: FileExistsError when S3 names the condition ...
    named = translate_boto_error(
        _client_error("PreconditionFailed", 412, Condition="If-None-Match")
    )
    assert isinstance(named, FileExistsError) and _is_precondition_failed(named)
    # ... an OSError caused by the ClientError when it does not (SeaweedFS, below).
    unnamed = translate_boto_error(_client_error("PreconditionFailed", 412))
    assert not isinstance(unnamed, FileExistsError) and _is_precondition_failed(unnamed)
    status_only = translate_boto_error(_client_error("SomethingElse", 412))
    assert _is_precondition_failed(status_only)
    # Text alone is no refusal; other errors are not refusals.
    assert not _is_precondition_failed(OSError("HTTP 412 PreconditionFailed: pre-conditions"))
    assert not _is_precondition_failed(translate_boto_error(_client_error("AccessDenied", 403)))
    assert not _is_precondition_failed(translate_boto_error(_client_error("InternalError", 500)))


def test_moto_refuses_with_file_exists_and_seaweedfs_with_a_client_error(
    s3_server: str, seaweedfs_server: dict[str, Any]
) -> None:
    """The two real branches: which exception each server's refusal arrives as."""
    seen = {}
    for name, options in (
        ("moto", storage_options(s3_server, {})),
        ("seaweedfs", seaweedfs_server),
    ):
        bucket = _new_bucket(options)
        fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
        fs.pipe_file(f"{bucket}/k", b"1", mode="create")
        with pytest.raises(OSError) as caught:
            fs.pipe_file(f"{bucket}/k", b"2", mode="create")
        assert _is_precondition_failed(caught.value)
        seen[name] = caught.value
    assert isinstance(seen["moto"], FileExistsError)
    assert not isinstance(seen["seaweedfs"], FileExistsError)
    cause = seen["seaweedfs"].__cause__
    assert isinstance(cause, ClientError)
    assert cause.response["ResponseMetadata"]["HTTPStatusCode"] == 412


# -- local disk and other fsspec filesystems ---------------------------------------------------
def test_local_disk_needs_no_probe(tmp_path: Path) -> None:
    location = resolve(tmp_path / "lock.json")
    check_exclusive_create(location)
    assert os.listdir(tmp_path) == []  # nothing probed, nothing written
    assert location.create_exclusive(b"a") and not location.create_exclusive(b"b")
    assert os.listdir(tmp_path) == ["lock.json"]


def test_a_filesystem_without_hard_links_gets_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: str, dst: str) -> None:  # what Linux says on e.g. a FUSE mount of S3
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    location = resolve(tmp_path / "study" / "dataset_locks.json")
    with pytest.raises(StorageCapabilityError, match="does not support hard links") as caught:
        location.create_exclusive(b"{}")
    assert str(tmp_path / "study" / "dataset_locks.json") in str(caught.value)
    assert os.listdir(tmp_path / "study") == []  # the temporary file is gone


class _CheckThenWrite(MemoryFileSystem):
    """A filesystem on fsspec's generic pipe_file(mode="create"): exists(), then a write."""

    protocol = "checkthenwrite"
    pipe_file = fsspec.AbstractFileSystem.pipe_file


def test_a_check_then_write_filesystem_is_refused() -> None:
    fs = _CheckThenWrite()
    location = Location(url="checkthenwrite://b/lock.json", fs=fs, path="/b/lock.json")
    with pytest.raises(StorageCapabilityError, match="checks for the file and then writes"):
        location.create_exclusive(b"{}")
    assert not fs.exists("/b/lock.json")


def _manifest() -> RunManifest:
    return RunManifest(study="demo", command="run", config_hash="c" * 64)
