"""An adaptive condition in a study run (in-process simulator): the demo's weakest model answers
at most 30% of its items, its predicted full accuracy holds the full run's, and the later full
run pays only for the items it did not answer."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow.compute as pc
import pytest

from itemeval.api import Study
from itemeval.config import load_study
from itemeval.errors import InputError
from itemeval.irt import read_adaptive, run_adaptive, study_responses
from itemeval.planning import make_plan
from itemeval.report import write_report
from itemeval.runtime import run_study
from tests.export.export_studies import DEMO, INLINE, write_study

ADAPTIVE = {"max_share": 0.3, "target_se": 0.03, "seed": 0}


def demo_study(folder: Path, models: list[str], **adaptive: object) -> Path:
    data = {
        **{k: v for k, v in DEMO.items() if k != "graders"},
        "endpoints": {"sim": {"kind": "sim", "max_concurrency": 64}},
        # the verifiable scorer only (capitals-short needs a judge): fast
        "datasets": [d for d in DEMO["datasets"] if d["name"] != "capitals-short"],
        "facets": {"prompt": DEMO["facets"]["prompt"], "replications": 1, "scorer": ["auto"]},
        "models": [
            {"id": f"sim/{m}", "endpoint": "sim", "name": m}
            | ({"adaptive": ADAPTIVE | adaptive} if m == "weak" else {})
            for m in models
        ],
    }
    return write_study(folder, data)


def accuracy_of(path: Path) -> dict[str, tuple[float, int]]:
    table, _, _ = study_responses(make_plan(load_study(path), with_pending=False), hashed=False)
    out = {}
    for slug in set(table.column("slug").to_pylist()):
        rows = table.filter(pc.equal(table.column("slug"), slug))
        k, n = pc.sum(rows.column("correct")).as_py(), pc.sum(rows.column("trials")).as_py()
        out[slug] = (k / n, rows.num_rows)
    return out


def check_adaptive_then_full(path: Path, method: str, again: str | None = None) -> None:
    study = load_study(path)
    items = make_plan(study, with_pending=False).items.num_rows
    costs = Study.from_yaml(path).estimate().adaptive  # what `itemeval estimate` prints
    assert len(costs) == 2
    for cost in costs:  # 30% of the items: 30% of the full run's cost
        assert cost["adaptive_remaining_cells"] == round(0.3 * items)
        assert 0 < cost["adaptive_remaining_usd"] <= 0.31 * cost["full_remaining_usd"]
    runs: list[tuple[float, float]] = []  # each round's allowance base and what it spent

    def recording(study, options, **kwargs):
        outcome = run_study(study, options, **kwargs)
        runs.append((options.spent_before, outcome.spent_usd))
        return outcome

    first = run_adaptive(study, INLINE, recording)
    assert first.status == "completed", first.message
    assert "a prediction" in first.message
    # the cap: one allowance over the rounds (each runs under max_usd less what those before spent)
    assert len(runs) >= 2 and all(spent > 0 for _, spent in runs)
    for number, (before, _) in enumerate(runs):
        assert before == pytest.approx(sum(spent for _, spent in runs[:number]))
    results = {r["slug"]: r for r in read_adaptive(make_plan(study, with_pending=False))}
    report = write_report(make_plan(study, with_pending=False), str(path.parent / "report"))
    page = Path(report.markdown).read_text()
    assert "### Adaptive runs: predicted accuracy" in page and "A prediction, not a" in page
    answered = accuracy_of(path)
    weak = [s for s in answered if s.startswith("weak")]
    assert len(weak) == 2 and set(results) == set(weak)
    table, _, _ = study_responses(make_plan(study, with_pending=False), hashed=False)
    per_dataset = make_plan(study, with_pending=False).items.column("dataset").value_counts()
    sizes = {d["values"]: d["counts"] for d in per_dataset.to_pylist()}
    for slug in weak:  # stratified: each dataset answered in proportion to its size (+-2)
        rows = table.filter(pc.equal(table.column("slug"), slug))
        for entry in rows.column("dataset").value_counts().to_pylist():
            share = answered[slug][1] / items
            assert abs(entry["counts"] - share * sizes[entry["values"]]) <= 2, entry
    for slug in weak:
        used = answered[slug][1]  # items with a stored grade: physical truth, not the summary
        assert results[slug]["answered"] == used <= 0.3 * items
        assert results[slug]["method"] == method
    # resume: the same command again replays the rounds from the stored answers, calls nothing
    # (also with `--condition` naming only the adaptive ones: the calibration is still read)
    rerun = run_study(study, replace(INLINE, condition=again))
    assert rerun.status == "nothing_to_do" and rerun.message.endswith(first.message[-200:])
    assert read_adaptive(make_plan(study, with_pending=False)) == list(results.values())
    # the later full run answers the rest, and only the rest (every paid answer reused)
    full = run_study(study, replace(INLINE, adaptive=False))
    assert full.status == "completed", full.message
    paid = sum(answered[s][1] for s in weak)
    assert full.stages["generate"].counts.planned == 2 * items - paid
    after = accuracy_of(path)
    for slug in weak:
        accuracy, n = after[slug]
        assert n == items
        assert results[slug]["low"] <= accuracy <= results[slug]["high"], (slug, accuracy)


def test_the_demos_weakest_model_adaptively_then_fully(tmp_path: Path):
    # 4 calibrating conditions (strong, medium x 2 prompts): the 2PL bank is used
    path = demo_study(tmp_path, ["strong", "medium", "weak"])
    check_adaptive_then_full(path, "irt", again="weak*")


def test_with_too_few_calibrating_conditions_the_run_takes_a_stratified_sample(tmp_path: Path):
    # 2 calibrating conditions (medium x 2 prompts): too thin, a stratified sample
    check_adaptive_then_full(demo_study(tmp_path, ["medium", "weak"]), "sample")


def test_a_calibration_store_without_responses_is_refused_before_anything_runs(tmp_path: Path):
    path = demo_study(tmp_path, ["strong", "weak"], calibration=str(tmp_path / "elsewhere"))
    with pytest.raises(InputError) as caught:
        run_study(load_study(path), INLINE)
    problem = caught.value.problems[0]
    assert problem.field == "models[1].adaptive.calibration" and "analyze irt" in problem.hint
    assert not (tmp_path / "store").exists()  # nothing written


def test_generate_alone_leaves_the_adaptive_conditions_for_a_run_with_grades(tmp_path: Path):
    study = load_study(demo_study(tmp_path, ["strong", "weak"]))
    outcome = run_study(study, replace(INLINE, stages=("generate",)))
    assert "Adaptive: weak_cot_default, weak_direct_default not run" in outcome.message
    pending = make_plan(study).pending_generate
    for condition in pending.masks:  # strong generated, weak not at all
        assert pending.count(condition) == (
            pending.masks[condition].size if "weak" in condition else 0
        )
