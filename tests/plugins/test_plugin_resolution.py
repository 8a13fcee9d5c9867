"""Plugins named by `module:attribute` and by entry point: resolution, errors, and a custom
scorer's identity in its grade condition id (changing the scorer grades again)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from plugin_files import write_module, write_study

import itemeval
from itemeval.config import load_study
from itemeval.errors import ConfigError
from itemeval.planning import build_design
from itemeval.plugins import SCORER_GROUP, load_plugin
from itemeval.scoring import Score, ScorerError, score

UNIT_MATCH = '''
from itemeval import Score

def unit_match(text, target, modality):
    """Numbers with or without a unit: '12 kg' matches '12'."""
    got = text.strip().split(" ")[0]
    ok = got == target.strip()
    return Score(float(ok), ok, got)
'''


def _module(folder: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> str:
    """A fresh importable module (a new name each time: plugins are cached per process)."""
    monkeypatch.syspath_prepend(str(folder))
    return write_module(folder, source)


def _scorer_condition(study_dir: Path, scorer: str):
    study = load_study(write_study(study_dir, **{"facets.scorer": ["auto", scorer]}))
    design = build_design(study)
    return next(c for c in design.scorers if c.scorer == scorer), design


def test_a_module_scorer_has_an_id_from_its_source(tmp_path, monkeypatch):
    name = _module(tmp_path / "code", monkeypatch, UNIT_MATCH)
    cond, design = _scorer_condition(tmp_path / "a", f"{name}:unit_match")
    assert cond.slug == "unit_match" and cond.id.startswith("unit_match--")
    assert cond.payload["scorer"] == f"{name}:unit_match"
    assert len(cond.payload["source_sha256"]) == 64
    assert design.scorers[0].id == "auto--58c489581943"  # built-in ids do not move
    described = cond.describe()
    assert described["scorer"] == f"{name}:unit_match"
    assert described["function"] == f"{name}:unit_match"
    # Editing the module is a new scorer: a new id, so everything is graded again.
    edited = _module(tmp_path / "edited", monkeypatch, UNIT_MATCH + "\n# a comment\n")
    again, _ = _scorer_condition(tmp_path / "b", f"{edited}:unit_match")
    assert again.payload["source_sha256"] != cond.payload["source_sha256"]


def test_a_versioned_scorer_keeps_its_id_until_the_version_changes(tmp_path, monkeypatch):
    decorated = "import itemeval\n\n@itemeval.scorer(name='units', version=2)\ndef unit_match"
    versioned = UNIT_MATCH.replace("def unit_match", decorated)
    first = _module(tmp_path / "one", monkeypatch, versioned)
    cond, _ = _scorer_condition(tmp_path / "a", f"{first}:unit_match")
    assert cond.slug == "units" and cond.payload == {
        "stage": "grade",
        "scorer": f"{first}:unit_match",
        "version": "2",
    }
    # Same module, same version, another body (a fresh process, as a later run is): the id
    # stays, the author said the behaviour is the same ...
    write_module(tmp_path / "two", versioned + "\n# refactored\n", name=first)
    study = write_study(tmp_path / "b", **{"facets.scorer": ["auto", f"{first}:unit_match"]})
    assert _ids_in_a_fresh_process(tmp_path / "two", study)[-1] == cond.id
    # ... and a bumped version is a new condition.
    bumped = _module(tmp_path / "three", monkeypatch, versioned.replace("version=2", "version=3"))
    cond3, _ = _scorer_condition(tmp_path / "c", f"{bumped}:unit_match")
    assert cond3.payload["version"] == "3" and cond3.id != cond.id


def _ids_in_a_fresh_process(code: Path, study: Path) -> list[str]:
    script = (
        "import json, sys; from itemeval.config import load_study; "
        "from itemeval.planning._design import build_design; "
        f"d = build_design(load_study({str(study)!r})); "
        "print(json.dumps([c.id for c in d.grade]))"
    )
    env = dict(os.environ, PYTHONPATH=str(code))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout)


def test_score_dispatches_to_a_custom_scorer_and_checks_what_it_returns(tmp_path, monkeypatch):
    name = _module(
        tmp_path,
        monkeypatch,
        UNIT_MATCH
        + "\ndef broken(text, target, modality):\n    return 1.0\n"
        + "\ndef raising(text, target, modality):\n    raise ValueError('no unit')\n",
    )
    assert score(f"{name}:unit_match", "12 kg", "12", None) == Score(1.0, True, "12")
    assert score(f"{name}:unit_match", "13 kg", "12", None).correct is False
    with pytest.raises(ScorerError, match=r"returned a float, not an itemeval\.Score"):
        score(f"{name}:broken", "x", "y", None)
    with pytest.raises(ScorerError, match="raised ValueError: no unit"):
        score(f"{name}:raising", "x", "y", None)


@pytest.mark.parametrize(
    ("scorer", "message", "hint"),
    [
        ("exact", "unknown scorer 'exact'", "exact_match"),
        ("no_such_pkg_xyz.scorers:f", "cannot import no_such_pkg_xyz.scorers", "runtime_env"),
        ("__main__:unit_match", "cannot live in __main__", None),
        ("not a name", "neither a name nor", None),
    ],
)
def test_a_scorer_that_cannot_load_is_a_config_error_naming_the_field(
    scorer, message, hint, tmp_path
):
    path = write_study(tmp_path, **{"facets.scorer": [scorer]})
    with pytest.raises(ConfigError) as caught:
        load_study(path)
    text = str(caught.value)
    assert message in text and "facets.scorer[0]" in text and "study.yaml:" in text
    if hint:
        assert hint in text


def test_a_missing_attribute_suggests_the_close_one(tmp_path, monkeypatch):
    name = _module(tmp_path / "code", monkeypatch, UNIT_MATCH)
    with pytest.raises(ConfigError, match=r"has no 'unit_mach'.*did you mean 'unit_match'"):
        load_study(write_study(tmp_path, **{"facets.scorer": [f"{name}:unit_mach"]}))


def test_an_unknown_entry_point_lists_what_is_installed():
    with pytest.raises(ConfigError) as caught:
        load_plugin(SCORER_GROUP, "nothing-installed-by-this-name", what="scorer")
    assert "unknown scorer" in str(caught.value)
    assert "itemeval.scorers" in str(caught.value) or "installed plugins" in str(caught.value)


def test_a_scorer_that_raises_fails_the_run_naming_it(tmp_path, monkeypatch):
    name = _module(
        tmp_path / "code",
        monkeypatch,
        "def fussy(text, target, modality):\n    raise ValueError('cannot read ' + text[:5])\n",
    )
    path = write_study(tmp_path / "s", **{"facets.scorer": [f"{name}:fussy"]})
    study = itemeval.Study.from_yaml(path)
    outcome = study.run(in_process=True, quiet=True)
    assert outcome.status == "failed" and outcome.exit_code == 1
    assert outcome.stages["generate"].counts.done == 2 * 4
    failed = " ".join(outcome.stages["grade"].failed_shards)
    assert f"scorer '{name}:fussy' raised ValueError: cannot read" in failed
