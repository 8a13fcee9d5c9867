"""The release installs: `python -m build` makes a wheel that carries every file of the package,
uv installs it with its dependencies from the package index into a fresh venv, and there, from a
working directory outside the source tree, `itemeval --version` names the release and
`itemeval demo` runs the demo study to its leaderboard. (uv, the dev extra's, rather than pip:
the same wheel and the same index in a fraction of the time, answered from uv's cache of the
packages `make` installed into .venv.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import itemeval

ROOT = Path(__file__).resolve().parents[2]

# Building, installing the dependencies (from uv's cache when it has them) and the demo's run:
# a minute or more on two busy cores.
pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.timeout(2400)]


def _package_files() -> set[str]:
    """Every file under itemeval/ but Python's caches: what the wheel must carry."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "itemeval").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


@pytest.fixture
def ray_tmp() -> Iterator[str]:
    """Ray's session directory: short (Unix socket paths are limited), the test's own."""
    folder = tempfile.mkdtemp(prefix="ie-wheel-ray-", dir="/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_wheel_installs_in_a_fresh_venv_and_runs_the_demo(tmp_path: Path, ray_tmp: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.pop("RAY_ADDRESS", None)

    # Built from a copy of what the build reads: a checkout's `itemeval.egg-info/SOURCES.txt`
    # (left by earlier builds) would add files that package-data does not declare.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "itemeval", source / "itemeval", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = tmp_path / "dist"
    build = [sys.executable, "-m", "build", "--installer", "uv", "--outdir", str(dist)]
    _run([*build, str(source)], tmp_path, env, 900)
    wheels = list(dist.glob("*.whl"))
    assert [w.name for w in wheels] == [f"itemeval-{itemeval.__version__}-py3-none-any.whl"]
    carried = set(zipfile.ZipFile(wheels[0]).namelist())
    missing = sorted(_package_files() - carried)
    assert not missing, f"files of the package the wheel lacks: {missing}"

    home = tmp_path / "venv"
    venv.EnvBuilder().create(home)
    python = home / "bin" / "python"
    # Dependencies from the package index (uv's cache may answer), not --no-deps; uv compiles
    # no module to bytecode (Ray's thousands of files), the first import does for those the
    # demo uses.
    uv = [sys.executable, "-m", "uv", "pip", "install", "-q", "--python", str(python)]
    _run([*uv, str(wheels[0])], tmp_path, env, 1800)

    work = tmp_path / "elsewhere"  # no configs/, no source tree: only what the wheel installed
    work.mkdir()
    itemeval_bin = str(home / "bin" / "itemeval")
    where = _run([str(python), "-c", "import itemeval; print(itemeval.__file__)"], work, env, 60)
    assert Path(where.strip()).is_relative_to(home), where
    version = _run([itemeval_bin, "--version"], work, env, 60)
    assert version.strip() == f"itemeval {itemeval.__version__}" == "itemeval 0.2.0"

    run_env = {**env, "ITEMEVAL_CACHE_DIR": str(tmp_path / "cache"), "RAY_TMPDIR": ray_tmp}
    out = _run([itemeval_bin, "demo"], work, run_env, 900)
    assert "Done. generate: 2,088 ok" in out and "grade: 8,352 ok" in out, out[-3000:]
    ranked = re.findall(r"^\s*\d+\s+\S+\s+\S+\s+(strong|medium|weak)\s", out, flags=re.MULTILINE)
    assert ranked[:2] == ["strong", "strong"] and ranked[-2:] == ["weak", "weak"], out[-3000:]
    assert (work / "studies" / "demo" / "manifests").is_dir()
    assert not (work / "configs").exists()
