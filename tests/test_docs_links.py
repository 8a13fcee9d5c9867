"""The docs hold together: every relative link in the README, the CHANGELOG and docs/ leads to a
file that exists (and, for a Markdown anchor, to a heading of that file), docs/performance.md's
opening table has a row for every benchmark in benchmarks/, and no doc names an issue number."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted((REPO / "docs").rglob("*.md"))
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *DOCS]
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: Scripts in benchmarks/ that measure nothing themselves: the data generator, the runner of all,
#: and the sim-server helper the benchmarks share.
NOT_BENCHMARKS = {"generated_data.py", "run_all.py", "sim_server.py"}


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"#+ (.*)", line)
        if heading:
            slug = _slug(heading.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_every_relative_link_leads_somewhere() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:, javascript: in examples
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_performance_table_has_a_row_for_every_benchmark() -> None:
    text = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    table = re.search(r"^\| benchmark \|.*?(?=\n\n)", text, re.S | re.M)
    assert table, "docs/performance.md opens with no table whose first column is 'benchmark'"
    rows = table.group(0)
    scripts = sorted(p.name for p in (REPO / "benchmarks").glob("*.py"))
    missing = [s for s in scripts if s not in NOT_BENCHMARKS and f"`{s}" not in rows]
    assert not missing, f"benchmarks without a row in docs/performance.md's table: {missing}"


def test_no_doc_names_an_issue_number() -> None:
    found = [
        f"{page.relative_to(REPO)}:{number}: {line.strip()}"
        for page in [REPO / "README.md", *DOCS]
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bissues? \d+\b", line, re.I)
    ]
    assert not found, "docs say what the software does, not which issue made it:\n" + "\n".join(
        found
    )
