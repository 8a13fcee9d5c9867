"""A pairwise judge through a whole study, counted at the sim-server: added over stored answers,
it asks exactly two judge calls per pair (both orders) and no generate call; a re-run asks
nothing. The analysis (Python API) gives the win rate and the position bias from the rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))

import pytest
from runtime_files import sim_server, sim_stats, write_study

from itemeval import Study
from itemeval.config import load_study
from itemeval.errors import ConfigError, ExitCode
from itemeval.runtime import RunOptions, run_study
from itemeval.store import StudyStore

INLINE = RunOptions(no_ray=True, yes=True, quiet=True)
PAIRWISE = {
    "versus": {
        "model": "sim/judge",
        "endpoint": "sim",
        "max_tokens": 200,
        "kind": "pairwise",
        "baseline": "sim/weak",
    }
}


def test_pairwise_costs_two_calls_a_pair_and_nothing_more(tmp_path: Path) -> None:
    with sim_server() as url:
        base = {
            "endpoints.sim": {"kind": "sim", "base_url": url, "max_concurrency": 32},
            "facets.prompt": ["builtin:direct"],
            "facets.grader": [],
            "budget.dev_items": 5,
        }
        first = load_study(write_study(tmp_path, **base))
        assert run_study(first, INLINE).exit_code == ExitCode.OK
        before = sim_stats(url)
        answers = before["requests"]
        pairs = answers // 2  # sim/strong's answers, each against sim/weak's
        path = write_study(tmp_path, **(base | {"facets.grader": ["versus"], "graders": PAIRWISE}))
        assert run_study(load_study(path), INLINE).exit_code == ExitCode.OK
        after = sim_stats(url)
        sent = after["requests"] - before["requests"]
        # Two calls a pair; where both answers are the same text, both orders are the same
        # request, which a run pays once (a contract of the runtime).
        solutions = StudyStore.open(first.store_url).read("solutions").to_pylist()
        by_cell: dict[tuple, set] = {}
        for row in solutions:
            by_cell.setdefault((row["item_id"], row["epoch"]), set()).add(row["text"])
        same = sum(len(texts) == 1 for texts in by_cell.values())
        assert len(by_cell) == pairs and 2 * pairs - same <= sent <= 2 * pairs
        for model in ("sim/strong", "sim/weak"):  # no answer generated again
            assert after["ok_by_model"][model] == before["ok_by_model"][model]
        assert after["ok_by_model"]["sim/judge"] == sent
        assert run_study(load_study(path), INLINE).exit_code == ExitCode.OK
        assert sim_stats(url)["requests"] == after["requests"]  # a re-run: none
        # Another store, the same response cache: answers and verdicts come from the cache.
        elsewhere = write_study(
            tmp_path / "elsewhere",
            **(base | {"facets.grader": ["versus"], "graders": PAIRWISE}),
            **{"cache.location": str(tmp_path / "cache")},
        )
        assert run_study(load_study(elsewhere), INLINE).exit_code == ExitCode.OK
        assert sim_stats(url)["requests"] == after["requests"]
        copied = StudyStore.open(str(tmp_path / "elsewhere" / "store")).read("grades")
        assert sum(g == "sim/judge" for g in copied.column("grader").to_pylist()) == 2 * pairs
        stored = StudyStore.open(first.store_url).read("grades").to_pylist()
        grades = [g for g in stored if g["grader"] == "sim/judge"]
        study = Study.from_yaml(path)
        analysis = study.pairwise()
        exported = study.export(str(tmp_path / "out"))  # every format: parquet, csv, eee
        report = study.report(str(tmp_path / "out"), resamples=50)
        assert sim_stats(url)["requests"] == after["requests"]  # the analysis: none

    assert len(grades) == 2 * pairs  # a row per pair and order, each paid once at most
    assert sum(not g["cached"] for g in grades) == sent
    assert all(g["parse_ok"] and g["score"] in (0.0, 0.5, 1.0) for g in grades)
    assert all(g["usd"] > 0 for g in grades if not g["cached"])  # priced
    (result,) = analysis.results
    assert result.verdicts == 2 * pairs
    assert result.win_rate.value is not None and result.win_rate.value > 0.5  # strong beats weak
    assert analysis.baseline.startswith("sim-weak") or "weak" in analysis.baseline
    written = json.loads(Path(exported.files["pairwise"]).read_text())
    assert written[0]["results"][0]["verdicts"] == 2 * pairs
    assert "## Pairwise" in Path(report.markdown).read_text()
    assert "<table id='pairwise-table'>" in Path(report.html).read_text()
    assert "## Judges" not in Path(report.markdown).read_text()  # not a judge of one answer


@pytest.mark.parametrize(
    ("grader", "panels", "field", "words"),
    [
        ({"kind": "pairwise"}, None, "graders.versus.baseline", "needs a baseline"),
        ({"kind": "pairwise", "baseline": "sim/strog"}, None, "graders.versus.baseline", "strong"),
        ({"baseline": "sim/weak"}, None, "graders.versus.baseline", "only for a pairwise"),
        (
            {"kind": "pairwise", "baseline": "sim/weak"},
            {"jury": {"graders": ["versus", "other"]}},
            "graders.versus",
            "panel",
        ),
    ],
)
def test_a_bad_pairwise_grader_is_refused_by_name(
    tmp_path: Path, grader: dict, panels: dict | None, field: str, words: str
) -> None:
    graders = {
        "versus": {"model": "sim/judge", "endpoint": "sim"} | grader,
        "other": {"model": "sim/judge", "endpoint": "sim", "max_tokens": 100},
    }
    changes = {
        "endpoints.sim": {"kind": "sim", "base_url": "http://127.0.0.1:9/v1"},
        "facets.grader": ["versus", "other"],
        "graders": graders,
    }
    if panels:
        changes["panels"] = panels
    with pytest.raises(ConfigError) as caught:
        load_study(write_study(tmp_path, **changes))
    assert caught.value.exit_code == ExitCode.BAD_INPUT
    found = [p for p in caught.value.problems if p.field == field]
    assert found and words in f"{found[0].message} {found[0].hint}", caught.value.problems


def test_pairwise_calls_stay_within_the_cap(tmp_path: Path, monkeypatch) -> None:
    """Under `max_usd` half of what the pairwise calls cost, the run stops at the cap: what the
    server answered and what is stored never exceed it. (The estimate would refuse the run: the
    gate is passed by, so that the in-run cap alone holds it.)"""
    monkeypatch.setattr("itemeval.runtime._driver.gate", lambda *args, **kwargs: "--yes")
    base = {
        "facets.prompt": ["builtin:direct"],
        "facets.grader": [],
        "budget.dev_items": 5,
        "runtime.shard_size": 2,
    }
    pairwise = {"facets.grader": ["versus"], "graders": PAIRWISE}
    with sim_server() as url:
        sim = {"endpoints.sim": {"kind": "sim", "base_url": url, "max_concurrency": 2}}
        free = tmp_path / "free"
        assert (
            run_study(load_study(write_study(free, **(base | sim))), INLINE).exit_code
            == ExitCode.OK
        )
        done = run_study(load_study(write_study(free, **(base | sim | pairwise))), INLINE)
        assert done.exit_code == ExitCode.OK
        grades = StudyStore.open(str(free / "store")).read("grades").to_pylist()
        full = sum(g["usd"] for g in grades if g["grader"] == "sim/judge")
        capped = tmp_path / "capped"
        assert (
            run_study(load_study(write_study(capped, **(base | sim))), INLINE).exit_code
            == ExitCode.OK
        )
        before = sim_stats(url)["ok_by_model"]["sim/judge"]
        cap = {"budget.max_usd": full / 2}
        outcome = run_study(
            load_study(write_study(capped, **(base | sim | pairwise | cap))), INLINE
        )
        sent = sim_stats(url)["ok_by_model"]["sim/judge"] - before
    assert outcome.status == "budget_cap", outcome.message
    stored = StudyStore.open(str(capped / "store")).read("grades").to_pylist()
    spent = sum(g["usd"] for g in stored if g["grader"] == "sim/judge")
    assert 0 < spent <= full / 2 and 0 < sent < 2 * 20


def test_a_pairwise_grader_is_two_conditions_that_skip_the_baseline(tmp_path: Path) -> None:
    from itemeval.planning import build_design

    path = write_study(
        tmp_path,
        **{
            "endpoints.sim": {"kind": "sim", "base_url": "http://127.0.0.1:9/v1"},
            "facets.grader": ["versus"],
            "graders": PAIRWISE,
        },
    )
    design = build_design(load_study(path))
    first, second = design.pairwise
    assert first.pairwise is not None and second.pairwise is not None
    assert first.pairwise.condition_first and not second.pairwise.condition_first
    assert first.id != second.id and first.slug.endswith("condition-first")
    weak = {g.id for g in design.generate if g.model_id == "sim/weak"}
    assert set(first.pairwise.baselines.values()) == weak  # per prompt: that prompt's baseline
    graded = [g for g in design.generate if design.grades(first, g.id)]
    assert graded and all(g.model_id == "sim/strong" for g in graded)
    per_condition = 100 * design.epochs
    assert design.cell_counts(100)["grade_judge"] == 2 * len(graded) * per_condition
