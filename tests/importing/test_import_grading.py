"""Imported answers are first-class: a study grades them with a new judge and a scorer, and the
simulated provider is asked for judge answers only (0 generate calls, counted at the server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from itemeval import Study
from itemeval.importing import import_sources

REPO = Path(__file__).resolve().parents[2]
ITEMS = 12
DATASET = "lm_eval.bench"  # items are keyed by benchmark: the library and its dataset


def _records(folder: Path) -> Path:
    folder.mkdir(parents=True)
    aggregate = {
        "schema_version": "0.3.0",
        "evaluation_id": "bench/org_model/1",
        "retrieved_timestamp": "1760000000",
        "source_metadata": {
            "source_type": "evaluation_run",
            "source_organization_name": "test",
            "evaluator_relationship": "third_party",
        },
        "eval_library": {"name": "lm_eval", "version": "0.4.9"},
        "model_info": {"name": "model", "id": "org/model", "additional_details": {}},
        "evaluation_results": [
            {
                "evaluation_name": "bench",
                "source_data": {"dataset_name": "bench", "source_type": "other"},
                "metric_config": {"lower_is_better": False, "metric_name": "exact_match"},
                "score_details": {"score": 0.5},
                "generation_config": {
                    "generation_args": {
                        "temperature": 0.0,
                        # the tool's own template language: the estimate must not render it
                        "prompt_template": "Problem: {{problem}}\n\nSolution:",
                    }
                },
            }
        ],
    }
    (folder / "a.json").write_text(json.dumps(aggregate))
    lines = []
    for n in range(ITEMS):
        answer = f"Paris {n}" if n % 2 else "I do not know"
        lines.append(
            {
                "schema_version": "0.3.0",
                "evaluation_id": "bench/org_model/1",
                "model_id": "org/model",
                "evaluation_name": "bench",
                "sample_id": f"q{n}",
                "interaction_type": "single_turn",
                "input": {"raw": f"Name the capital number {n}.", "reference": [f"Paris {n}"]},
                "output": {"raw": [answer]},
                "answer_attribution": [],
                "evaluation": {"score": float(n % 2), "is_correct": bool(n % 2)},
            }
        )
    (folder / "a_samples.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return folder


@pytest.fixture
def sim_url():
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "itemeval.cli.sim", "--port", "0", "--latency-ms", "1"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = ""
    for _ in range(50):  # anything the server prints before it listens is skipped
        line = proc.stdout.readline()
        if line.startswith("listening on ") or (not line and proc.poll() is not None):
            break
    assert line.startswith("listening on "), line
    yield line.split("listening on ", 1)[1].strip()
    proc.terminate()
    proc.wait(timeout=10)


def test_a_new_judge_grades_imported_answers_with_no_generate_call(tmp_path: Path, sim_url: str):
    store = tmp_path / "store"
    result = import_sources(str(store), [str(_records(tmp_path / "src"))])
    assert result.samples == ITEMS
    study = Study.from_dict(
        {
            "study": "graded-imports",
            "store": str(store),
            "datasets": [{"name": DATASET, "path": str(store / "imported/datasets" / DATASET)}],
            "endpoints": {"sim": {"kind": "sim", "base_url": f"{sim_url}/v1"}},
            "models": [{"id": "sim/strong", "endpoint": "sim"}],
            "facets": {
                "replications": 2,  # the import has epoch 0 only: epoch 1 is never generated
                "scorer": ["exact_match"],
                "grader": ["judge"],
                "rubric": ["builtin:correctness"],
            },
            "graders": {"judge": {"model": "sim/judge", "endpoint": "sim", "max_tokens": 300}},
            "imported": ["*"],
            "cache": {"enabled": False},
        }
    )
    summary = study.run(in_process=True, yes=True, quiet=True)  # generate, then grade
    assert summary.exit_code == 0, summary.message
    with urllib.request.urlopen(f"{sim_url}/_sim/stats", timeout=10) as response:
        stats = json.loads(response.read())
    rows = study.results().to_pylist()
    # physical truth at the server: the study's own model answered each item once per epoch,
    # the judge graded those and the imported answers, each distinct request once (an imported
    # answer equal to the study model's answer of the same item and epoch is one request);
    # the imported model was never asked
    judged = [r for r in rows if r["grader"] == "judge"]
    assert len(judged) == 3 * ITEMS
    distinct = {(r["item_id"], r["epoch"], r["solution_text"]) for r in judged}
    assert stats["ok_by_model"] == {"sim/strong": 2 * ITEMS, "sim/judge": len(distinct)}
    assert stats["requests"] == 2 * ITEMS + len(distinct)
    imported_id = result.generate[0]["id"]
    imported_grader = result.grade[0]["id"]
    mine = [r for r in rows if r["gen_condition_id"] == imported_id]
    # the source's own grades (its exact_match) beside the study's scorer and judge
    assert {r["grade_condition_id"] for r in mine} >= {imported_grader}
    assert {r["grader"] for r in mine} == {"judge", "exact_match"}
    assert len(mine) == 3 * ITEMS and all(r["graded"] for r in mine)
    for grader in {r["grade_condition_id"] for r in mine if r["grader"] == "exact_match"}:
        scorer = {r["item_id"]: r["correct"] for r in mine if r["grade_condition_id"] == grader}
        assert scorer == {f"{DATASET}~q{n}": bool(n % 2) for n in range(ITEMS)}
    # the headline is the imported grades (the study's first grader): the native condition,
    # which the source never graded, is ranked below with n/a, its own graders beside
    board = [line.split() for line in study.leaderboard().splitlines()]
    rows = [line for line in board if line and line[0].isdigit()]
    assert rows[0][2] == imported_id.split("--")[0] and rows[0][6] == "0.500"
    assert rows[1][2] == "sim-strong_direct_default" and rows[1][6] == "n/a"
