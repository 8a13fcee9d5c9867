"""The response cache: content keys, per-epoch answers, vectorised lookups, free hits."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from itemeval.providers.types import ModelRequest, SamplingParams
from itemeval.store import (
    RESPONSE_SCHEMA,
    SOLUTION_SCHEMA,
    ResponseCache,
    StudyStore,
    build_table,
    cache_key,
    default_cache_url,
    pending_generate,
    request_hash,
    responses_from_solutions,
    solutions_from_cache,
    text_hash,
)

CID = "sim-a_default--0123456789ab"


def _request(item: str, temperature: float = 0.0) -> ModelRequest:
    return ModelRequest(
        model="sim/model-a",
        messages=({"role": "user", "content": f"question {item}"},),
        params=SamplingParams(temperature=temperature, max_tokens=64),
        sim_hints={"target": "42"},
    )


def _response(item: str, epoch: int, text: str | None = None) -> dict:
    request = _request(item)
    return {
        "key": cache_key(CID, request, epoch),
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


def test_key_covers_condition_request_and_epoch() -> None:
    base = cache_key(CID, _request("q1"), 0)
    assert base == cache_key(CID, _request("q1"), 0)
    assert len(base) == 64
    assert base != cache_key(CID, _request("q1"), 1)  # another replication
    assert base != cache_key("other--0123456789ab", _request("q1"), 0)
    assert base != cache_key(CID, _request("q1", temperature=0.5), 0)
    assert base != cache_key(CID, _request("q2"), 0)
    # sim_hints are not request content; a dict form of the same request is the same call.
    as_dict = {
        "model": "sim/model-a",
        "messages": [{"role": "user", "content": "question q1"}],
        "params": {"temperature": 0.0, "max_tokens": 64},
    }
    assert cache_key(CID, as_dict, 0) == base
    assert request_hash(as_dict) == request_hash(_request("q1"))


def test_put_and_lookup_a_shard(cache: ResponseCache) -> None:
    cache.put(CID, [_response(f"q{i}", e) for i in range(50) for e in (0, 1)])
    cache.put(CID, [_response(f"q{i}", 2) for i in range(50, 60)])
    wanted = [cache_key(CID, _request(f"q{i}"), 1) for i in range(45, 55)]
    hits = cache.lookup(CID, pa.array(wanted))
    assert hits.schema.equals(RESPONSE_SCHEMA)
    assert sorted(hits.column("item_id").to_pylist()) == [f"q{i}" for i in range(45, 50)]
    assert set(hits.column("epoch").to_pylist()) == {1}  # never another replication's answer
    assert cache.lookup("unknown--0123456789ab", wanted).num_rows == 0


def test_a_new_process_and_a_second_writer_are_seen(cache: ResponseCache, root_url: str) -> None:
    cache.put(CID, [_response("q1", 0)])
    other = ResponseCache.open(root_url + "/cache")  # another study / process, same cache
    assert other.lookup(CID, [cache_key(CID, _request("q1"), 0)]).num_rows == 1
    other.put(CID, [_response("q2", 0)])
    # The first instance lists only the new fragment and finds the other's entry.
    assert cache.lookup(CID, [cache_key(CID, _request("q2"), 0)]).num_rows == 1
    assert cache.refresh(CID).num_rows == 2


def test_duplicate_keys_answer_with_the_latest(cache: ResponseCache) -> None:
    cache.put(CID, [_response("q1", 0, text="first")])
    cache.put(CID, [_response("q1", 0, text="second")])
    hits = cache.lookup(CID, [cache_key(CID, _request("q1"), 0)])
    assert hits.column("text").to_pylist() == ["second"]


def test_candidates_for_estimates(cache: ResponseCache) -> None:
    cache.put(CID, [_response("q1", 0), _response("q2", 1)])
    cells = pa.table(
        {"item_id": ["q1", "q1", "q2", "q3"], "epoch": pa.array([0, 1, 1, 0], pa.int64())}
    )
    found = cache.candidates(CID, cells)
    assert sorted(zip(found["item_id"].to_pylist(), found["epoch"].to_pylist(), strict=True)) == [
        ("q1", 0),
        ("q2", 1),
    ]


def test_hits_become_free_cached_solutions(store: StudyStore, cache: ResponseCache) -> None:
    """A wiped study (or a second one) pays nothing for calls it made before."""
    fresh = build_table(
        SOLUTION_SCHEMA,
        [
            {
                **{k: v for k, v in _response(f"q{i}", 0).items() if k not in ("key", "usd")},
                "status": "ok",
                "usd": 0.002,
                "run_id": "run-1",
            }
            for i in range(3)
        ]
        + [
            {
                "item_id": "q3",
                "epoch": 0,
                "status": "error",
                "error_code": "timeout",
                "request_hash": "r",
                "model": "sim/model-a",
                "run_id": "run-1",
            }
        ],
    )
    keys = [cache_key(CID, _request(f"q{i}"), 0) for i in range(4)]
    cache.put(CID, responses_from_solutions(fresh, keys))  # errors are never cached
    assert cache.refresh(CID).num_rows == 3

    # Next run: the pending cells' keys are looked up as one batch.
    pending = pending_generate(store, [CID], ["q0", "q1", "q2", "q3"], 1)
    pending_keys = [
        cache_key(CID, _request(i), int(e))
        for i, e in zip(pending["item_id"].to_pylist(), pending["epoch"].to_pylist(), strict=True)
    ]
    hits = cache.lookup(CID, pending_keys)
    rows = solutions_from_cache(hits, run_id="run-2")
    store.write_solutions(CID, rows)
    stored = store.read_solutions([CID])
    assert stored.num_rows == 3
    assert pc.all(stored["cached"]).as_py() and pc.sum(stored["usd"]).as_py() == 0.0
    assert set(stored["attempts"].to_pylist()) == {0}
    assert stored["text_hash"].to_pylist() == [text_hash(t) for t in stored["text"].to_pylist()]
    assert pending_generate(store, [CID], ["q0", "q1", "q2", "q3"], 1)["item_id"].to_pylist() == [
        "q3"
    ]


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
