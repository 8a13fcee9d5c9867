"""Panels and gold through a whole study, counted at the sim-server: adding three judges and a
panel over stored answers asks exactly one judge call per judge and answer and no generate call;
the panel asks nothing; a re-run asks nothing. The analysis (report, export, Python API) shows
the panel and every judge against gold, from a scorer and from a labels file."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))

from runtime_files import sim_server, sim_stats, write_study

from itemeval import Study
from itemeval.config import load_study
from itemeval.errors import ExitCode
from itemeval.runtime import RunOptions, run_study
from itemeval.store import StudyStore

INLINE = RunOptions(no_ray=True, yes=True, quiet=True)
JUDGES = {
    "judge": {"model": "sim/judge", "endpoint": "sim", "max_tokens": 200},
    "judge-medium": {"model": "sim/medium", "endpoint": "sim", "max_tokens": 200},
    "judge-weak": {"model": "sim/weak", "endpoint": "sim", "max_tokens": 200},
}


def test_a_panel_costs_its_judges_calls_and_nothing_more(tmp_path: Path) -> None:
    with sim_server() as url:
        base = {
            "endpoints.sim": {"kind": "sim", "base_url": url, "max_concurrency": 32},
            "facets.prompt": ["builtin:direct"],
            "facets.grader": [],
            "budget.dev_items": 5,
        }
        answers = 2 * 10 * 2  # models x items x epochs
        first = load_study(write_study(tmp_path, **base))
        assert run_study(first, INLINE).exit_code == ExitCode.OK
        before = sim_stats(url)
        assert before["requests"] == answers
        panel = {
            **base,
            "facets.grader": list(JUDGES),
            "graders": JUDGES,
            "panels": {"jury": {"graders": list(JUDGES), "combine": "majority"}},
            "gold": {"scorer": "auto"},
        }
        path = write_study(tmp_path, **panel)
        assert run_study(load_study(path), INLINE).exit_code == ExitCode.OK
        after = sim_stats(url)
        # One call per judge and distinct request: answers of equal text to an item in an epoch
        # (two models agreeing) share their judge's call (a contract of the runtime).
        store = StudyStore.open(first.store_url)
        stored = store.read("solutions", columns=["item_id", "epoch", "text"]).to_pylist()
        distinct = {(r["item_id"], r["epoch"], r["text"]) for r in stored}
        assert len(stored) == answers and len(distinct) < answers
        assert after["requests"] - before["requests"] == 3 * len(distinct)
        for model in ("sim/strong", "sim/weak"):  # no answer generated again
            solved = before["ok_by_model"][model]
            judged = 0 if model == "sim/strong" else len(distinct)
            assert after["ok_by_model"][model] == solved + judged
        assert run_study(load_study(path), INLINE).exit_code == ExitCode.OK
        # Another store, the same response cache: the structured judge calls (their schema is
        # request content) are answered from the cache, not asked again.
        elsewhere = write_study(
            tmp_path / "elsewhere", **panel, **{"cache.location": str(tmp_path / "cache")}
        )
        assert run_study(load_study(elsewhere), INLINE).exit_code == ExitCode.OK
        study = Study.from_yaml(path)
        analysis = study.judges(resamples=200)
        assert sim_stats(url)["requests"] == after["requests"]  # re-run and analysis: none

    assert analysis is not None
    labels = [j.grader.label for j in analysis.judges]
    assert len(labels) == 4 and labels[-1].startswith("panel: jury (majority of judge")
    assert analysis.gold_source.startswith("scorer auto")
    for judge in analysis.judges:
        overall = judge.calibration.groups[0]
        assert judge.calibration.rates.agreement.n == answers
        assert overall.corrected.low <= overall.gold.value <= overall.corrected.high
    (jury,) = analysis.panels
    assert len(jury.agreement.pairs) == 3 and 1 <= jury.agreement.effective_judges <= 3

    # A person labels a sample; the labels join the gold and win over the scorer.
    sample = study.gold_sample(12, str(tmp_path / "sample.csv"))
    assert sample.rows == 12 and sample.answers == answers
    with open(sample.path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["verdict"] = "fail"  # a deliberately harsh labeller: every label differs from auto
    with open(tmp_path / "labels.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    gold = {"scorer": "auto", "labels": str(tmp_path / "labels.csv")}
    labelled = write_study(tmp_path, **(panel | {"gold": gold}))
    labelled_study = Study.from_yaml(labelled)
    with_labels = labelled_study.judges(resamples=200)
    assert "labels" in with_labels.gold_source and with_labels.gold_answers == answers
    gold_fails = with_labels.judges[0].calibration.rates.specificity.n
    assert gold_fails >= analysis.judges[0].calibration.rates.specificity.n + 1
    exported = labelled_study.export(str(tmp_path / "out"), formats=["csv"])
    written = json.loads(Path(exported.files["judges"]).read_text())
    assert [j["grader"]["kind"] for j in written["judges"]] == ["judge"] * 3 + ["panel"]
    report = labelled_study.report(str(tmp_path / "out"), resamples=50)
    markdown = Path(report.markdown).read_text()
    assert "## Judges" in markdown and "panel: jury" in markdown
    page = Path(report.html).read_text()
    assert "<table id='judge-corrected'>" in page and "<table id='judge-panels'>" in page
