"""`itemeval --version` names the release, and the package's metadata carries the same version."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import itemeval

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "0.2.0"


def test_version_flag_prints_the_release() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "itemeval", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"itemeval {RELEASE}"
    assert itemeval.__version__ == RELEASE


def test_the_build_reads_the_version_from_the_package() -> None:
    """One place holds the version: pyproject.toml takes it from `itemeval.__version__`."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    attr = pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "itemeval.__version__"
