"""The demo's numbers read the same everywhere, digit for digit: `itemeval demo` runs
`configs/demo.yaml` against a real `itemeval sim-server` (in this process, without Ray), then
the leaderboard it prints, `report.md`, `itemeval status` and the viewer's overview page are
read back as text and compared condition by condition: every grader's accuracy with its
interval (the panel's too), the tier and rank interval, and the costs (paid, saved by the
response cache, alone, alone per correct answer)."""

from __future__ import annotations

import re
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from itemeval.cli.main import main
from itemeval.config import load_study
from itemeval.planning import make_plan
from itemeval.view import ViewOptions, ViewServer

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "configs" / "demo.yaml"
PROPORTION = re.compile(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]")

pytestmark = pytest.mark.slow


class _Tables(HTMLParser):
    """The cells' text of every `<table id=...>` of a page: {id: [[cell, ...], ...]}."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = dict(attrs).get("id") or f"table{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _markdown_table(text: str, after: str) -> list[dict[str, str]]:
    """The first Markdown table after the line `after`, as dicts by header."""
    lines = text.split(after, 1)[1].splitlines()
    rows = [line for line in lines if line.startswith("|")]
    start = lines.index(rows[0])
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    header, body = rows[0], rows[2:]
    return [dict(zip(header, row, strict=True)) for row in body]


def _text_table(lines: list[str]) -> list[dict[str, str]]:
    """A plain aligned table (two spaces or more between columns) as dicts by header."""
    split = [re.split(r"\s{2,}", line.strip()) for line in lines]
    return [dict(zip(split[0], row, strict=True)) for row in split[1:]]


def test_the_demo_reads_the_same_in_its_leaderboard_report_status_and_viewer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # the demo's store: studies/demo under the working directory
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["demo", str(DEMO), "--no-ray", "--quiet"]) in (0, 1)
    printed = capsys.readouterr().out
    assert main(["report", str(DEMO), "--out", str(tmp_path / "report")]) in (0, 1)
    capsys.readouterr()
    assert main(["status", str(DEMO)]) == 0
    status = capsys.readouterr().out
    markdown = (tmp_path / "report" / "report.md").read_text()
    plan = make_plan(load_study(DEMO), with_pending=False)
    server = ViewServer(plan, ViewOptions(port=0, open_browser=False, refresh_s=0))
    server.start()
    try:
        with urllib.request.urlopen(server.url, timeout=60) as response:
            page = response.read().decode("utf-8")
    finally:
        server.stop()

    slugs = [c.slug for c in plan.design.generate]
    # The report: the leaderboard (every grader; tier and rank) and the cost table.
    board = {r["condition"]: r for r in _markdown_table(markdown, "## Leaderboard")}
    cost = {r["condition"]: r for r in _markdown_table(markdown, "## Cost per correct answer")}
    graders = [h for h in next(iter(board.values())) if PROPORTION.match(board[slugs[0]][h])]
    assert len(graders) == 5 and any(g.startswith("panel: jury") for g in graders)
    assert set(board) == set(cost) == set(slugs)

    # The viewer's overview: the same columns by the same labels.
    parser = _Tables()
    parser.feed(page)
    header, *rows = parser.tables["leaderboard"]
    viewer = {row[header.index("condition")]: dict(zip(header, row, strict=True)) for row in rows}
    assert set(viewer) == set(slugs)

    # `status`: the results table.
    lines = status.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("condition "))
    end = next(
        i for i in range(start, len(lines)) if not lines[i].strip() or "differences" in lines[i]
    )
    results = {r["condition"]: r for r in _text_table(lines[start:end])}
    assert set(results) == set(slugs)

    # The leaderboard the demo printed (`Study.leaderboard()`).
    shown = {
        slug: PROPORTION.findall(next(x for x in printed.splitlines() if f" {slug} " in x))
        for slug in slugs
    }
    headline = graders[0]
    for slug in slugs:
        report = board[slug]
        for grader in graders:
            assert viewer[slug][grader] == report[grader], (slug, grader)
        assert shown[slug] == [report[g] for g in graders], slug
        assert results[slug]["accuracy"] == report[headline]
        rank = f"{report['tier']} (rank {report['rank']})"
        assert viewer[slug]["tier"] == results[slug]["tier (rank)"] == rank, slug
        money = cost[slug]
        pairs = {
            "paid": ("paid", "paid"),
            "saved by the response cache": ("saved by the response cache",) * 2,
            "alone": ("alone", "alone"),
            "alone per correct answer": ("alone per correct", "alone per correct"),
        }
        for column, (in_viewer, in_status) in pairs.items():
            assert viewer[slug][in_viewer] == results[slug][in_status] == money[column], (
                slug,
                column,
            )
    # Answers repeated across conditions came from the response cache: alone > paid somewhere.
    assert any(cost[s]["saved by the response cache"] != "$0.00" for s in slugs)
    verdict = re.search(r"\*\*(Which differences are real[^*]+)\*\*", markdown)
    assert verdict and verdict.group(1) in status and verdict.group(1) in printed
