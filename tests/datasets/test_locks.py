"""dataset_locks.json on local disk and on the moto S3 server."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import pytest
import yaml

from itemeval.datasets._locks import LOCK_FILE, check_pins, pin_datasets, read_locks
from itemeval.datasets.adapters import DatasetSource, open_source
from itemeval.errors import ConfigError, DatasetChangedError, StoreError
from itemeval.storage import resolve

META = {
    "identifier": "facts",
    "created": "2025-05-19",
    "creator": "T",
    "description": "d",
    "hasPart": ["facts.jsonl"],
    "language": "eng",
    "license": "CC0-1.0",
    "publisher": "P",
    "source": "S",
    "subject": "s",
}
T0 = datetime(2025, 1, 1, tzinfo=UTC)
T1 = datetime(2025, 2, 1, tzinfo=UTC)


def put(url: str, text: str) -> None:
    resolve(url).write_atomic(text.encode("utf-8"))


def write_facts(directory: str, answer: str = "True") -> None:
    put(f"{directory}/facts.yaml", yaml.safe_dump(META))
    record = {"identifier": "f1", "modality": "boolean", "prompt": "Sky blue?", "response": answer}
    put(f"{directory}/facts.jsonl", json.dumps(record) + "\n")
    resolve(directory).invalidate()


def facts(directory: str):
    return open_source(DatasetSource(name="facts", path=directory))


def lock_bytes(root: str) -> bytes:
    location = resolve(root).join(LOCK_FILE)
    location.invalidate()
    return location.read_bytes()


def test_first_use_pins_and_same_data_passes(root_url):
    write_facts(root_url + "/data/facts")
    locks = pin_datasets(root_url + "/study", [facts(root_url + "/data/facts")], now=T0)
    pin = locks.datasets["facts"]
    assert pin.format == "items" and pin.path.endswith("/data/facts")
    assert pin.pinned_at == "2025-01-01T00:00:00+00:00"
    assert set(pin.files) == {"facts.yaml", "facts.jsonl"}
    stored = json.loads(lock_bytes(root_url + "/study"))
    assert stored["datasets"]["facts"]["fingerprint"] == pin.fingerprint
    before = lock_bytes(root_url + "/study")
    again = pin_datasets(root_url + "/study", [facts(root_url + "/data/facts")], now=T1)
    assert again == locks and lock_bytes(root_url + "/study") == before


def test_changed_data_is_refused_then_accepted_deliberately(root_url):
    study = root_url + "/study"
    write_facts(root_url + "/data/facts")
    first = pin_datasets(study, [facts(root_url + "/data/facts")], now=T0).datasets["facts"]
    before = lock_bytes(study)

    write_facts(root_url + "/data/facts", answer="False")
    changed = facts(root_url + "/data/facts")
    with pytest.raises(DatasetChangedError) as info:
        pin_datasets(study, [changed], now=T1)
    text = str(info.value)
    assert "dataset 'facts'" in text and LOCK_FILE in text
    assert first.fingerprint[:16] in text and changed.fingerprint()[:16] in text
    assert "modified files: facts.jsonl" in text and "facts.yaml" not in text.split("files:")[1]
    assert "--accept-dataset-change facts" in text and info.value.exit_code == 2
    assert lock_bytes(study) == before  # nothing written

    locks = pin_datasets(study, [changed], accept_changed={"facts"}, now=T1)
    pin = locks.datasets["facts"]
    assert pin.fingerprint == changed.fingerprint() and pin.pinned_at.startswith("2025-02-01")
    assert [h.fingerprint for h in pin.history] == [first.fingerprint]
    assert pin.history[0].replaced_at.startswith("2025-02-01")
    assert read_locks(study) == locks
    pin_datasets(study, [facts(root_url + "/data/facts")])  # the new pin holds


def test_new_datasets_are_added_and_mapping_changes_are_named(root_url):
    study = root_url + "/study"
    write_facts(root_url + "/data/facts")
    put(root_url + "/data/q.jsonl", '{"q": "2+2?", "a": "4"}\n')
    pin_datasets(study, [facts(root_url + "/data/facts")], now=T0)
    mapped = open_source(
        DatasetSource(
            name="q", path=root_url + "/data/q.jsonl", mapping={"input": "q", "target": "a"}
        )
    )
    locks = pin_datasets(study, [facts(root_url + "/data/facts"), mapped], now=T1)
    assert set(locks.datasets) == {"facts", "q"}
    assert locks.datasets["facts"].pinned_at.startswith("2025-01-01")
    assert locks.datasets["q"].mapping is not None

    remapped = open_source(
        DatasetSource(
            name="q",
            path=root_url + "/data/q.jsonl",
            mapping={"input": "q", "target": "a", "modality": "single-value"},
        )
    )
    with pytest.raises(DatasetChangedError, match="the mapping changed"):
        pin_datasets(study, [remapped])


def test_two_drivers_pinning_different_data_at_once(root_url):
    """Exactly one creation wins; the other driver sees the winner's pin and refuses."""
    write_facts(root_url + "/a/facts", answer="True")
    write_facts(root_url + "/b/facts", answer="False")
    handles = [facts(root_url + "/a/facts"), facts(root_url + "/b/facts")]
    for handle in handles:
        handle.fingerprint()  # hash before the race, so both threads reach the lock together
    barrier = threading.Barrier(2)
    outcomes: list[object] = [None, None]

    def drive(index: int) -> None:
        barrier.wait()
        try:
            outcomes[index] = pin_datasets(root_url + "/study", [handles[index]])
        except DatasetChangedError as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=drive, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    errors = [o for o in outcomes if isinstance(o, DatasetChangedError)]
    winners = [i for i, o in enumerate(outcomes) if not isinstance(o, DatasetChangedError)]
    assert len(errors) == 1 and len(winners) == 1
    stored = read_locks(root_url + "/study")
    assert stored.datasets["facts"].fingerprint == handles[winners[0]].fingerprint()


def test_accepting_an_unknown_dataset_is_a_config_error(tmp_path):
    write_facts(str(tmp_path / "facts"))
    with pytest.raises(ConfigError, match=r"'fact'.*not a dataset of this study"):
        pin_datasets(
            str(tmp_path / "study"), [facts(str(tmp_path / "facts"))], accept_changed=["fact"]
        )


def test_a_corrupt_lock_file_is_a_store_error(tmp_path):
    write_facts(str(tmp_path / "facts"))
    put(str(tmp_path / "study" / LOCK_FILE), "{not json")
    with pytest.raises(StoreError) as info:
        pin_datasets(str(tmp_path / "study"), [facts(str(tmp_path / "facts"))])
    assert LOCK_FILE in str(info.value) and "not valid" in str(info.value)


def test_check_pins_compares_without_writing(root_url):
    study = root_url + "/study"
    write_facts(root_url + "/data/facts")
    handle = facts(root_url + "/data/facts")
    preview = check_pins(study, [handle], now=T0)
    assert preview.datasets["facts"].fingerprint == handle.fingerprint()
    assert read_locks(study) is None  # nothing written
    pin_datasets(study, [handle], now=T0)
    write_facts(root_url + "/data/facts", answer="False")
    changed = facts(root_url + "/data/facts")
    with pytest.raises(DatasetChangedError):
        check_pins(study, [changed])
    accepted = check_pins(study, [changed], accept_changed={"facts"}, now=T1)
    assert accepted.datasets["facts"].history[0].fingerprint == handle.fingerprint()
    assert read_locks(study).datasets["facts"].fingerprint == handle.fingerprint()
