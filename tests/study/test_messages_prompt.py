"""A study with a prompt of several messages: its condition id comes from the file, the estimate
counts every message, and a run sends them (in-process simulator, no Ray)."""

from __future__ import annotations

import json

from study_files import variant, write_study

from itemeval.cli.main import main
from itemeval.config import load_study
from itemeval.planning import build_design, make_plan
from itemeval.planning._tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from itemeval.simulator._engine import count_tokens as sim_tokens
from itemeval.store import StudyStore

EXAMPLES = [
    ("system", "You are a careful solver of quiz questions."),
    ("user", "What is the capital of France? Answer with a single word or value only."),
    ("assistant", "Paris"),
]
FEWSHOT = (
    "messages:\n"
    + "".join(f"  - role: {role}\n    content: {json.dumps(text)}\n" for role, text in EXAMPLES)
    + '  - role: user\n    content: "{{ input }}\\n\\n{{ answer_instructions }}"\n'
)


def _study(tmp_path, **changes):
    path = write_study(
        tmp_path,
        variant(**{"facets.prompt": ["builtin:direct", "fewshot"], "facets.grader": [], **changes}),
    )
    (tmp_path / "prompts" / "fewshot.yaml").write_text(FEWSHOT)
    return path


def test_the_estimate_counts_every_message(tmp_path):
    plan = make_plan(load_study(_study(tmp_path, **{"facets.rubric": []})))
    lines = {line.condition: line for line in plan.estimate.lines if line.stage == "generate"}
    direct, fewshot = lines["strong_direct_t0"], lines["strong_fewshot_t0"]
    # The last message is builtin:direct's text, so the difference is the examples, per item.
    per_item = sum(count_tokens(text) + MESSAGE_OVERHEAD_TOKENS for _, text in EXAMPLES)
    assert direct.cells == fewshot.cells == plan.item_count * 3
    assert fewshot.input_tokens - direct.input_tokens == per_item * fewshot.cells
    assert fewshot.output_tokens == direct.output_tokens


def test_the_prompt_file_is_the_condition_identity(tmp_path):
    path = _study(tmp_path, **{"facets.rubric": []})
    before = {c.slug: c.id for c in build_design(load_study(path)).generate}
    (tmp_path / "prompts" / "fewshot.yaml").write_text(FEWSHOT.replace("Paris", "Paris."))
    after = {c.slug: c.id for c in build_design(load_study(path)).generate}
    assert {s for s in before if before[s] != after[s]} == {s for s in before if "fewshot" in s}
    assert before["strong_direct_t0"] == "strong_direct_t0--dd8a8f7a57fa"  # as in GOLDEN


def test_a_run_sends_the_messages(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _study(tmp_path, **{"facets.rubric": [], "models": [BASE_MODEL], "budget.dev_items": 2})
    assert main(["run", str(path), "--no-ray", "--quiet", "--json", "--yes"]) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert outcome["status"] == "completed"
    # prompts x model configs x (2 datasets x 2 items) x epochs
    assert outcome["stages"]["generate"]["done"] == 2 * 2 * 4 * 3
    # What the simulator billed, as stored: every message of the examples, on every call.
    design = build_design(load_study(path))
    ids = {c.slug: c.id for c in design.generate}
    store = StudyStore.open(outcome["store"])
    tokens = {}
    for slug in ("strong_direct_t0", "strong_fewshot_t0"):
        rows = store.read_solutions([ids[slug]], columns=["item_id", "epoch", "input_tokens"])
        tokens[slug] = {(r["item_id"], r["epoch"]): r["input_tokens"] for r in rows.to_pylist()}
    billed = sum(sim_tokens(text) + 4 for _, text in EXAMPLES)
    assert len(tokens["strong_fewshot_t0"]) == 12
    for cell, count in tokens["strong_fewshot_t0"].items():
        assert count - tokens["strong_direct_t0"][cell] == billed


BASE_MODEL = {"id": "sim/strong", "endpoint": "sim", "name": "strong"}
