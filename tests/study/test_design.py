"""The design grid and condition ids (a contract: stored rows are keyed by these ids)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from study_files import BASE, variant, write_study

from itemeval.config import load_study
from itemeval.errors import InputError
from itemeval.planning import build_design

# Pinned for BASE. If one of these changes, every stored row of that condition is orphaned: only
# change them on purpose (a changed built-in template or scorer version), never by accident.
GOLDEN = {
    "strong_direct_t0": "strong_direct_t0--dd8a8f7a57fa",
    "strong_direct_t07": "strong_direct_t07--b961219f23b3",
    "strong_terse_t0": "strong_terse_t0--440c81350ec1",
    "strong_terse_t07": "strong_terse_t07--61e3e2e3d6d4",
    "weak_direct_t0": "weak_direct_t0--c1e66aabe1f6",
    "weak_direct_t07": "weak_direct_t07--cec268cd79a0",
    "weak_terse_t0": "weak_terse_t0--a308138e3aa8",
    "weak_terse_t07": "weak_terse_t07--cd00dc6312a8",
    "judge_correctness": "judge_correctness--aee643dc9ac8",
    "auto": "auto--58c489581943",
}


def ids(study_path: Path) -> dict[str, str]:
    design = build_design(load_study(study_path))
    return {c.slug: c.id for c in (*design.generate, *design.grade)}


def test_golden_condition_ids(tmp_path):
    assert ids(write_study(tmp_path)) == GOLDEN


def test_id_is_slug_and_sha256_of_canonical_payload(tmp_path):
    design = build_design(load_study(write_study(tmp_path)))
    cond = next(c for c in design.generate if c.slug == "strong_terse_t07")
    terse = (tmp_path / "prompts" / "terse.txt").read_text()
    assert cond.payload["model"] == "sim/strong"
    assert cond.payload["params"] == {"temperature": 0.7, "max_tokens": 256}
    assert cond.payload["prompt"]["name"] == "terse"
    assert cond.prompt.text == terse
    canonical = json.dumps(cond.payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert cond.id == "strong_terse_t07--" + hashlib.sha256(canonical.encode()).hexdigest()[:12]
    judge = next(c for c in design.grade if c.kind == "judge")
    assert judge.payload["grader"]["params"]["temperature"] == 0.0


def test_grid_is_the_full_crossing(tmp_path):
    design = build_design(load_study(write_study(tmp_path)))
    assert len(design.generate) == 2 * 2 * 2  # models x prompts x model configs
    assert [c.kind for c in design.grade] == ["judge", "scorer"]  # graders x rubrics + scorer
    assert design.epochs == 3
    counts = design.cell_counts(10)
    assert counts == {"generate": 8 * 10 * 3, "grade_judge": 240, "grade_scorer": 240}


def test_ids_identical_in_another_process(tmp_path):
    path = write_study(tmp_path)
    code = (
        "import json,sys;from itemeval.config import load_study;"
        "from itemeval.planning._design import build_design;"
        f"d=build_design(load_study({str(path)!r}));"
        "print(json.dumps({c.slug:c.id for c in (*d.generate,*d.grade)}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
    )
    assert json.loads(out.stdout) == GOLDEN


def test_editing_a_prompt_changes_exactly_its_conditions(tmp_path):
    path = write_study(tmp_path)
    before = ids(path)
    (tmp_path / "prompts" / "terse.txt").write_text("{{ input }}\nBe brief.\n")
    after = ids(path)
    changed = {slug for slug in before if before[slug] != after[slug]}
    assert changed == {slug for slug in GOLDEN if "_terse_" in slug}


@pytest.mark.parametrize(
    "changes",
    [
        {"endpoints.sim.requests_per_minute": 10},
        {"endpoints.sim.max_concurrency": 3},
        {"endpoints.sim.timeout_s": 5},
        {"endpoints.sim.max_attempts": 2},
        {"budget.max_usd": 1.0},
        {"budget.confirm_above_usd": 0.5},
        {"budget.policy": "full"},
        {"store": "s3://elsewhere/x"},
        {"runtime": {"shard_size": 7, "workers": 3}},
        {"cache": {"enabled": False}},
        {"study": "renamed"},
    ],
)
def test_execution_knobs_never_change_an_id(tmp_path, changes):
    assert ids(write_study(tmp_path, variant(**changes))) == GOLDEN


def test_content_changes_change_ids(tmp_path):
    changed = ids(write_study(tmp_path, variant(**{"sampling.max_tokens": 512})))
    assert all(changed[s] != GOLDEN[s] for s in GOLDEN if s not in ("auto", "judge_correctness"))
    assert changed["judge_correctness"] == GOLDEN["judge_correctness"]


def test_identical_conditions_are_refused(tmp_path):
    data = variant(**{"facets.model_config": [{"name": "a"}, {"name": "b"}]})
    with pytest.raises(InputError, match="identical content"):
        build_design(load_study(write_study(tmp_path, data)))


def test_condition_selection(tmp_path):
    design = build_design(load_study(write_study(tmp_path)))
    narrowed = design.select("strong_terse_t0")
    assert [c.slug for c in narrowed.generate] == ["strong_terse_t0"]
    assert len(narrowed.grade) == 2
    assert [c.slug for c in design.select("judge_corr").grade] == ["judge_correctness"]
    assert len(design.select("strong_*").generate) == 4
    with pytest.raises(InputError, match="matches no condition"):
        design.select("nope")
    with pytest.raises(InputError, match="matches 4"):
        design.select("strong_")


def test_base_has_no_secrets_or_paths_in_payloads(tmp_path):
    design = build_design(load_study(write_study(tmp_path)))
    text = json.dumps([c.payload for c in (*design.generate, *design.grade)])
    assert str(tmp_path) not in text and "6000" not in text
    assert BASE["study"] not in text


def test_structured_verdicts_keep_the_judge_id_and_turning_them_off_changes_it(tmp_path):
    """Structured output is the default (the golden id above is unchanged by it); a grader that
    asks for text replies is another condition; a judge that thinks on Anthropic answers in
    text (a forced tool cannot be combined with thinking)."""
    design = build_design(load_study(write_study(tmp_path)))
    judge = next(c for c in design.grade if c.kind == "judge")
    assert judge.structured and judge.id == GOLDEN["judge_correctness"]
    text = build_design(
        load_study(write_study(tmp_path, variant(**{"graders.judge.structured": False})))
    )
    text_judge = next(c for c in text.grade if c.kind == "judge")
    assert not text_judge.structured and text_judge.id != judge.id
    assert text_judge.payload["grader"]["verdict"] == "text"
    anthropic = variant(
        **{
            "endpoints.claude": {"kind": "anthropic", "base_url": "http://127.0.0.1:9"},
            "graders.judge": {"model": "claude-x", "endpoint": "claude", "thinking_budget": 2048},
        }
    )
    thinking = build_design(load_study(write_study(tmp_path, anthropic)))
    assert not next(c for c in thinking.grade if c.kind == "judge").structured
