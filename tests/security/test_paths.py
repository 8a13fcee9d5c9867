"""Template names resolve inside their folder: `..`, absolute paths and links that lead out of
the prompts or rubrics folder are refused (exit 2) before anything is read or written."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from runtime_files import write_study

from itemeval.cli.main import main
from itemeval.errors import ConfigError
from itemeval.templates import load_template

SECRET_TEXT = "outside-the-folder {{ input }}"


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    """study/prompts/ with one good template and one link out; outside/x.txt beside study/."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x.txt").write_text(SECRET_TEXT)
    prompts = tmp_path / "study" / "prompts"
    (prompts / "shared").mkdir(parents=True)
    (prompts / "shared" / "ok.txt").write_text("inside {{ input }}")
    (prompts / "link.txt").symlink_to(tmp_path / "outside" / "x.txt")
    return prompts


@pytest.mark.parametrize(
    "name", ["../../outside/x", "../outside/x", "shared/../../../outside/x", "link", "ABSOLUTE"]
)
def test_a_name_that_leads_out_of_its_folder_is_refused(folders, tmp_path, name):
    absolute = str(tmp_path / "outside" / "x") if name == "ABSOLUTE" else name
    with pytest.raises(ConfigError, match="outside the prompts folder") as info:
        load_template(absolute, "prompt", folders, field="facets.prompt")
    assert info.value.exit_code == 2
    assert "outside-the-folder" not in str(info.value)  # nothing of the file was read


def test_a_builtin_name_is_one_plain_name(folders):
    with pytest.raises(ConfigError, match="outside the built-in rubrics"):
        load_template("builtin:../prompts/direct", "rubric", folders)


def test_sub_folders_inside_are_fine(folders):
    assert "inside" in load_template("shared/ok", "prompt", folders).text


def test_the_cli_refuses_it_with_exit_2_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x.txt").write_text(SECRET_TEXT)
    study = tmp_path / "study"
    path = write_study(study, **{"facets.prompt": ["../../outside/x"]})
    assert main(["run", str(path), "--yes", "--no-ray"]) == 2
    err = capsys.readouterr().err
    assert "outside the prompts folder" in err and "facets.prompt" in err, err
    assert sorted(p.name for p in study.iterdir()) == ["study.yaml"]
