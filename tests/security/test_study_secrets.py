"""Credentials come only from the environment: a study file that holds one (a credential
header, a credential storage option, a value shaped like a key) is refused with exit 2, and the
refusal never repeats the value; a study names the variable instead (`headers_env`, a storage
option's `NAME_env`), which is read in each process at the last moment. Every secret a process
reads, and every credential in its environment, is scrubbed from what leaves it."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import pytest
import s3fs
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from runtime_files import write_study

from itemeval.cli.main import main
from itemeval.errors import ConfigError
from itemeval.secrets import read_key, redact
from itemeval.storage import resolve

CANARY = "canary-" + secrets.token_hex(12)


def _plan(tmp_path: Path, capsys, **overrides) -> tuple[int, str]:
    path = write_study(tmp_path, **overrides)
    code = main(["plan", str(path)])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Auth-Token": CANARY},
        {"X-Api-Key": CANARY},
        {"Proxy-Authorization": CANARY},
        {"X-Session-Token": CANARY},
        {"X-Custom": f"Bearer {CANARY}"},
        {"X-Custom": f"sk-{CANARY}"},
    ],
    ids=["x-auth-token", "x-api-key", "proxy-authorization", "session", "bearer", "sk-"],
)
def test_a_credential_header_in_the_study_is_refused(tmp_path, capsys, headers):
    endpoint = {"kind": "sim", "base_url": "http://127.0.0.1:9/v1", "headers": headers}
    code, text = _plan(tmp_path, capsys, **{"endpoints.sim": endpoint})
    assert code == 2, text
    assert "headers_env" in text and "credential" in text, text
    assert CANARY not in text


def test_plain_headers_pass(tmp_path, capsys):
    headers = {
        "X-Request-Source": "nightly-evals",
        "anthropic-beta": "prompt-caching-2024-07-31",
        "X-Session-Id": "run-42",
        "Idempotency-Key": "8e0f6a",
    }
    endpoint = {"kind": "sim", "base_url": "http://127.0.0.1:9/v1", "headers": headers}
    code, text = _plan(tmp_path, capsys, **{"endpoints.sim": endpoint})
    assert code == 0, text


@pytest.mark.parametrize(
    ("field", "options"),
    [
        ("storage_options", {"key": CANARY}),
        ("storage_options", {"secret": CANARY}),
        ("storage_options", {"client_kwargs": {"aws_secret_access_key": CANARY}}),
        ("storage_options", {"endpoint_url": "http://127.0.0.1:9", "token": CANARY}),
        ("storage_options", {"account_key": CANARY}),  # adlfs
        ("storage_options", {"profile": f"AKIAABCDEFGHIJKLMNOP{CANARY}"}),  # a key's shape
        ("storage_options_by_prefix", {"s3://bench/": {"password": CANARY}}),
    ],
    ids=["key", "secret", "nested", "token", "account_key", "akia-value", "by-prefix"],
)
def test_a_credential_storage_option_in_the_study_is_refused(tmp_path, capsys, field, options):
    code, text = _plan(tmp_path, capsys, **{field: options})
    assert code == 2, text
    assert field in text and "_env: SOME_VARIABLE" in text and "AWS_ACCESS_KEY_ID" in text, text
    assert CANARY not in text


def test_a_dataset_with_a_credential_option_is_refused(tmp_path, capsys):
    data = yaml.safe_load(write_study(tmp_path).read_text())["datasets"]
    data[0]["storage_options"] = {"secret": CANARY}
    code, text = _plan(tmp_path, capsys, datasets=data)
    assert code == 2 and "datasets" in text and CANARY not in text, text


def test_storage_options_without_credentials_pass(tmp_path, capsys):
    options = {"endpoint_url": "http://127.0.0.1:9", "anon": False, "profile": "evals"}
    by_prefix = {"gs://open/": {"token": "anon"}, "s3://x/": {"key_env": "K", "secret_env": "S"}}
    code, text = _plan(
        tmp_path, capsys, storage_options=options, storage_options_by_prefix=by_prefix
    )
    assert code == 0, text


def test_named_variables_reach_the_filesystem_and_are_redacted(monkeypatch):
    monkeypatch.setenv("ITEMEVAL_TEST_STORE_KEY", "key-" + CANARY)
    monkeypatch.setenv("ITEMEVAL_TEST_STORE_SECRET", "secret-" + CANARY)
    options = {
        "key_env": "ITEMEVAL_TEST_STORE_KEY",
        "secret_env": "ITEMEVAL_TEST_STORE_SECRET",
        "endpoint_url": "http://127.0.0.1:9",
        "skip_instance_cache": True,
    }
    location = resolve("s3://bucket/store", options)
    assert isinstance(location.fs, s3fs.S3FileSystem)
    assert location.fs.key == "key-" + CANARY and location.fs.secret == "secret-" + CANARY
    assert CANARY not in redact(f"signature of key-{CANARY} with secret-{CANARY} failed")
    monkeypatch.delenv("ITEMEVAL_TEST_STORE_SECRET")
    with pytest.raises(ConfigError, match="ITEMEVAL_TEST_STORE_SECRET is not set") as info:
        resolve("s3://bucket/other", options)
    assert info.value.exit_code == 2


def test_environment_credentials_are_redacted(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-" + CANARY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-" + CANARY)
    monkeypatch.setenv("ITEMEVAL_TEST_PLAIN_DIR", "/tmp/some-folder")
    text = redact(f"failed: aws-{CANARY} session-{CANARY} in /tmp/some-folder")
    assert CANARY not in text and "/tmp/some-folder" in text


def test_the_cli_redacts_an_environment_credential_in_an_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-" + CANARY)
    data = yaml.safe_load(write_study(tmp_path).read_text())["datasets"]
    data[0]["path"] = str(tmp_path / f"aws-{CANARY}")  # an error that names the value
    code, text = _plan(tmp_path, capsys, datasets=data)
    assert code == 2 and "***" in text, text
    assert CANARY not in text


def test_the_missing_key_hint_points_to_the_nodes_environment_not_a_runtime_env(monkeypatch):
    monkeypatch.delenv("ITEMEVAL_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        read_key("ITEMEVAL_TEST_UNSET_KEY")
    text = str(info.value)
    assert "ray start" in text and "not a job's runtime_env" in text, text


@pytest.mark.s3
def test_a_store_on_s3_with_named_credentials_keeps_them_out_of_every_object(
    tmp_path, s3_server, s3_bucket, monkeypatch
):
    monkeypatch.setenv("ITEMEVAL_TEST_CANARY_KEY", "key-" + CANARY)
    monkeypatch.setenv("ITEMEVAL_TEST_CANARY_SECRET", "secret-" + CANARY)
    store = f"{s3_bucket}/studies/named-credentials"
    path = write_study(
        tmp_path,
        **{
            "store": store,
            "storage_options": {
                "endpoint_url": s3_server,
                "key_env": "ITEMEVAL_TEST_CANARY_KEY",
                "secret_env": "ITEMEVAL_TEST_CANARY_SECRET",
            },
            "budget.dev_items": 2,
            "facets.replications": 1,
            "facets.grader": [],
        },
    )
    assert main(["run", str(path), "--yes", "--no-ray"]) == 0
    fs = s3fs.S3FileSystem(endpoint_url=s3_server, skip_instance_cache=True)
    objects = fs.find(store)
    assert any("/solutions/" in o for o in objects) and any("/manifests/" in o for o in objects)
    for name in objects:
        assert CANARY.encode() not in fs.cat_file(name), name
    for directory, _, files in os.walk(tmp_path):
        for name in files:
            assert CANARY.encode() not in (Path(directory) / name).read_bytes(), name


def test_a_plugin_option_holding_a_key_is_refused(tmp_path, capsys):
    endpoint = {"kind": "mypkg.gateway:Gateway", "options": {"auth": f"Bearer {CANARY}"}}
    code, text = _plan(tmp_path, capsys, **{"endpoints.sim": endpoint})
    assert code == 2 and "api_key_env" in text and CANARY not in text, text
