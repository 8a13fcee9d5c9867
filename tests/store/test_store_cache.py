"""The response cache: content-only keys, per-epoch answers, vectorised lookups, older caches."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

import pyarrow as pa
import pytest

from itemeval.ids import content_hash
from itemeval.providers.types import ModelRequest, SamplingParams
from itemeval.store import (
    RESPONSE_SCHEMA,
    LegacyLookup,
    ResponseCache,
    cache_group,
    cache_key,
    default_cache_url,
    legacy_cache_key,
    request_hashes,
)
from itemeval.store._cache import request_hash
from itemeval.store._schemas import build_table
from itemeval.store.fragments import write_fragment

GROUP = cache_group("sim/model-a", {"temperature": 0.0, "max_tokens": 64}, "template-sha")
CID = "sim-a_default--0123456789ab"


def _request(item: str, temperature: float = 0.0) -> ModelRequest:
    return ModelRequest(
        model="sim/model-a",
        messages=({"role": "user", "content": f"question {item}"},),
        params=SamplingParams(temperature=temperature, max_tokens=64),
        sim_hints={"target": "42"},
    )


def _key(item: str, epoch: int) -> str:
    return cache_key(request_hash(_request(item)), epoch)


def _response(item: str, epoch: int, text: str | None = None, key: str | None = None) -> dict:
    request = _request(item)
    return {
        "key": key or _key(item, epoch),
        "item_id": item,
        "epoch": epoch,
        "request_hash": request_hash(request),
        "model": "sim/model-a",
        "text": text or f"{item} at epoch {epoch}",
        "input_tokens": 12,
        "output_tokens": 3,
        "usd": 0.002,
        "latency_ms": 250.0,
    }


@pytest.fixture
def cache(root_url: str) -> ResponseCache:
    return ResponseCache.open(root_url + "/cache")


@pytest.mark.parametrize("epoch", [0, 1, 17, 1_000_000])
def test_key_is_the_hash_of_the_canonical_json_of_request_and_epoch(epoch) -> None:
    # The keys of every cache written so far: the written-out form must give the same bytes.
    def oracle(request: str) -> str:
        payload = {"request": request, "epoch": epoch}
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    digest = request_hash(_request("q1"))
    assert (
        cache_key(digest, epoch)
        == oracle(digest)
        == content_hash({"request": digest, "epoch": epoch})
    )
    assert cache_key('a"b', epoch) == oracle('a"b')  # not a hex digest: escaped, as always


def test_request_hash_is_sha256_of_the_canonical_json_every_cache_was_keyed_by() -> None:
    # The form fixed in ids.py: keys sorted, no whitespace, UTF-8 as is, no NaN.
    request = {
        "model": "sim/strong",
        "messages": [{"role": "user", "content": "Wie viel ist 2 + 2? \u00e9 \u2019 \U0001f600"}],
        "params": {"temperature": 0.7, "max_tokens": 16, "top_p": 1e-07, "stop": ["\n"]},
    }
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert request_hash(request) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    with pytest.raises(ValueError):
        content_hash({"x": float("nan")})


def test_request_hashes_of_a_shard_are_each_request_hash() -> None:
    # The batch form writes the canonical JSON out around its parts and encodes each params
    # object once: every request must still hash to exactly `request_hash`'s bytes.
    shared = SamplingParams(temperature=0.0, max_tokens=16, stop=("\n", "END"))
    messages = (
        {"role": "system", "content": "Answer with a number."},
        {"content": 'Wie viel ist 2 + 2? \u00e9 \u2019 \U0001f600 "quoted"', "role": "user"},
    )
    requests = [
        ModelRequest(model="sim/strong", messages=messages, params=shared),
        ModelRequest(model="sim/strong", messages=messages[1:], params=shared),
        ModelRequest(model='a "model"/\u00e9', messages=messages, params=SamplingParams()),
        ModelRequest(model="m", messages=messages, params=SamplingParams(top_p=1e-07, seed=3)),
        ModelRequest(model="m", messages=list(messages), params=shared),  # type: ignore[arg-type]
        ModelRequest(model="m", messages=(MappingProxyType(messages[0]),), params=shared),  # type: ignore[arg-type]
        ModelRequest(model="m", messages=(), params=shared, sim_hints={"target": "4"}),
    ]
    assert request_hashes(requests) == [request_hash(r) for r in requests]
    for request in requests:
        content = {
            "model": request.model,
            "messages": [dict(m) for m in request.messages],
            "params": request.params.as_dict(),
        }
        text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert request_hashes([request]) == [hashlib.sha256(text.encode("utf-8")).hexdigest()]
    assert request_hashes([]) == []


def test_key_is_request_content_and_epoch_only() -> None:
    base = _key("q1", 0)
    assert base == _key("q1", 0)
    assert len(base) == 64
    assert base != _key("q1", 1)  # another replication
    assert base != cache_key(request_hash(_request("q1", temperature=0.5)), 0)
    assert base != _key("q2", 0)
    # sim_hints are not request content; a dict form of the same request is the same call.
    as_dict = {
        "model": "sim/model-a",
        "messages": [{"role": "user", "content": "question q1"}],
        "params": {"temperature": 0.0, "max_tokens": 64},
    }
    assert request_hash(as_dict) == request_hash(_request("q1"))


def test_groups_come_from_content_never_names() -> None:
    params = {"temperature": 0.0}
    group = cache_group("gpt-4o", params, "sha-of-template")
    assert group == cache_group("gpt-4o", dict(params), "sha-of-template")
    assert group.startswith("gpt-4o--")
    assert group != cache_group("gpt-4o", {"temperature": 0.5}, "sha-of-template")
    assert group != cache_group("gpt-4o-mini", params, "sha-of-template")
    assert group != cache_group("gpt-4o", params, "another-template")


def test_put_and_lookup_a_shard(cache: ResponseCache) -> None:
    cache.put(GROUP, [_response(f"q{i}", e) for i in range(50) for e in (0, 1)])
    cache.put(GROUP, [_response(f"q{i}", 2) for i in range(50, 60)])
    wanted = [_key(f"q{i}", 1) for i in range(45, 55)]
    hits = cache.lookup(GROUP, pa.array(wanted))
    assert hits.schema.equals(RESPONSE_SCHEMA)
    assert sorted(hits.column("item_id").to_pylist()) == [f"q{i}" for i in range(45, 50)]
    assert set(hits.column("epoch").to_pylist()) == {1}  # never another replication's answer
    assert cache.lookup("unknown--0123456789abcdef", wanted).num_rows == 0


def test_a_second_writer_is_seen_at_once_with_fresh_and_later_without(
    cache: ResponseCache, root_url: str
) -> None:
    slow = ResponseCache.open(root_url + "/cache", refresh_interval_s=3600)
    assert slow.lookup(GROUP, [_key("q1", 0)]).num_rows == 0  # lists the partition once
    cache.put(GROUP, [_response("q1", 0)])  # another process writes
    assert slow.lookup(GROUP, [_key("q1", 0)]).num_rows == 0  # its index is an hour old
    assert slow.lookup(GROUP, [_key("q1", 0)], fresh=True).num_rows == 1
    slow.put(GROUP, [_response("q2", 0)])  # what it writes itself it sees at once
    assert slow.lookup(GROUP, [_key("q2", 0)]).num_rows == 1


def test_duplicate_keys_answer_with_the_latest(cache: ResponseCache) -> None:
    cache.put(GROUP, [_response("q1", 0, text="first")])
    cache.put(GROUP, [_response("q1", 0, text="second")])
    hits = cache.lookup(GROUP, [_key("q1", 0)])
    assert hits.column("text").to_pylist() == ["second"]


def test_keys_that_share_their_first_64_bits_answer_only_for_themselves(
    cache: ResponseCache,
) -> None:
    # The index keeps 64 bits of each key (memory at a million answers): a hit is confirmed on
    # the whole key, so a newer answer of a key with the same first 16 hex digits is never
    # served for another key.
    first, second = "ab" * 8 + "0" * 48, "ab" * 8 + "1" * 48
    cache.put(GROUP, [_response("q1", 0, text="mine", key=first)])
    cache.put(GROUP, [_response("q2", 0, text="not mine", key=second)])
    hits = cache.lookup(GROUP, [first])
    assert hits.column("key").to_pylist() == [first]
    assert hits.column("text").to_pylist() == ["mine"]
    both = cache.lookup(GROUP, [second, first], fresh=True)
    assert sorted(both.column("text").to_pylist()) == ["mine", "not mine"]
    assert cache.lookup(GROUP, ["ab" * 8 + "2" * 48]).num_rows == 0  # same 64 bits, a miss


def test_since_reuses_only_recent_answers(cache: ResponseCache) -> None:
    cache.put(GROUP, [_response("q1", 0)])
    time.sleep(0.01)
    started = datetime.now(UTC)
    cache.put(GROUP, [_response("q2", 0)])
    hits = cache.lookup(GROUP, [_key("q1", 0), _key("q2", 0)], since=started)
    assert hits.column("item_id").to_pylist() == ["q2"]


def test_an_older_cache_answers_misses_with_its_own_keys(
    cache: ResponseCache, root_url: str
) -> None:
    # Written by an earlier version: partitioned by condition id, keys hashed the condition id.
    old_rows = [
        _response(f"q{i}", 0, key=legacy_cache_key(CID, _request(f"q{i}"), 0)) for i in range(3)
    ]
    write_fragment(cache.legacy_partition(CID), build_table(RESPONSE_SCHEMA, old_rows))
    cache.put(GROUP, [_response("q0", 0, text="new layout")])
    keys = [_key(f"q{i}", 0) for i in range(4)]
    legacy = LegacyLookup(CID, [legacy_cache_key(CID, _request(f"q{i}"), 0) for i in range(4)])
    assert cache.has_legacy(CID) and not cache.has_legacy("other--0123456789ab")
    hits = cache.lookup(GROUP, keys, legacy=legacy)
    by_key = dict(zip(hits.column("key").to_pylist(), hits.column("text").to_pylist(), strict=True))
    assert set(by_key) == set(keys[:3])  # answered under the new keys; q3 is a miss
    assert by_key[keys[0]] == "new layout"  # the new layout answers first


def test_default_cache_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", "s3://bucket/cache")
    assert default_cache_url() == "s3://bucket/cache"
    monkeypatch.delenv("ITEMEVAL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_url() == str(tmp_path / "itemeval")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_url() == str(tmp_path / "home" / ".cache" / "itemeval")
    assert ResponseCache.open().root.path == str(tmp_path / "home" / ".cache" / "itemeval")
