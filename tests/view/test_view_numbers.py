"""One source for every number: on a study with `analysis.cluster_by` and a panel of judges, the
viewer's overview, the report, `status`, `Study.comparisons()` and `Study.leaderboard()` give
the same accuracies, intervals, tiers, rank intervals and costs (`export.study_numbers`).

Every accuracy of the overview links to the items where that condition (or model) gave at
least one answer *that grader* calls wrong, and each grader's errors and parse failures link to
its own: followed over HTTP, each link's count is checked against the store read independently
(the store's deduplicated rows; the panel's verdicts recombined from its judges' rows)."""

from __future__ import annotations

import html
import re
import urllib.parse
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from export_studies import run

from itemeval.api import Study
from itemeval.config import load_study
from itemeval.planning import Plan, make_plan
from itemeval.report import Bootstrap, fmt_proportion, fmt_usd, report_data
from itemeval.statistics import rank_text
from itemeval.view import ViewOptions, ViewServer
from itemeval.view._index import build_index
from itemeval.view._queries import overview

CLUSTERED = {
    "facets.grader": ["judge", "judge-weak"],
    "graders.judge-weak": {"model": "sim/weak", "endpoint": "sim", "max_tokens": 300},
    "panels": {"jury": {"graders": ["judge", "judge-weak"], "combine": "majority", "tie": "pass"}},
    "analysis": {"cluster_by": "modality"},
}


@pytest.fixture(scope="module")
def clustered(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    folder = tmp_path_factory.mktemp("clustered")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ITEMEVAL_CACHE_DIR", str(folder / "default-cache"))
        result = run(folder, **CLUSTERED)
    assert result.outcome.status == "completed", result.outcome.message
    return make_plan(load_study(result.study_path), with_pending=False)


@pytest.fixture(scope="module")
def server(clustered: Plan) -> Iterator[ViewServer]:
    viewer = ViewServer(clustered, ViewOptions(port=0, open_browser=False, refresh_s=0))
    viewer.start()
    yield viewer
    viewer.stop()


def test_viewer_report_status_and_api_agree_on_a_clustered_study(clustered: Plan) -> None:
    report = report_data(clustered)
    board = report.leaderboard
    family = report.headline_family
    assert family is not None and report.bootstrap.clusters is not None
    kinds = {g.kind for g in board.graders}
    assert kinds == {"scorer", "judge", "panel"}  # the panel is a column like any grader

    # The viewer: the same leaderboard (every grader, panel included, conditions and models),
    # over the same clusters, the same tiers and rank intervals, the same costs.
    view = overview(build_index(clustered))
    assert view.board == board
    assert view.bootstrap.clusters is not None
    by_slug = {g.slug: g.id for g in clustered.design.generate}  # the family names slugs
    tiers = {
        by_slug[unit]: f"{family.tiers[u]} (rank {rank_text(family, u)})"
        for u, unit in enumerate(family.units)
    }
    assert view.tiers == tiers and len(set(family.tiers)) > 1
    assert view.costs == {c.generate.id: c for c in report.costs}
    assert view.grades == clustered.store.read_grades(None, ["epoch"]).num_rows  # no panel rows
    for line in board.conditions:
        assert len(line.accuracy) == len(board.graders)  # a number under every grader
        headline = board.headline(line)
        assert headline is not None and headline.clusters <= 6  # modalities, not items

    # `status`: the headline accuracy, tier and costs of each condition.
    status = Study(clustered.study).status()
    assert status.differences is not None and "Which differences are real" in status.differences
    rows = {r["condition_id"]: r for r in status.results}
    for line in board.conditions:
        assert line.generate is not None
        row, headline = rows[line.generate.id], board.headline(line)
        assert headline is not None
        assert (row["accuracy"], row["low"], row["high"]) == (
            headline.value,
            headline.low,
            headline.high,
        )
        assert row["tier"] == tiers[line.generate.id]
        cost = view.costs[line.generate.id]
        assert row["paid_usd"] == cost.usd and row["alone_usd"] == cost.alone_usd
        assert row["cache_saved_usd"] == cost.cache_saved_usd
        assert row["per_correct_usd"] == cost.per_correct
    text = status.results_text()
    for line in board.conditions:
        assert fmt_proportion(board.headline(line)) in text

    # `Study.comparisons()`: each unit's accuracy, interval, tier and rank interval, under
    # every grader (the panel too) and for the models, are the leaderboard's.
    rankings = Study(clustered.study).comparisons().rankings.to_pylist()
    lines = {line.name: line for line in board.conditions}
    models = {line.name: line for line in board.models}
    checked = 0
    for r in rankings:
        if r["metric"] != "accuracy" or r["scope"] not in ("conditions", "models"):
            continue
        line = (lines if r["scope"] == "conditions" else models)[r["unit"]]
        value = line.accuracy[r["grade_condition_id"]]
        assert (r["value"], r["ci_low"], r["ci_high"]) == (value.value, value.low, value.high)
        assert r["items"] == value.clusters
        checked += 1
    assert checked == len(board.graders) * (len(lines) + len(models))
    assert board.primary is not None
    headline = [
        r
        for r in rankings
        if r["scope"] == "conditions"
        and r["metric"] == "accuracy"
        and r["grade_condition_id"] == board.primary.id
    ]
    assert len(headline) == len(tiers)
    for r in headline:
        u = family.units.index(r["unit"])
        assert (r["tier"], r["rank_low"], r["rank_high"]) == (
            family.tiers[u],
            family.rank_low[u],
            family.rank_high[u],
        )

    # `Study.leaderboard()`: the same text the demo prints, over the clusters.
    printed = Study(clustered.study).leaderboard()
    assert "clusters of items (analysis.cluster_by)" in printed
    for line in board.conditions:
        for value in line.accuracy.values():
            assert fmt_proportion(value) in printed


def test_cluster_by_changes_what_every_reader_shows(clustered: Plan, tmp_path: Path) -> None:
    """Without `cluster_by` the same store reads with item intervals in the viewer too."""
    study = clustered.study.model_copy(
        update={"analysis": clustered.study.analysis.model_copy(update={"cluster_by": None})}
    )
    plain = make_plan(study, with_pending=False)
    clustered_view = overview(build_index(clustered), Bootstrap(resamples=300))
    plain_view = overview(build_index(plain), Bootstrap(resamples=300))
    assert plain_view.bootstrap.clusters is None
    assert plain_view.board == report_data(plain, Bootstrap(resamples=300)).leaderboard
    changed = 0
    for a, b in zip(clustered_view.board.conditions, plain_view.board.conditions, strict=True):
        first, second = clustered_view.board.headline(a), plain_view.board.headline(b)
        assert first is not None and second is not None and first.value == second.value
        changed += (first.low, first.high) != (second.low, second.high)
        assert first.clusters < second.clusters
    assert changed >= 4


def _get(server: ViewServer, path: str) -> str:
    with urllib.request.urlopen(server.url.rstrip("/") + path, timeout=30) as response:
        return response.read().decode("utf-8")


def _matching(server: ViewServer, href: str) -> int:
    page = _get(server, href)
    found = re.search(r"([\d,]+) items match", page)
    assert found, href
    return int(found.group(1).replace(",", ""))


def _verdicts(plan: Plan) -> dict[str, dict[tuple[str, str, int], bool | None]]:
    """Per grade condition id: each answer's verdict from the store's own deduplicated rows
    (True/False for a final grade of the current answer, None for a parse failure)."""
    solutions = plan.store.read_solutions(None, ["item_id", "epoch", "text_hash"]).to_pylist()
    current = {(r["condition_id"], r["item_id"], r["epoch"]): r["text_hash"] for r in solutions}
    out: dict[str, dict[tuple[str, str, int], bool | None]] = defaultdict(dict)
    for g in plan.store.read_grades(None).to_pylist():
        key = (g["gen_condition_id"], g["item_id"], g["epoch"])
        if g["status"] != "ok":
            continue
        if not g["parse_ok"]:
            out[g["grade_condition_id"]][key] = None
        elif g["correct"] is not None and current.get(key) == g["solution_hash"]:
            out[g["grade_condition_id"]][key] = bool(g["correct"])
    return out


def test_every_accuracy_links_to_the_misses_of_its_grader(
    clustered: Plan, server: ViewServer
) -> None:
    design = clustered.design
    verdicts = _verdicts(clustered)
    panel = design.panels[0]
    members = [verdicts[m] for m in panel.members]
    # majority of two with ties passing: the panel calls an answer wrong when both judges do
    verdicts[panel.id] = {
        key: not (a is False and members[1].get(key) is False)
        for key, a in members[0].items()
        if a is not None and members[1].get(key) is not None
    }
    page = html.unescape(_get(server, "/"))
    links = re.findall(r'href="(/items\?missed=[^"]+)">([\d.]+ \[[^\]]+\])</a>', page)
    kinds = {g.id: g.kind for g in design.grade} | {p.id: "panel" for p in design.panels}
    gens = {g.id: g for g in design.generate}
    seen = set()
    for href, _ in links:
        query = dict(urllib.parse.parse_qsl(href.split("?", 1)[1]))
        grader = query["grader"]
        mine = [g for g in gens if query["missed"] in (g, gens[g].model_label)]
        assert mine, href
        missed = {
            item
            for (gen, item, _), right in verdicts[grader].items()
            if gen in mine and right is False
        }
        assert _matching(server, href) == len(missed), href
        seen.add((kinds[grader], "model" if len(mine) > 1 else "condition"))
    # a link under every grader kind, for conditions and for models
    assert seen == {(k, w) for k in ("scorer", "judge", "panel") for w in ("condition", "model")}
    assert len(links) == (len(gens) + 3) * len(kinds)


def test_errors_and_parse_failures_link_to_their_grader(
    clustered: Plan, server: ViewServer
) -> None:
    verdicts = _verdicts(clustered)
    page = html.unescape(_get(server, "/"))
    every = re.findall(r'href="(/items\?(?:parse|errors)=1[^"]*)"', page)
    assert every and all("grader=" in link for link in every if "condition=" not in link)
    links = set(re.findall(r'href="(/items\?parse=1&grader=[^"]+)"', page))
    by_slug = {g.slug: g.id for g in clustered.design.grade}
    assert len(links) >= 2  # both judges break the score contract now and then
    for href in links:
        slug = dict(urllib.parse.parse_qsl(href.split("?", 1)[1]))["grader"]
        if slug not in by_slug:
            continue  # the panel: its members' failures
        failed = {item for (_, item, _), v in verdicts[by_slug[slug]].items() if v is None}
        assert _matching(server, href) == len(failed) > 0, href
    judges = [g for g in clustered.design.grade if g.kind == "judge"]
    counts = [_matching(server, f"/items?parse=1&grader={g.slug}") for g in judges]
    assert counts[0] != counts[1] or counts[0] < _matching(server, "/items?parse=1")


def test_item_page_shows_the_panel_verdicts(clustered: Plan, server: ViewServer) -> None:
    item_id = clustered.items.column("item_id")[0].as_py()
    page = _get(server, "/item?" + urllib.parse.urlencode({"id": item_id}))
    assert "panel: jury (" in page
    assert page.count('class="grade ') >= 4 * len(clustered.design.generate)


def test_status_prints_the_reports_costs(clustered: Plan) -> None:
    status = Study(clustered.study).status()
    text = status.results_text()
    report = {c.generate.slug: c for c in report_data(clustered, Bootstrap(resamples=50)).costs}
    for slug, cost in report.items():
        line = next(x for x in text.splitlines() if x.startswith(slug + " "))
        for value in (cost.usd, cost.cache_saved_usd, cost.alone_usd, cost.per_correct):
            assert fmt_usd(value) in line
