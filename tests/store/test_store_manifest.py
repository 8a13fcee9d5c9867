"""Run manifests: created once at the start, rewritten at the end, never holding a secret."""

from __future__ import annotations

import json

import pytest

from itemeval.errors import StoreError
from itemeval.secrets import read_key
from itemeval.store import (
    ConditionRecord,
    DatasetRecord,
    EstimateRecord,
    RunManifest,
    SpendRecord,
    StageCounts,
    StudyStore,
    latest_manifest,
    list_manifests,
    read_manifest,
    write_manifest_end,
    write_manifest_start,
)


def _manifest(**overrides) -> RunManifest:
    fields = {
        "study": "demo",
        "command": "run",
        "argv": ["itemeval", "run", "study.yaml"],
        "config_hash": "c" * 64,
        "datasets": [DatasetRecord(name="gsm8k", fingerprint="f" * 64, revision="abc", items=100)],
        "prompt_hashes": {"builtin:cot": "p" * 64},
        "rubric_hashes": {"builtin:correctness": "r" * 64},
        "models": ["sim/model-a"],
        "conditions": [
            ConditionRecord(
                id="sim-a_cot--0123456789ab",
                stage="generate",
                slug="sim-a_cot",
                payload={"model": "sim/model-a", "params": {"temperature": 0.7}},
                requested_params={"temperature": 0.7},
            )
        ],
        "seeds": {"sim": 7},
        "estimate": EstimateRecord(usd=1.25, input_tokens=1000, output_tokens=200, cells=100),
    }
    fields.update(overrides)
    return RunManifest(**fields)


def test_start_then_end(store: StudyStore) -> None:
    manifest = _manifest()
    location = write_manifest_start(store, manifest)
    assert location.url.endswith(f"/manifests/{manifest.run_id}.json")
    data = json.loads(location.read_text())
    assert data["outcome"] == "running" and data["ended_at"] is None
    assert {"itemeval", "pyarrow", "python"} <= set(data["versions"])
    assert data["host"]["hostname"]
    with pytest.raises(StoreError, match="exists already"):
        write_manifest_start(store, manifest)

    ended = manifest.finished("completed").model_copy(
        update={
            "spend": SpendRecord(usd=1.1, calls=90, cache_hits=10),
            "counts": {"generate": StageCounts(planned=100, done=99, errors=1, cached=10)},
        }
    )
    write_manifest_end(store, ended)
    back = read_manifest(store, manifest.run_id)
    assert back == ended
    assert back.outcome == "completed" and back.ended_at is not None
    assert back.conditions[0].payload["params"]["temperature"] == 0.7


def test_list_and_latest(store: StudyStore) -> None:
    assert latest_manifest(store) is None
    first, second = _manifest(), _manifest(command="grade")
    write_manifest_start(store, first)
    write_manifest_start(store, second)
    assert list_manifests(store) == [first.run_id, second.run_id]
    latest = latest_manifest(store)
    assert latest is not None and latest.command == "grade"


def test_secrets_never_reach_the_file(store: StudyStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITEMEVAL_TEST_KEY", "sk-very-secret-value-123")
    key = read_key("ITEMEVAL_TEST_KEY")
    assert key is not None
    manifest = _manifest().finished("failed", error=f"401 for key {key.reveal()}")
    write_manifest_start(store, manifest)
    text = store.manifests.join(f"{manifest.run_id}.json").read_text()
    assert "sk-very-secret-value-123" not in text
    assert "401 for key ***" in text


def test_invalid_manifests_are_store_errors(store: StudyStore) -> None:
    with pytest.raises(StoreError, match="no such manifest"):
        read_manifest(store, "20260101T000000.000000Z-00000000")
    store.manifests.join("broken.json").write_atomic(b'{"run_id": 3}')
    with pytest.raises(StoreError, match=r"broken\.json"):
        read_manifest(store, "broken")
    with pytest.raises(ValueError):
        _manifest(outcome="exploded")


def test_a_run_that_never_ended_is_charged_its_stored_rows(store: StudyStore, solution) -> None:
    from itemeval.store import compact, runs_spend

    ended = _manifest()
    write_manifest_start(store, ended)
    write_manifest_end(
        store,
        ended.finished("completed").model_copy(update={"spend": SpendRecord(usd=2.0, calls=2)}),
    )
    killed = _manifest()
    write_manifest_start(store, killed)
    # Rows of both runs, an answer written twice by the killed run (both paid), some compacted.
    store.write_solutions("c1", [solution("q1", run_id=ended.run_id, usd=1.0)])
    store.write_solutions("c1", [solution("q2", run_id=killed.run_id, usd=0.25)])
    compact(store)
    store.write_solutions("c1", [solution("q2", run_id=killed.run_id, usd=0.5)])
    store.write_solutions("c2", [solution("q3", run_id=killed.run_id, usd=0.125)])
    spend = runs_spend(store)
    assert (spend.runs, spend.unfinished) == (2, 1)
    assert spend.usd == 2.0  # the ledgers'
    assert spend.unfinished_usd == 0.875  # the killed run's rows, each physical row once
    assert spend.study_usd == 2.875
