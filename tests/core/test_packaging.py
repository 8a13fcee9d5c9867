"""The package declares what it imports.

The test environment has the dev extra, which brings numpy, pandas and more through other
packages, so a runtime import that `pyproject.toml` forgot would pass every other test and only
break `make demo` on a fresh machine. This reads the imports of every module and checks each
third-party one against the declared runtime dependencies (optional features against their extra).
"""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "itemeval"

# Modules that may import an optional extra (they import it lazily and say which extra to install).
OPTIONAL = {"itemeval/datasets/adapters/_hf.py": "hf"}


def _requirement_name(requirement: str) -> str:
    name = requirement.split(";")[0]
    for stop in "[<>=!~ ":
        name = name.split(stop)[0]
    return name.strip().lower().replace("_", "-")


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_requirement_name(r) for r in project["dependencies"]}
    extras = {
        extra: {_requirement_name(r) for r in requirements}
        for extra, requirements in project.get("optional-dependencies", {}).items()
    }
    return runtime, extras


#: Standard library in a later Python than the one running the test, imported only under a version
#: check (`compression.zstd`: Python 3.14's; before it, the declared `backports.zstd`).
LATER_STDLIB = {"compression"}


def _third_party_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top != "itemeval" and top not in sys.stdlib_module_names | LATER_STDLIB:
                found.add(top)
    return found


def test_every_third_party_import_is_a_declared_dependency() -> None:
    runtime, extras = _declared()
    distributions = packages_distributions()
    undeclared: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        allowed = runtime | extras.get(OPTIONAL.get(relative, ""), set())
        for module in sorted(_third_party_imports(path)):
            names = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
            if not names:
                pytest.fail(f"{relative} imports {module!r}, which no installed package provides")
            if not names & allowed:
                undeclared.append(f"{relative}: {module} (from {', '.join(sorted(names))})")
    assert not undeclared, "imports missing from [project].dependencies:\n" + "\n".join(undeclared)


#: Copies the package carries of files kept in `configs/`: the demo study and its datasets
#: (`itemeval demo` outside a checkout), and the starter's sample dataset (`itemeval init`).
PACKAGED_COPIES = {
    "itemeval/_demo/demo.yaml": "configs/demo.yaml",
    "itemeval/_demo/datasets": "configs/datasets",
    "itemeval/starter_datasets/arithmetic": "configs/datasets/arithmetic",
}


def _files(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_the_packaged_copies_equal_their_originals_in_configs() -> None:
    for copy, original in PACKAGED_COPIES.items():
        copied, kept = _files(ROOT / copy), _files(ROOT / original)
        assert kept, original
        assert copied == kept, f"{copy} differs from {original}: copy {original} over it"
