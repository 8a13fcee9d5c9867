"""Every package of `itemeval/` is named in the README's concept table and has its section in
the map, docs/architecture.md, so a newcomer finds each room from either."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _packages() -> set[str]:
    return {
        p.parent.name
        for p in (ROOT / "itemeval").glob("*/__init__.py")
        if not p.parent.name.startswith("_")
    }


def test_every_package_is_a_concept_in_the_readme_and_the_map() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## The code, by concept", 1)[1].split("\n## ", 1)[0]
    in_readme = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)?", table, re.M))
    named = {name for pair in in_readme for name in pair if name}
    headings = re.findall(r"^### (.+)$", (ROOT / "docs/architecture.md").read_text(), re.M)
    in_map = {name for h in headings for name in re.findall(r"`(\w+)`", h)}
    packages = _packages()
    assert packages - named == set(), "packages missing from README's 'The code, by concept'"
    assert packages - in_map == set(), "packages without a section in docs/architecture.md"
    assert named - packages - {"errors"} == set(), "the README names a package that is gone"
