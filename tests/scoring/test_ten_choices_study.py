"""A study over a ten-option dataset (`choiceof10`, letters A-J, like MMLU-Pro) runs end to end
through the simulator with the verifiable scorer alone: no LLM judge is needed, every stored
grade is the simulator's own decision for that call, and each model's accuracy is its known one.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pytest

from itemeval import Study
from itemeval.errors import ConfigError
from itemeval.simulator import DEFAULT_CATALOG, item_difficulty, p_correct, stable_unit

LETTERS = "ABCDEFGHIJ"
ITEMS = 150
EPOCHS = 2
MODELS = ("sim/strong", "sim/weak")
PROMPTS = ("builtin:direct", "builtin:cot")


def _dataset(folder: Path, modality: str = "choiceof10") -> Path:
    """ITEMS ten-option items; every letter A-J is a reference answer, difficulties spread."""
    folder.mkdir(parents=True)
    rows = []
    for i in range(ITEMS):
        options = "\n".join(f"{c}. option {c.lower()} of question {i}" for c in LETTERS)
        rows.append(
            {
                "identifier": f"ten.{i:03d}",
                "modality": modality,
                "prompt": f"Which option answers question {i}?\n{options}",
                "response": LETTERS[i % 10] if modality == "choiceof10" else f"option {i}",
                "difficulty": round((i + 0.5) / ITEMS, 6),
            }
        )
    (folder / "ten.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "ten.yaml").write_text("identifier: ten\nhasPart:\n- ten.jsonl\n")
    return folder


def _study(tmp_path: Path, dataset: Path) -> dict[str, Any]:
    return {
        "study": "ten-choices",
        "datasets": [{"name": "ten", "path": str(dataset)}],
        "endpoints": {"sim": {"kind": "sim", "max_concurrency": 64}},
        "models": [{"id": m, "endpoint": "sim"} for m in MODELS],
        "facets": {"prompt": list(PROMPTS), "replications": EPOCHS, "scorer": ["auto"]},
        "budget": {"policy": "full"},
        "runtime": {"shard_size": 100},
        "store": str(tmp_path / "store"),
        "cache": {"enabled": False},
    }


def _rows(store: Path, stage: str) -> list[dict[str, Any]]:
    """Every row stored for `stage`, read from the fragments as they are (no dedup)."""
    return pads.dataset(store / stage, format="parquet", partitioning="hive").to_table().to_pylist()


def test_a_ten_option_study_needs_no_judge_and_grades_are_the_simulators_truth(tmp_path):
    dataset = _dataset(tmp_path / "ten")
    study = Study.from_dict(_study(tmp_path, dataset))
    plan = study.plan()  # would raise ConfigError if these items needed a judge
    assert plan.cells["grade_judge"] == 0 and not plan.design.judges
    assert dict(plan.plan.datasets[0].modalities) == {"choiceof10": ITEMS}
    summary = study.run(in_process=True, yes=True, quiet=True)
    assert summary.exit_code == 0, summary

    store = tmp_path / "store"
    solutions = _rows(store, "solutions")
    grades = _rows(store, "grades")
    cells = ITEMS * EPOCHS * len(MODELS) * len(PROMPTS)
    assert len(solutions) == len(grades) == cells  # one row a cell, none twice
    assert study.results().num_rows == cells
    conditions = {c.id: (c.model_id, c.prompt.name) for c in plan.design.generate}
    texts = {(r["condition_id"], r["item_id"], r["epoch"]): r["text"] for r in solutions}

    wrong_letters: set[str] = set()
    right = dict.fromkeys(MODELS, 0)
    expected = dict.fromkeys(MODELS, 0.0)
    for row in grades:
        model, prompt = conditions[row["gen_condition_id"]]
        item, epoch = row["item_id"], row["epoch"]
        index = int(item.split(".")[1])
        ability = DEFAULT_CATALOG[model.removeprefix("sim/")].ability
        difficulty = item_difficulty(item, round((index + 0.5) / ITEMS, 6))
        variant = "final-line" if prompt == "builtin:cot" else "direct"
        # the simulator's own decision for this call (simulator/_engine.py, `_solve`)
        key = (0, model.removeprefix("sim/"), item.lower(), epoch)
        truth = stable_unit("correct", *key, variant) < p_correct(ability, difficulty)
        text = texts[(row["gen_condition_id"], item, epoch)]
        assert row["correct"] is truth, (text, LETTERS[index % 10])
        letter = text.strip().split()[-1]  # "J", or "...\n\nANSWER: J"
        assert letter in LETTERS and row["extracted"] == letter
        assert (letter == LETTERS[index % 10]) is truth
        if not truth:
            wrong_letters.add(letter)
        right[model] += truth
        expected[model] += p_correct(ability, difficulty)
    assert wrong_letters == set(LETTERS)  # wrong answers use every letter, F-J included

    trials = cells // len(MODELS)
    for model in MODELS:
        mean = expected[model] / trials
        sigma = math.sqrt(mean * (1 - mean) / trials)
        assert abs(right[model] / trials - mean) < 4 * sigma, (model, right[model], mean)
    assert right["sim/strong"] > right["sim/weak"]


def test_the_same_study_over_prose_items_is_refused_without_a_judge(tmp_path):
    """The contrast: the judge check is live, and choiceof10 items pass it."""
    dataset = _dataset(tmp_path / "ten", modality="short-prose")
    with pytest.raises(ConfigError, match="need an LLM judge"):
        Study.from_dict(_study(tmp_path, dataset)).plan()
