"""The estimate (tokens, USD, remaining vs stored) and the confirmation gate."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from study_files import variant, write_study

from itemeval.cli.main import main
from itemeval.config import Budget, load_study
from itemeval.errors import BudgetExceeded, GateDeclined
from itemeval.planning import _estimate as estimate
from itemeval.planning import gate, make_plan


def test_estimate_counts_cells_tokens_and_usd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = make_plan(load_study(write_study(tmp_path)))
    est = plan.estimate
    assert est.items == 10  # dev policy: first 5 of each of the two datasets
    generate = [line for line in est.lines if line.stage == "generate"]
    assert len(generate) == 8
    assert all(line.cells == 10 * 3 for line in generate)
    assert all(line.input_tokens > 0 and line.usd > 0 for line in generate)
    # no store yet: everything remains
    assert est.remaining_usd == pytest.approx(est.total_usd)
    by_stage = est.by("stage")
    assert set(by_stage) == {"generate", "grade"}
    judge = next(line for line in est.lines if line.condition == "judge_correctness")
    assert judge.cells == 8 * 10 * 3 and judge.usd > 0
    scorer = next(line for line in est.lines if line.condition == "auto")
    assert scorer.usd == 0 and scorer.cells == 240


def test_stored_rows_are_not_counted_as_remaining(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = load_study(write_study(tmp_path))
    plan = make_plan(study)
    cond = plan.design.generate[0]
    items = plan.items.column("item_id").to_pylist()
    rows = _solution_rows(cond, [(item, epoch) for item in items for epoch in range(3)])
    plan.store.write("solutions", cond.id, rows)
    again = make_plan(study)
    line = next(line for line in again.estimate.lines if line.condition_id == cond.id)
    assert line.remaining_cells == 0 and line.remaining_usd == 0
    assert line.usd > 0
    other = next(line for line in again.estimate.lines if line.condition_id != cond.id)
    assert other.remaining_cells == other.cells
    judge = next(line for line in again.estimate.lines if line.condition == "judge_correctness")
    assert judge.remaining_cells == judge.cells  # stored solutions still need grading
    assert again.estimate.remaining_usd < again.estimate.total_usd


def test_estimate_json_and_text(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = write_study(tmp_path, variant(**{"budget.confirm_above_usd": 0.0001}))
    assert main(["estimate", str(path), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["items"] == 10 and payload["remaining_usd"] > 0
    assert set(payload["by_model"]) == {"sim/strong", "sim/weak", "sim/judge", "auto"}
    assert payload["gate"].startswith("needs confirmation")
    assert main(["estimate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "remaining USD" in out and "By model" in out and "needs confirmation" in out


def test_limit_overrides_dev_items(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = make_plan(load_study(write_study(tmp_path)), limit=2)
    assert plan.item_count == 4
    full = make_plan(load_study(write_study(tmp_path, variant(**{"budget.policy": "full"}))))
    assert full.item_count == 33 + 28


class TestGate:
    def test_under_thresholds_passes(self):
        gate(1.0, Budget(confirm_above_usd=5, max_usd=10), yes=False, interactive=False)

    def test_confirmation_needed_without_yes_is_declined(self):
        with pytest.raises(GateDeclined) as info:
            gate(6.0, Budget(confirm_above_usd=5), yes=False, interactive=False)
        assert info.value.exit_code == 3 and "--yes" in str(info.value)

    def test_yes_flag_and_interactive_yes_pass(self):
        gate(6.0, Budget(confirm_above_usd=5), yes=True, interactive=False)
        gate(6.0, Budget(confirm_above_usd=5), yes=False, interactive=True, ask=lambda q: "y")

    def test_interactive_no_declines(self):
        with pytest.raises(GateDeclined):
            gate(6.0, Budget(confirm_above_usd=5), yes=False, interactive=True, ask=lambda q: "")

    def test_over_max_usd_nothing_overrides(self):
        with pytest.raises(BudgetExceeded) as info:
            gate(
                11.0,
                Budget(confirm_above_usd=5, max_usd=10),
                yes=True,
                interactive=True,
                ask=lambda q: "yes",
            )
        assert info.value.exit_code == 4 and "max_usd" in str(info.value)


def test_plan_prints_grid(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", str(write_study(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "strong_terse_t07--61e3e2e3d6d4" in out
    assert "judge_correctness--aee643dc9ac8" in out
    assert "generate 8 conditions x 10 items x 3 epochs = 240" in out


def test_init_writes_a_study_that_plans(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_study(tmp_path)  # provides datasets/arithmetic next to it
    target = tmp_path / "new.yaml"
    assert main(["init", str(target)]) == 0
    assert main(["init", str(target)]) == 2  # refuses to overwrite
    assert main(["plan", str(target)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    ("endpoint", "warned"),
    [
        ({"kind": "openai", "base_url": "http://127.0.0.1:8000/v1"}, False),  # loopback
        (
            {"kind": "openai", "base_url": "https://vllm.lab:8000/v1", "self_hosted": True},
            False,
        ),
        ({"kind": "openai", "base_url": "https://api.example.com/v1", "api_key_env": "K"}, True),
    ],
)
def test_unpriced_models_of_own_servers_cost_nothing_without_a_warning(
    tmp_path, monkeypatch, endpoint, warned
):
    monkeypatch.chdir(tmp_path)
    data = variant(
        **{
            "endpoints": {"own": endpoint, "sim": {"kind": "sim"}},
            "models": [{"id": "mock-model", "endpoint": "own"}],
        }
    )
    estimate = make_plan(load_study(write_study(tmp_path, data))).estimate
    warnings = [w for w in estimate.warnings if "mock-model" in w]
    assert bool(warnings) is warned
    if warned:
        assert "self_hosted: true" in warnings[0]
    generate = [line for line in estimate.lines if line.stage == "generate"]
    assert all(line.usd == 0 for line in generate)


def test_the_estimate_made_a_slice_of_items_at_a_time_is_the_whole_estimate(tmp_path, monkeypatch):
    # The per-item arrays exist a slice at a time (memory at a million items): the figures,
    # remaining ones included, must not depend on where the slices fall.
    monkeypatch.chdir(tmp_path)
    study = load_study(write_study(tmp_path))
    plan = make_plan(study)
    cond = plan.design.generate[0]
    items = plan.items.column("item_id").to_pylist()
    stored = [(item, epoch) for n, item in enumerate(items[:7]) for epoch in range(n % 3 + 1)]
    plan.store.write(
        "solutions",
        cond.id,
        _solution_rows(cond, stored, usage=lambda item: (50 + len(item), 30)),
    )
    whole = make_plan(study).estimate
    monkeypatch.setattr(estimate, "ESTIMATE_SLICE", 3)
    sliced = make_plan(study).estimate
    assert whole.lines[0].remaining_cells < whole.lines[0].cells  # some cells are stored
    _assert_same_lines(sliced.lines, whole.lines)


def _solution_rows(cond, cells, usage=None) -> list[dict]:
    """`ok` solution rows of `cond` for `(item, epoch)` cells; `usage(item)` gives their
    (input, output) tokens."""
    rows = []
    for item, epoch in cells:
        row = {
            "item_id": item,
            "epoch": epoch,
            "status": "ok",
            "text": f"answer {item}",
            "model": cond.model_id,
            "run_id": "test",
            "request_hash": f"h-{item}-{epoch}",
        }
        if usage is not None:
            row["input_tokens"], row["output_tokens"] = usage(item)
        rows.append(row)
    return rows


def _assert_same_lines(left, right) -> None:
    for a, b in zip(left, right, strict=True):
        for name, value in asdict(a).items():
            other = asdict(b)[name]
            if isinstance(value, float):
                assert value == pytest.approx(other, rel=1e-9), name
            else:
                assert value == other, name
