"""Paired comparisons on a real store (the demo-like run): the report's section, the families,
`analysis.cluster_by` read from item attributes and metadata, and its bad input."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow.compute as pc
import pytest
import yaml
from export_studies import Run, write_study

from itemeval.cli.main import main
from itemeval.config import load_study, study_from_mapping
from itemeval.errors import ConfigError, ExitCode
from itemeval.export import ExportOptions, export_study
from itemeval.planning import make_plan
from itemeval.report import Bootstrap, report_data
from itemeval.report._markdown import report_markdown
from itemeval.results import read_cells
from itemeval.statistics import items_needed
from itemeval.statistics._study import plan_statistics
from itemeval.statistics._tables import comparisons_table, components_table


def _plan(demo_run: Run, **analysis):
    data = yaml.safe_load(demo_run.study_path.read_text())
    data["analysis"] = analysis
    config = study_from_mapping(data, base_dir=demo_run.study_path.parent)
    return make_plan(config, with_pending=False)


def test_the_report_says_which_differences_are_real(demo_run: Run):
    data = report_data(demo_run.plan(), Bootstrap(resamples=300))
    family = data.headline_family
    assert family is not None and len(family.pairs) == 15  # 6 conditions
    tiers = dict(zip(family.units, family.tiers, strict=True))
    assert tiers["strong_cot_default"] == tiers["strong_direct_default"] == 1
    assert max(tiers.values()) >= 2 and tiers["weak_cot_default"] > 1
    markdown = report_markdown(data)
    assert "## Which differences are real" in markdown
    assert "### Paired differences (row minus column)" in markdown
    assert "not distinguishable: " in markdown and "strong_direct_default ~ strong_cot" in markdown
    # every family: 2 graders' accuracy (conditions, models, 4 datasets), the judge's mean
    # score is its verdict here (0 or 1) and is not repeated
    table = comparisons_table(data.statistics)
    scope, dataset = table.column("scope").to_pylist(), table.column("dataset").to_pylist()
    scopes = set(zip(scope, dataset, strict=True))
    assert ("models", None) in scopes and ("dataset", "facts-tf") in scopes
    assert set(table.column("metric").to_pylist()) == {"accuracy"}
    assert table.num_rows == 2 * (15 + 3 + 4 * 15)
    components = components_table(data.statistics).to_pylist()
    assert len(components) == 12 and all(c["items"] > 0 for c in components)
    assert all(0 <= c["between_item_share"] <= 1 for c in components)


def test_cluster_by_resamples_whole_clusters(demo_run: Run):
    plain = plan_statistics(_plan(demo_run), headline_only=True)
    by_metadata = plan_statistics(_plan(demo_run, cluster_by="continent"), headline_only=True)
    clusters = by_metadata.clusters
    assert clusters is not None and clusters.missing > 0  # only capitals-short has continents
    assert clusters.count < len(clusters.codes)
    by_modality = plan_statistics(_plan(demo_run, cluster_by="modality"), headline_only=True)
    assert by_modality.clusters is not None and by_modality.clusters.count <= 6
    table = comparisons_table(by_modality)
    assert set(table.column("test").to_pylist()) == {"paired_t_cluster"}
    assert pc.all(pc.equal(table.column("cluster_by"), "modality")).as_py()
    assert max(table.column("clusters").to_pylist()) <= 6
    items = comparisons_table(plain)
    assert plain.clusters is None  # two epochs an item: the paired t-test there too
    assert items.column("items").to_pylist() == items.column("clusters").to_pylist()


def test_cluster_by_a_field_no_item_has_is_a_config_error(demo_run: Run):
    with pytest.raises(ConfigError) as error:
        plan_statistics(_plan(demo_run, cluster_by="passage"), headline_only=True)
    assert "analysis.cluster_by" in str(error.value) and "passage" in str(error.value)
    with pytest.raises(ConfigError, match=r"analysis\.adjust"):
        _plan(demo_run, adjust="bonferroni")


def test_plan_detect_and_status_answer_from_the_store(demo_run: Run, capsys, tmp_path):
    study = str(demo_run.study_path)
    assert main(["plan", study, "--detect", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "Power: to detect a difference of 0.1" in out
    assert "assumed: the hardest realistic pair: of the " in out
    assert re.search(r"^Needed: [\d,]+ items x \d+ epoch\(s\) for \$", out, flags=re.MULTILINE)
    assert main(["plan", study, "--detect", "0.1", "--json"]) == 0
    power = json.loads(capsys.readouterr().out)["power"]
    best = power["recommended"]
    assert best["fits"] and best["usd"] > 0 and power["variance"]["between"] > 0
    assert power["assumed"] and not power["warnings"]
    # nothing stored: the stated conservative default
    empty = str(tmp_path / "empty")
    assert main(["plan", study, "--detect", "0.03", "--store", empty]) == 0
    assert "conservative default" in capsys.readouterr().out
    assert main(["plan", study, "--detect", "3"]) == int(ExitCode.BAD_INPUT)
    assert "field 'detect'" in capsys.readouterr().err
    assert main(["status", study]) == 0
    out = capsys.readouterr().out
    assert "Which differences are real (paired tests, Holm-adjusted p < 0.05)" in out
    assert main(["status", study, "--no-differences"]) == 0
    assert "Which differences are real" not in capsys.readouterr().out


def test_plan_detect_plans_for_the_pair_that_matters(demo_run: Run, capsys):
    """The default plans for the hardest pair within twice the difference (not the median of
    every pair, which pairs 30 points apart pull down); --pair names a pair or a family; the
    plan says which it took, and an absurd answer is flagged."""
    from itemeval.statistics._planning import pair_variances

    plan = demo_run.plan()
    pairs = pair_variances(read_cells(plan)).pairs
    close = [p for p in pairs if abs(p.difference) <= 2 * 0.06]
    hardest = max(close, key=lambda p: p.one_epoch)
    median = float(np.median([p.one_epoch for p in pairs]))
    assert hardest.one_epoch > median  # the median would plan too few items for it
    study = str(demo_run.study_path)

    def planned(*args: str) -> dict:
        assert main(["plan", study, "--detect", "0.06", "--json", *args]) == 0
        return json.loads(capsys.readouterr().out)["power"]

    default = planned()
    assert f"{hardest.first} vs {hardest.second}" in default["assumed"][0]
    one_epoch = next(r for r in default["designs"] if r["epochs"] == 1)
    assert one_epoch["items"] == items_needed(0.06, hardest.variance)
    named = planned("--pair", "strong_direct*", "strong_cot*")
    assert named["assumed"][0].startswith("the pair named: strong_direct_default vs strong_cot")
    family = planned("--pair", "weak_*")  # one glob: every pair of what it matches (one here)
    assert "weak_direct_default vs weak_cot_default" in family["assumed"][0]
    across = planned("--pair", "strong*", "weak*")  # each of the first against each of the second
    assert across["assumed"][0].startswith("the hardest of the 4 pairs --pair names")
    assert main(["plan", study, "--detect", "0.06", "--pair", "nothing*"]) == 2
    assert "--pair 'nothing*' matches no generate condition" in capsys.readouterr().err

    assert main(["plan", study, "--detect", "0.0001"]) == 0
    out = capsys.readouterr().out
    assert "warning: every design needs more than 1,000,000 answers per condition" in out
    assert main(["plan", study, "--detect", "0.0001", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["power"]["warnings"]


@pytest.mark.parametrize("flags", [["--power", "0.9"], ["--alpha", "0.01"], ["--pair", "a"]])
def test_power_options_without_detect_are_errors(demo_run: Run, capsys, flags):
    assert main(["plan", str(demo_run.study_path), *flags]) == int(ExitCode.BAD_INPUT)
    err = capsys.readouterr().err
    assert f"{flags[0]} plans for a difference, and no --detect says which" in err


def test_a_plan_over_the_budget_is_flagged(demo_run: Run, tmp_path, capsys):
    path = write_study(tmp_path, yaml.safe_load(demo_run.study_path.read_text()))
    data = yaml.safe_load(path.read_text())
    data["budget"] = {"policy": "full", "max_usd": 0.0001}
    path.write_text(yaml.safe_dump(data))
    assert main(["plan", str(path), "--detect", "0.06"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"warning: the cheapest design .* more than budget\.max_usd", out)


def test_cluster_by_a_typo_is_refused_at_plan_before_anything_is_paid(demo_run: Run, tmp_path):
    """`cluster_by: contnent` passes the schema; planning reads every item and refuses it with
    the key the items have, so `run` stops before its first call: no row, no manifest."""
    data = yaml.safe_load(demo_run.study_path.read_text())
    folder = tmp_path / "typo"
    path = write_study(folder, data | {"store": str(folder / "store"), "analysis": {}})
    text = path.read_text() + "analysis:\n  cluster_by: contnent\n"
    path.write_text(text.replace("analysis: {}\n", ""))
    with pytest.raises(ConfigError) as error:
        make_plan(load_study(path))
    problem = error.value.problems[0]
    assert problem.field == "analysis.cluster_by" and "did you mean 'continent'?" in problem.hint
    assert "items without the key are each a cluster of their own" in problem.hint
    assert main(["run", str(path), "--no-ray", "--yes", "--quiet"]) == int(ExitCode.BAD_INPUT)
    assert not (folder / "store").exists()
    # a key only some items have is a warning, not an error
    path.write_text(text.replace("contnent", "continent").replace("analysis: {}\n", ""))
    plan = make_plan(load_study(path), with_pending=False)
    assert any("have no 'continent'" in str(w) for w in plan.warnings)


def test_cluster_by_widens_the_leaderboard_intervals_too(demo_run: Run):
    plain = report_data(_plan(demo_run), Bootstrap(resamples=300)).leaderboard
    data = report_data(_plan(demo_run, cluster_by="modality"), Bootstrap(resamples=300))
    clustered = data.leaderboard
    assert "clusters of items sharing 'modality'" in report_markdown(data)
    for before, after in zip(plain.conditions, clustered.conditions, strict=True):
        a, b = plain.headline(before), clustered.headline(after)
        assert a.value == b.value and a.clusters > b.clusters and b.clusters <= 6


def test_every_eval_ever_intervals_resample_clusters(demo_run: Run, tmp_path):
    plan = _plan(demo_run, cluster_by="modality")
    export_study(plan, ExportOptions(out=str(tmp_path), formats=("eee",), eee_version="0.3.0"))
    records = [
        json.loads(p.read_text())
        for p in (tmp_path / "eee").rglob("*.json")
        if not p.name.endswith("_samples.jsonl")
    ]
    assert records
    for record in records:
        result = record["evaluation_results"][0]["score_details"]
        details, uncertainty = result["details"], result["uncertainty"]
        assert details["cluster_by"] == "modality" and int(details["clusters"]) <= 2
        assert int(details["items"]) > int(details["clusters"])
        method = uncertainty["confidence_interval"]["method"]
        assert "clusters of items sharing 'modality'" in method
