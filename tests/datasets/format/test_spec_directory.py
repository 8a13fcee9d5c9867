"""Reading and writing dataset directories, on local disk and on the moto S3 server."""

import json
from collections import Counter

import pytest
from spec_files import META, item, jsonl, put

from itemeval.datasets.format import DatasetMeta, Item, read_dataset, write_dataset
from itemeval.errors import DatasetError
from itemeval.storage import resolve


def make_meta(**extra):
    return DatasetMeta(**{**META, "hasPart": [], **extra})


def test_write_then_read_is_lossless(root_url):
    meta = make_meta(
        taskPrompt="Dataset prompt.", title="Ünïcode títle", extras={"x-team": "evals"}
    )
    raw_items = [
        {
            "Identifier": "Q1",
            "modality": "boolean",
            "PROMPT": "Ist der Himmel blau? 🌤",
            "response": "True",
            "note": {"nested": [1, 2]},
        },
        {
            "identifier": "q2",
            "modality": "ternary",
            "prompt": "Will it rain?",
            "response": "I don't know",
            "taskPrompt": "Own prompt.",
            "difficulty": 0.75,
            "support": ["a", "b"],
        },
        {"identifier": "q3", "modality": "cloze", "prompt": "Fill ___ in", "response": "this"},
    ]
    from itemeval.datasets.format import Where, parse_item

    items = [parse_item(r, Where())[0] for r in raw_items]
    written = write_dataset(root_url + "/ds", meta, items)
    assert written.has_part == ["demo.jsonl"]

    reader = read_dataset(root_url + "/ds")
    assert reader.meta.title == "Ünïcode títle" and reader.meta.extras == {"x-team": "evals"}
    back = [i for batch in reader.iter_batches(2) for i in batch]
    assert [i.to_dict() for i in back] == raw_items
    assert reader.meta.task_prompt_for(back[0]) == "Dataset prompt."
    assert reader.meta.task_prompt_for(back[1]) == "Own prompt."
    assert reader.warnings == []
    # the part holds the spec's attributes only (names as read, booleans as JSON, unicode
    # unescaped); the ad hoc attribute is in the part's attributes file
    text = resolve(root_url + "/ds/demo.jsonl").read_text()
    first = {k: v for k, v in raw_items[0].items() if k != "note"} | {"response": True}
    assert [json.loads(line) for line in text.splitlines()] == [first, *raw_items[1:]]
    assert "🌤" in text
    assert written.item_attributes == {"demo.jsonl": "demo.attributes.jsonl"}
    attributes = resolve(root_url + "/ds/demo.attributes.jsonl").read_text()
    assert [json.loads(line) for line in attributes.splitlines()] == [
        {"identifier": "Q1", "note": {"nested": [1, 2]}}
    ]
    assert "demo.attributes.jsonl" in reader.file_hashes()


def test_several_parts_follow_the_naming_rule_and_stream(root_url):
    consumed = []

    def items():
        for i in range(23):
            consumed.append(i)
            yield Item(
                identifier=f"it.{i}", modality="single-value", prompt=f"{i}+1?", response=str(i + 1)
            )

    written = write_dataset(root_url + "/many", make_meta(), items(), items_per_part=10)
    assert written.has_part == ["demo_000.jsonl", "demo_001.jsonl", "demo_002.jsonl"]
    reader = read_dataset(root_url + "/many/demo.yaml")
    batches = list(reader.iter_batches(7))
    assert [len(b) for b in batches] == [7, 7, 7, 2]
    assert [i.identifier for b in batches for i in b] == [f"it.{i}" for i in range(23)]
    report = reader.validate()
    assert report.ok and report.items == 23 and report.by_modality == {"single-value": 23}


def test_reading_is_lazy(root_url, write_raw):
    """Items are parsed as they are consumed: a broken line late in the file does not stop the
    first batches, and the error is raised once the read gets there."""
    records = [item(f"q{i}") for i in range(50)] + ["not an object"]
    write_raw(root_url + "/lazy", {"demo.jsonl": jsonl(records)})
    batches = read_dataset(root_url + "/lazy").iter_batches(10)
    first = next(batches)
    assert [i.identifier for i in first] == [f"q{i}" for i in range(10)]
    with pytest.raises(DatasetError, match=r"demo.jsonl:51"):
        list(batches)


def test_fingerprint_changes_with_any_byte(root_url, write_raw):
    write_raw(root_url + "/fp", {"demo.jsonl": jsonl([item("a"), item("b")])})
    first = read_dataset(root_url + "/fp")
    hashes = first.file_hashes()
    assert set(hashes) == {"demo.yaml", "demo.jsonl"}
    before = first.fingerprint()
    assert read_dataset(root_url + "/fp").fingerprint() == before
    put(root_url + "/fp/demo.jsonl", jsonl([item("a"), item("b", response="False")]))
    resolve(root_url + "/fp").invalidate()
    after = read_dataset(root_url + "/fp")
    assert after.fingerprint() != before
    assert after.file_hashes()["demo.yaml"] == hashes["demo.yaml"]
    assert after.file_hashes()["demo.jsonl"] != hashes["demo.jsonl"]


def test_writing_refuses_an_existing_dataset_unless_overwriting(root_url):
    one = [Item(identifier="a", modality="boolean", prompt="p", response="True")]
    write_dataset(root_url + "/ow", make_meta(), one * 1, items_per_part=1)
    with pytest.raises(DatasetError, match="already there"):
        write_dataset(root_url + "/ow", make_meta(), one)
    two = [*one, Item(identifier="b", modality="boolean", prompt="p", response="False")]
    write_dataset(root_url + "/ow", make_meta(), two, items_per_part=1, overwrite=True)
    assert read_dataset(root_url + "/ow").meta.has_part == ["demo_000.jsonl", "demo_001.jsonl"]
    write_dataset(root_url + "/ow", make_meta(), one, overwrite=True)
    resolve(root_url + "/ow").invalidate()
    assert resolve(root_url + "/ow").listdir() == ["demo.jsonl", "demo.yaml"]  # stale parts gone


def test_a_failed_write_leaves_nothing(root_url):
    def items():
        for i in range(5):
            yield Item(identifier=f"x{i}", modality="boolean", prompt="p", response="True")
        yield Item(identifier="X0", modality="boolean", prompt="p", response="True")

    with pytest.raises(DatasetError, match="duplicate identifier 'X0'"):
        write_dataset(root_url + "/fail", make_meta(), items(), items_per_part=2)
    location = resolve(root_url + "/fail")
    location.invalidate()
    assert location.listdir() == []


def test_yaml_and_json_parts_are_read(root_url, write_raw):
    write_raw(
        root_url + "/mixed",
        {
            "demo_000.jsonl": jsonl([item("a")]),
            "demo_001.json": json.dumps([item("b")]),
            "demo_002.yaml": (
                "- identifier: c\n  modality: boolean\n  prompt: p\n  response: 'False'\n"
            ),
        },
    )
    items = list(read_dataset(root_url + "/mixed").iter_items())
    assert [i.identifier for i in items] == ["a", "b", "c"]


@pytest.mark.parametrize("batch", [3, 8192])
def test_duplicate_ids_name_every_later_copy_and_its_first_place(monkeypatch, batch):
    """The batched checker agrees with a plain dict: every later copy (case-insensitive) is
    reported once, naming the place of the first copy, across batches and files."""
    import random

    from itemeval.datasets.format import Where
    from itemeval.datasets.format._directory import DuplicateIds

    monkeypatch.setattr(DuplicateIds, "BATCH", batch)
    rng = random.Random(7)
    names = [rng.choice(["q", "Q"]) + str(rng.randrange(40)) for _ in range(200)]
    ids, found, expected, first = DuplicateIds(), [], [], {}
    for line, name in enumerate(names, 1):
        where = Where(f"part{line // 50}.jsonl", line=line)
        found += ids.check(name, where, "boolean")
        key = name.casefold()
        if key in first:
            expected.append((line, first[key]))
        else:
            first[key] = f"part{line // 50}.jsonl:{line}"
    found += ids.finish()
    assert [(p.line, p.message.split("already used at ")[1].split(" ")[0]) for p in found] == (
        expected
    )
    counts = Counter({"boolean": len(names)})
    ids.uncount(counts)
    assert counts == Counter({"boolean": len(first)})
