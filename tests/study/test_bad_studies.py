"""Invalid studies: each exits 2 naming the field and giving a hint, before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from study_files import DELETE, variant, write_study

from itemeval.cli.main import main
from itemeval.config import check_keys, load_study
from itemeval.errors import ConfigError

BAD = {
    "unknown key": (variant(**{"facets.promt": ["builtin:direct"]}), "facets.promt", "prompt"),
    "misspelled top-level key": (variant(**{"budjet": {"max_usd": 1}}), "budjet", "budget"),
    "unknown endpoint key": (
        variant(**{"endpoints.sim.requests_per_minit": 5}),
        "endpoints.sim.requests_per_minit",
        "requests_per_minute",
    ),
    "facet names a missing grader": (
        variant(**{"facets.grader": ["judgee"]}),
        "facets.grader[0]",
        "judge",
    ),
    "model names a missing endpoint": (
        variant(**{"models.0.endpoint": "simm"}),
        "models[0].endpoint",
        "sim",
    ),
    "grader names a missing endpoint": (
        variant(**{"graders.judge.endpoint": "nowhere"}),
        "graders.judge.endpoint",
        "sim",
    ),
    "template does not exist": (
        variant(**{"facets.prompt": ["builtin:direct", "missing"]}),
        "facets.prompt[1]",
        "create that file",
    ),
    "builtin template misspelled": (
        variant(**{"facets.prompt": ["builtin:dirct"]}),
        "facets.prompt[0]",
        "builtin:direct",
    ),
    "replications 0": (variant(**{"facets.replications": 0}), "facets.replications", None),
    "max_usd below zero": (variant(**{"budget.max_usd": -1}), "budget.max_usd", None),
    "duplicate model ids": (
        variant(
            **{"models": [{"id": "sim/a", "endpoint": "sim"}, {"id": "sim/a", "endpoint": "sim"}]}
        ),
        "models[1]",
        "distinct `name:`",
    ),
    "duplicate dataset names": (
        variant(**{"datasets.1.name": "arithmetic"}),
        "datasets[1].name",
        None,
    ),
    "rubric without grader": (
        variant(**{"facets.grader": [], "graders": {}}),
        "facets.rubric",
        "add a judge",
    ),
    "unknown scorer": (variant(**{"facets.scorer": ["exact"]}), "facets.scorer[0]", "exact_match"),
    "judge temperature is not settable": (
        variant(**{"graders.judge.temperature": 0.5}),
        "graders.judge.temperature",
        None,
    ),
    "unknown endpoint kind": (
        variant(**{"endpoints.sim.kind": "azure"}),
        "endpoints.sim.kind",
        None,
    ),
    "missing datasets": (variant(datasets=DELETE), "datasets", None),
    "invalid study name": (variant(study="my study!"), "study", "my-study"),
    "temperature out of range": (
        variant(**{"sampling.temperature": 3}),
        "sampling.temperature",
        None,
    ),
    "shortprose dataset with no judge": (
        variant(
            **{
                "datasets": [{"name": "capitals", "path": "datasets/capitals-short"}],
                "facets.grader": [],
                "facets.rubric": DELETE,
                "graders": {},
            }
        ),
        "facets.grader",
        "add a judge",
    ),
}

TWO_JUDGES = {
    "graders.judge-b": {"model": "sim/medium", "endpoint": "sim", "max_tokens": 300},
    "facets.grader": ["judge", "judge-b"],
}
THREE_JUDGES = {
    **TWO_JUDGES,
    "graders.judge-c": {"model": "sim/weak", "endpoint": "sim", "max_tokens": 300},
    "facets.grader": ["judge", "judge-b", "judge-c"],
}


def panel(judges: dict[str, object], **rule: object) -> dict[str, object]:
    """A study with a panel `jury` of the judges in `judges` and the rule given."""
    graders = judges["facets.grader"]
    return variant(**judges, panels={"jury": {"graders": graders, **rule}})


# A panel's rule must say what it does (docs/judges.md#panels).
BAD |= {
    "mean of pass/fail verdicts without a threshold (unanimity)": (
        panel(TWO_JUDGES, combine="mean"),
        "panels.jury.combine",
        "use `combine: majority`",
    ),
    "median of pass/fail verdicts without a threshold": (
        panel(THREE_JUDGES, combine="median"),
        "panels.jury.combine",
        "threshold",
    ),
    "tie for a mean": (
        panel(TWO_JUDGES, combine="mean", threshold=0.5, tie="pass"),
        "panels.jury.tie",
        "remove `tie`",
    ),
    "tie for an odd panel": (
        panel(THREE_JUDGES, combine="majority", tie="fail"),
        "panels.jury.tie",
        "remove `tie`",
    ),
    "threshold for a majority": (
        panel(TWO_JUDGES, combine="majority", threshold=0.5),
        "panels.jury.threshold",
        "combine: mean",
    ),
    "threshold outside the rubric's scale": (
        panel(TWO_JUDGES, combine="mean", threshold=2),
        "panels.jury.threshold",
        "at most 1",
    ),
    "cluster_by names a key no item has": (
        variant(analysis={"cluster_by": "modalty"}),
        "analysis.cluster_by",
        "did you mean 'modality'?",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_invalid_study_exits_2_with_field_and_hint(case, tmp_path, capsys, monkeypatch):
    data, field, hint = BAD[case]
    path = write_study(tmp_path, data)
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    code = main(["plan", str(path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert field in err, err
    assert "study.yaml" in err
    if hint:
        assert hint in err, err
    assert _tree(tmp_path) == before  # nothing written


@pytest.mark.parametrize(
    "rule",
    [
        {"combine": "mean", "threshold": 0.5},
        {"combine": "median", "threshold": 1},
        {"combine": "majority", "tie": "pass"},
    ],
)
def test_panel_rules_that_say_what_they_do_are_accepted(rule, tmp_path, capsys):
    path = write_study(tmp_path, panel(TWO_JUDGES, **rule))
    assert main(["plan", str(path)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    line = next(text for text in out.splitlines() if text.startswith("panel "))
    if rule["combine"] == "majority":
        assert "majority of judge, judge-b; an even split passes" in line
    else:
        assert f"{rule['combine']} >= {rule['threshold']:g} of judge, judge-b" in line


def test_a_template_naming_metadata_no_item_has_is_refused_at_plan(tmp_path, capsys):
    """`{{ metadata.continnent }}` in a prompt: planning renders every selected item, so `plan`
    refuses it (exit 2) naming the template, the item and the key the items have."""
    data = variant(
        **{
            "datasets": [{"name": "capitals", "path": "datasets/capitals-short"}],
            "facets.prompt": ["meta"],
        }
    )
    path = write_study(tmp_path, data)
    (tmp_path / "prompts" / "meta.txt").write_text("{{ input }} ({{ metadata.continnent }})\n")
    before = _tree(tmp_path)
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "field 'facets.prompt'" in err and "meta.txt" in err
    assert "which item capitals-short.001 does not have" in err
    assert "did you mean {{ metadata.continent }}?" in err
    assert _tree(tmp_path) == before


def test_invalid_yaml_names_the_line(tmp_path, capsys):
    path = write_study(tmp_path, text="study: x\ndatasets: [\n  - broken\n")
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "invalid YAML" in err and "study.yaml:3:" in err


def test_unknown_key_error_names_its_line(tmp_path, capsys):
    path = write_study(tmp_path, variant(**{"facets.promt": ["x"]}))
    main(["plan", str(path)])
    err = capsys.readouterr().err
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "promt" in text)
    assert f"study.yaml:{line}" in err


def test_missing_study_file(tmp_path, capsys):
    assert main(["plan", str(tmp_path / "nope.yaml")]) == 2
    assert "itemeval init" in capsys.readouterr().err


def test_hosted_endpoint_without_key_variable_set(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ITEMEVAL_TEST_KEY", raising=False)
    data = variant(**{"endpoints.sim": {"kind": "openai", "api_key_env": "ITEMEVAL_TEST_KEY"}})
    monkeypatch.setenv("ITEMEVAL_OTHER", "sk-canary-0123456789")
    study = load_study(write_study(tmp_path, data))
    with pytest.raises(ConfigError) as info:
        check_keys(study)
    assert info.value.exit_code == 2
    assert "ITEMEVAL_TEST_KEY" in str(info.value) and "endpoints.sim.api_key_env" in str(info.value)
    monkeypatch.setenv("ITEMEVAL_TEST_KEY", "sk-canary-0123456789")
    check_keys(study)  # set now: passes


def _tree(root: Path) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files
    )
