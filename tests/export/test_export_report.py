"""`itemeval report` on real runs: the files, and every number checked against the long table
computed independently (accuracy, agreement and kappa, cost per correct answer, errors, items
nothing answered right)."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml
from export_studies import DEMO, Run, read_table, run

from itemeval.export import ExportOptions, export_study
from itemeval.providers.types import Usage
from itemeval.report import report_data, write_report
from itemeval.runtime import RunOptions
from itemeval.statistics import cohen_kappa


@pytest.fixture(scope="module")
def long_rows(demo_run: Run, tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("long")
    export_study(demo_run.plan(), ExportOptions(out=str(out), formats=("parquet",)))
    return read_table(out).to_pylist()


def _final(row: dict) -> bool:
    return (
        row["grade_status"] == "ok"
        and row["parse_ok"]
        and row["correct"] is not None
        and not row["grade_stale"]
    )


def test_report_files_are_self_contained(demo_run: Run, tmp_path: Path):
    result = write_report(demo_run.plan(), str(tmp_path))
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert result.html == str(tmp_path / "report.html")
    assert "id='leaderboard'" in html and html.count("<svg") >= 4
    for outside in ("<script", "<link", "src=", "url(", "@import"):
        assert outside not in html, outside
    # The only URL is the SVG namespace, which is a name, not a fetch.
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) == {"http://www.w3.org/2000/svg"}
    for section in (
        "## Leaderboard",
        "## Prompt sensitivity",
        "## Grader agreement",
        "## Cost per correct answer",
        "## Errors and parse failures",
        "## Item difficulty",
        "## Method",
    ):
        assert section in markdown
    assert "| 1 | 1-2 | strong_" in markdown  # the strong model ranks first, tier 1 and rank 1-2


def test_leaderboard_accuracy_matches_the_long_table(demo_run: Run, long_rows: list[dict]):
    data = report_data(demo_run.plan())
    board = data.leaderboard
    assert board.primary is not None and board.primary.kind == "scorer"
    tallies: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in filter(_final, long_rows):
        tally = tallies[(row["gen_condition_id"], row["grade_condition_id"])]
        tally[0] += row["correct"]
        tally[1] += 1
    for line in board.conditions:
        for grade_id, accuracy in line.accuracy.items():
            correct, graded = tallies[(line.generate.id, grade_id)]
            assert accuracy.value == pytest.approx(correct / graded)
            assert accuracy.trials == graded
            assert accuracy.low <= accuracy.value <= accuracy.high
    headline = [board.headline(line).value for line in board.conditions]
    assert headline == sorted(headline, reverse=True)
    assert board.models[0].name == "strong"
    assert data.by_prompt is not None and set(data.by_prompt.columns) == {
        "builtin:direct",
        "builtin:cot",
    }


def test_agreement_cost_errors_and_difficulty_match_the_long_table(
    demo_run: Run, long_rows: list[dict]
):
    data = report_data(demo_run.plan())

    # Agreement: the scorer and the judge on the answers both graded validly.
    verdicts: dict[str, dict[tuple, bool]] = defaultdict(dict)
    for row in filter(_final, long_rows):
        key = (row["gen_condition_id"], row["item_id"], row["epoch"])
        verdicts[row["grade_condition_id"]][key] = row["correct"]
    (pair,) = data.agreement
    a, b = verdicts[pair.first.id], verdicts[pair.second.id]
    both = sorted(set(a) & set(b))
    assert pair.agreement.n == len(both)
    assert pair.agreement.kappa == pytest.approx(
        cohen_kappa([a[k] for k in both], [b[k] for k in both])
    )
    assert 0.5 < pair.agreement.kappa < 1  # the simulated judge is good but not perfect

    # Cost per correct answer: generation once per solution, every grade's cost, headline
    # correct answers; what the response cache saved: each answer it gave priced row by row
    # as its call was (`ModelPrice.cost` at the row's tier).
    pricing = demo_run.plan().pricing

    def priced(model: str | None, tier: str, usage: Usage) -> float:
        price = pricing.price(model) if model else None
        return price.at_tier(tier).cost(usage) if price is not None else 0.0

    primary = data.leaderboard.primary.id
    solutions: dict[tuple, float] = {}
    grading: Counter[str] = Counter()
    correct: Counter[str] = Counter()
    saved: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    for row in long_rows:
        key = (row["gen_condition_id"], row["item_id"], row["epoch"])
        if key not in solutions and row["solution_cached"]:
            usage = Usage(
                row["solution_input_tokens"],
                row["solution_output_tokens"],
                row["solution_cached_input_tokens"],
            )
            saved[key[0]] += priced(row["model"], row["solution_tier"], usage)
            hits[key[0]] += 1
        solutions[key] = row["solution_usd"]
        grading[row["gen_condition_id"]] += row["grade_usd"]
        if row["grade_cached"]:  # the simulated judges report no prompt-cache reads
            usage = Usage(row["grade_input_tokens"], row["grade_output_tokens"])
            saved[key[0]] += priced(row["grader_model"], row["grade_tier"], usage)
            hits[key[0]] += 1
        if row["grade_condition_id"] == primary and _final(row):
            correct[row["gen_condition_id"]] += row["correct"]
    generation: Counter[str] = Counter()
    for (cid, _, _), value in solutions.items():
        generation[cid] += value
    # Solutions whose generation failed have no grade, so they are not in the long table.
    failed = {c.condition: c.count for c in data.errors.generation}
    for cost in data.costs:
        cid = cost.generate.id
        assert cost.correct == correct[cid]
        assert cost.grading_usd == pytest.approx(grading[cid])
        if cost.generate.slug not in failed:
            assert cost.generation_usd == pytest.approx(generation[cid])
        assert cost.cache_hits == hits[cid]
        assert cost.cache_saved_usd == pytest.approx(saved[cid], rel=1e-9, abs=1e-12)
        assert cost.alone_usd == pytest.approx(cost.usd + saved[cid])
        assert cost.per_correct == pytest.approx(cost.alone_usd / cost.correct)
    assert sum(hits.values()) > 0 and sum(saved.values()) > 0

    # Errors and parse failures by code.
    grade_errors = Counter(
        (r["grade_condition_id"].split("--")[0], r["grade_error_code"])
        for r in long_rows
        if r["grade_status"] == "error"
    )
    assert {(c.condition, c.code): c.count for c in data.errors.grading} == grade_errors
    parse = Counter(
        r["parse_code"] for r in long_rows if r["grade_status"] == "ok" and not r["parse_ok"]
    )
    assert Counter({c.code: c.count for c in data.errors.parse_failures}) == parse
    assert set(parse) <= {
        "no_json_object",
        "no_score_in_json",
        "score_not_numeric",
        "score_not_finite",
    }
    assert {c.code for c in data.errors.generation} == {"server_error"}

    # Items nothing answered right (headline grader), per dataset.
    per_item: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in long_rows:
        if row["grade_condition_id"] == primary and _final(row):
            per_item[row["item_id"]][0] += row["correct"]
            per_item[row["item_id"]][1] += 1
    unsolved = {item for item, (c, _) in per_item.items() if c == 0}
    assert {s.item_id for d in data.difficulty for s in d.unsolved} == unsolved
    for dataset in data.difficulty:
        mine = [
            c / n for item, (c, n) in per_item.items() if item.startswith(dataset.dataset + ".")
        ]
        assert dataset.graded_items == len(mine)
        assert dataset.mean_accuracy == pytest.approx(sum(mine) / len(mine))
        assert all(s.input for s in dataset.hardest)  # item texts come from the snapshot
        worst = min(mine)
        assert dataset.hardest[0].accuracy == pytest.approx(worst)


def test_a_study_with_nothing_graded_still_reports(tmp_path: Path):
    study = {
        "study": "ungraded",
        "datasets": [
            {
                "name": "facts-tf",
                "path": str(Path(__file__).parents[2] / "configs/datasets/facts-tf"),
            }
        ],
        "endpoints": {"sim": {"kind": "sim"}},
        "models": [{"id": "sim/weak", "endpoint": "sim"}],
        "facets": {"scorer": [], "grader": ["judge"]},
        "graders": {"judge": {"model": "sim/judge", "endpoint": "sim"}},
        "budget": {"policy": "dev", "dev_items": 4},
    }
    result = run(
        tmp_path, study, RunOptions(no_ray=True, yes=True, quiet=True, stages=("generate",))
    )
    report = write_report(result.plan(), str(tmp_path / "out"))
    html = Path(report.html).read_text()
    assert "Nothing graded yet" in html
    assert report.data.leaderboard.primary.kind == "judge"  # no scorer: the first judge
    assert not report.data.leaderboard.conditions[0].accuracy
    assert report.data.costs[0].per_correct is None
    assert report.data.graded == 0 and report.data.solutions == 4


SCRIPT = "<script>alert('item')</script>"
IMAGE = "<img src=x onerror=alert('answer')>"
LINK = "[click](javascript:alert('link'))"


def test_report_shows_item_and_answer_markup_as_text(tmp_path: Path):
    """Items whose text holds a `<script>`, an `<img onerror>` and a `javascript:` link, and
    whose targets (so the models' right answers) hold an `<img onerror>`: rendered by a
    CommonMark renderer that passes HTML through (as many Markdown viewers do), report.md
    holds no tag and no link from them, only their text; report.html, whose templates escape
    every value (`itemeval/report/_templates.py`), shows them as text too."""
    from markdown_it import MarkdownIt

    folder = tmp_path / "data" / "unsafe"
    folder.mkdir(parents=True)
    rows = [
        {
            "identifier": f"unsafe.{i}",
            "modality": "single-value",
            "prompt": prompt,
            "response": response,
        }
        for i, (prompt, response) in enumerate(
            [
                (f"What is 2 + 2? {SCRIPT}", IMAGE),
                (f"Say {IMAGE} back. {LINK}", IMAGE),
                ("What is *1* + `1` [x]?", "2 <b>bold</b>"),
            ]
        )
    ]
    (folder / "unsafe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "unsafe.yaml").write_text(
        "identifier: unsafe\ntitle: Unsafe\nmetadataVersion: '3.3'\nhasPart:\n- unsafe.jsonl\n"
    )
    data = yaml.safe_load(yaml.safe_dump(DEMO))
    data["datasets"] = [{"name": "unsafe", "path": str(folder)}]
    data["facets"]["grader"], data["graders"] = [], {}
    data["facets"].pop("rubric")
    data["endpoints"]["sim"]["sim"] = {}
    result = run(tmp_path / "study", data)
    write_report(result.plan(), str(tmp_path / "out"))
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "&lt;script&gt;" in markdown and "&lt;img src=x onerror" in markdown
    page = MarkdownIt("commonmark").render(markdown)
    assert "<script" not in page and "<img" not in page and "<b>" not in page
    assert 'href="javascript' not in page and "<em>1</em>" not in page
    assert "&lt;img src=x onerror=alert('answer')&gt;" in page  # shown, as text
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html and "<img" not in html and "<b>bold" not in html
    assert "&lt;script&gt;alert(&#x27;item&#x27;)&lt;/script&gt;" in html  # shown, as text
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
