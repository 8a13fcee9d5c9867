"""The collector's pace during a run, and the caller's pace after it (a notebook that runs a
study keeps its own); freed pages handed back only after a large scan."""

from __future__ import annotations

import gc

from runtime_files import write_study

from itemeval._util.heap import RUN_THRESHOLDS, run_collector_pace
from itemeval.config import load_study
from itemeval.planning import _plan as planning
from itemeval.runtime import RunOptions, run_study
from itemeval.runtime import _driver as driver


def test_the_run_pace_holds_inside_the_block_and_the_callers_comes_back():
    before = gc.get_threshold()
    with run_collector_pace():
        assert gc.get_threshold() == RUN_THRESHOLDS
    assert gc.get_threshold() == before


def test_a_run_leaves_the_callers_pace_as_it_found_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "default-cache"))
    before = gc.get_threshold()
    gc.set_threshold(1234, 5, 6)
    try:
        study = load_study(write_study(tmp_path, **{"facets.grader": [], "budget.dev_items": 2}))
        outcome = run_study(study, RunOptions(no_ray=True, yes=True, quiet=True))
        assert outcome.exit_code == 0
        assert gc.get_threshold() == (1234, 5, 6)
    finally:
        gc.set_threshold(*before)


def test_pages_are_handed_back_only_after_a_large_scan(tmp_path, monkeypatch):
    # A release costs tens of ms: a small run must not pay it before its first call.
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "default-cache"))
    calls: list[str] = []
    monkeypatch.setattr(planning, "release_unused_memory", lambda: calls.append("release"))
    monkeypatch.setattr(driver, "release_unused_memory", lambda: calls.append("release"))
    monkeypatch.setattr(planning, "trim_heap", lambda: calls.append("trim"))
    study = load_study(write_study(tmp_path, **{"facets.grader": [], "budget.dev_items": 2}))
    options = RunOptions(no_ray=True, yes=True, quiet=True, stages=("generate",), limit=1)
    assert run_study(study, options).exit_code == 0
    assert calls == []
    monkeypatch.setattr(planning, "TRIM_AFTER_ITEMS", 2)  # the sample datasets are "large" now
    assert run_study(study, RunOptions(no_ray=True, yes=True, quiet=True)).exit_code == 0
    releases = [c for c in calls if c == "release"]
    # after planning's scan and after its index is merged, after the gate, after the commit,
    # before the grade set
    assert len(releases) == 5
    # the scan trims after each batch once it is large (the sample datasets: a batch each)
    assert "trim" in calls[: calls.index("release")]
