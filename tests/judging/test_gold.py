"""Gold labels: read from CSV or JSON Lines, tied to the very answer they judge; the stratified
labelling sample."""

from __future__ import annotations

import numpy as np
import pytest

from itemeval.errors import InputError
from itemeval.judging import Shape, read_label_rows, resolve_labels, sample_rows, write_labels_file
from itemeval.judging._gold import parse_verdict

SHAPE = Shape(gens=2, items=3, epochs=2)
# Current answers: (gen, item, epoch, text_hash); gen 0 and 1 wrote the same text for item 1.
ANSWERS = (
    np.array([0, 0, 1, 1]),
    np.array([0, 1, 1, 2]),
    np.array([0, 1, 1, 0]),
    np.array(["h-a", "h-same", "h-same", "h-c"], dtype=object),
)


def resolve(text: str, source: str = "labels.csv"):
    return resolve_labels(
        read_label_rows(text, source),
        source,
        conditions={"gen-a--111": 0, "gen-a": 0, "gen-b--222": 1, "gen-b": 1},
        items={"q0": 0, "q1": 1, "q2": 2},
        epochs=2,
        answers=ANSWERS,
        keys_of=SHAPE.keys,
    )


def test_labels_by_condition_by_hash_stale_and_unmatched() -> None:
    text = (
        "item_id,condition,epoch,answer_hash,verdict\n"
        "q0,gen-a,0,,pass\n"  # by condition and epoch
        "q1,,,h-same,fail\n"  # by hash: both conditions' identical answers
        "q2,gen-b--222,0,h-old,pass\n"  # the answer was generated again since: stale
        "q9,gen-a,0,,pass\n"  # not in the selection
        "q2,gen-b,1,,\n"  # not labelled yet
    )
    labels = resolve(text)
    assert labels.rows == 4 and labels.stale == 1 and labels.unmatched == 1
    expected = {
        int(SHAPE.keys(np.array([0]), np.array([0]), np.array([0]))[0]): 1.0,
        int(SHAPE.keys(np.array([0]), np.array([1]), np.array([1]))[0]): 0.0,
        int(SHAPE.keys(np.array([1]), np.array([1]), np.array([1]))[0]): 0.0,
    }
    assert dict(zip(labels.keys.tolist(), labels.verdicts.tolist(), strict=True)) == expected
    jsonl = '{"item_id": "q0", "condition": "gen-a", "epoch": 0, "verdict": true}\n'
    assert resolve(jsonl, "labels.jsonl").verdicts.tolist() == [1.0]


def test_a_bad_label_names_the_file_line_and_field() -> None:
    with pytest.raises(InputError, match=r"labels.csv:3.*verdict") as caught:
        resolve("item_id,condition,epoch,verdict\nq0,gen-a,0,pass\nq1,gen-a,1,maybe\n")
    assert caught.value.exit_code == 2
    with pytest.raises(InputError, match=r"labels.csv:2.*condition"):
        resolve("item_id,condition,epoch,verdict\nq0,nope,0,pass\n")
    with pytest.raises(InputError, match="header"):
        resolve("q0,gen-a,0,pass\n")
    assert parse_verdict(" Yes ", None) == 1.0  # type: ignore[arg-type]


def test_the_sample_is_stratified_and_the_file_has_an_empty_verdict_column() -> None:
    strata = np.array(["a"] * 900 + ["b"] * 90 + ["c"] * 10)
    chosen = sample_rows(strata, 100, seed=1)
    assert len(chosen) == 100 and len(set(chosen.tolist())) == 100
    counts = {s: int((strata[chosen] == s).sum()) for s in "abc"}
    assert counts == {"a": 90, "b": 9, "c": 1}
    assert np.array_equal(chosen, sample_rows(strata, 100, seed=1))
    text = write_labels_file([{"item_id": "q0", "answer": "Paris, I think", "verdict": ""}])
    header, row = text.decode().splitlines()
    assert header.endswith(",verdict") and row.endswith(",")
