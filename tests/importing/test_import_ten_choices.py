"""An imported sample with six to 26 choices and a letter for its reference (MMLU-Pro: ten
options, A-J) becomes a `choiceofN` item with its choices, not free text."""

from __future__ import annotations

import json
from pathlib import Path

from itemeval.datasets.format import read_dataset
from itemeval.importing import import_sources


def _line(sample_id: str, choices: list[str], reference: str) -> dict:
    lettered = "\n".join(f"{'ABCDEFGHIJ'[i]}. {c}" for i, c in enumerate(choices))
    return {
        "schema_version": "0.3.0",
        "evaluation_id": "mmlu_pro/org_model/1",
        "model_id": "org/model",
        "evaluation_name": "mmlu_pro",
        "sample_id": sample_id,
        "interaction_type": "single_turn",
        "input": {
            "raw": f"Question {sample_id}?\n{lettered}",
            "reference": [reference],
            "choices": choices,
        },
        "output": {"raw": [f"ANSWER: {reference}"]},
        "answer_attribution": [],
        "evaluation": {"score": 1.0, "is_correct": True},
    }


def test_ten_options_with_a_letter_reference_import_as_choiceof10(tmp_path: Path):
    ten = [f"option {i}" for i in range(10)]
    source = tmp_path / "mmlu_pro_samples.jsonl"
    lines = [_line("q1", ten, "J"), _line("q2", ten[:6], "F"), _line("q3", ten[:4], "B")]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    # an instance file is imported with its aggregate (beside it: `<name>.json`)
    aggregate = {
        "schema_version": "0.3.0",
        "evaluation_id": "mmlu_pro/org_model/1",
        "model_info": {"name": "model", "id": "org/model"},
        "eval_library": {"name": "lm_eval", "version": "0.4.13"},
        "evaluation_results": [
            {"evaluation_name": "mmlu_pro", "metric_config": {"metric_name": "acc"}}
        ],
    }
    (tmp_path / "mmlu_pro.json").write_text(json.dumps(aggregate))
    result = import_sources(str(tmp_path / "store"), [str(source)])
    assert result.samples == 3 and not result.rejected
    (folder,) = (tmp_path / "store" / "imported" / "datasets").iterdir()
    items = {i.identifier: i for i in read_dataset(str(folder)).iter_items()}
    ids = "lm_eval.mmlu_pro~"  # items keyed by their benchmark
    assert {k: (i.modality.value, i.response) for k, i in items.items()} == {
        ids + "q1": ("choiceof10", "J"),
        ids + "q2": ("choiceof6", "F"),
        ids + "q3": ("choiceof4", "B"),
    }
    first = items[ids + "q1"]
    assert first.extras["choices"] == ten and "modalityAssumed" not in first.extras
