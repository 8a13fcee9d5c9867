"""`itemeval view` in a real browser: chromium (Debian's, driven by playwright) opens each page
of the viewer over a real study store and checks what it shows against the store itself, read
back independently (`StudyStore.read_*`, deduplicated by the store); a screenshot of each page
is saved under `test-artifacts/view/` (gitignored).

The last tests write rows while the viewer serves: an answer and a judge's reasoning that carry
`<script>`, `<img onerror=...>` and a `javascript:` link. The open page reloads by itself (a
run under way) and shows them as text; none of them runs."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ARTIFACTS

from itemeval.planning import Plan
from itemeval.store import text_hash
from itemeval.view import ViewOptions, ViewServer

PAYLOAD = (
    "Answer: <script>window.__pwned = 'script'</script>\n"
    "<img src=x onerror=\"window.__pwned = 'img'\">\n"
    '<a id="evil" href="javascript:window.__pwned=\'link\'">click me</a>\n'
    "[more](javascript:window.__pwned='md')"
)


@pytest.fixture(scope="module")
def viewer(study_plan: Plan) -> Iterator[ViewServer]:
    server = ViewServer(study_plan, ViewOptions(port=0, open_browser=False, refresh_s=0.3))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def page(browser, viewer: ViewServer):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.errors = errors
    yield tab
    context.close()


def _shot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000


def _truth(plan: Plan) -> dict[str, dict[str, tuple[int, int]]]:
    """Per generate condition id, per item: (correct, graded) under the scorer, counting only
    final grades of the current answer, computed from the store's own deduplicated reads."""
    scorer = next(c for c in plan.design.grade if c.kind == "scorer")
    solutions = plan.store.read_solutions(None, ["item_id", "epoch", "text_hash"]).to_pylist()
    current = {(r["condition_id"], r["item_id"], r["epoch"]): r["text_hash"] for r in solutions}
    grades = plan.store.read_grades([scorer.id]).to_pylist()
    out: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for g in grades:
        key = (g["gen_condition_id"], g["item_id"], g["epoch"])
        if g["status"] != "ok" or not g["parse_ok"] or g["correct"] is None:
            continue
        if current.get(key) != g["solution_hash"]:
            continue
        counts = out[g["gen_condition_id"]][g["item_id"]]
        counts[0] += int(g["correct"])
        counts[1] += 1
    return {gen: {i: (c[0], c[1]) for i, c in items.items()} for gen, items in out.items()}


def _wrong(counts: dict[str, tuple[int, int]]) -> set[str]:
    return {item for item, (c, n) in counts.items() if n and not 2 * c > n}


def test_overview(page, viewer: ViewServer, study_plan: Plan) -> None:  # type: ignore[no-untyped-def]
    page.goto(viewer.url)
    rows = page.locator("#leaderboard tbody tr")
    assert rows.count() == len(study_plan.design.generate) == 6
    header = page.locator("#leaderboard thead").inner_text()
    assert "scorer: auto" in header and "judge: judge" in header
    first = rows.nth(0).inner_text()
    assert "[" in first and "]" in first  # an interval
    # The top condition by the scorer is the one the store says is most accurate.
    truth = _truth(study_plan)
    best = max(
        truth,
        key=lambda gen: (
            sum(c for c, _ in truth[gen].values()) / sum(n for _, n in truth[gen].values())
        ),
    )
    assert study_plan.design.condition(best).slug in first
    _shot(page, "overview")
    assert not page.errors


def test_items_filter(page, viewer: ViewServer, study_plan: Plan) -> None:  # type: ignore[no-untyped-def]
    weak = next(c for c in study_plan.design.generate if c.slug.startswith("weak_cot"))
    page.goto(viewer.url + "items")
    page.select_option("select[name=wrong]", weak.id)
    page.select_option("select[name=dataset]", "arithmetic")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**/items?**")
    shown = set(page.locator("#items a.item-link").all_inner_texts())
    expected = {i for i in _wrong(_truth(study_plan)[weak.id]) if i.startswith("arithmetic.")}
    assert expected and shown == expected  # fewer than a page of them
    assert f"{len(expected)} items match" in page.locator("#count").inner_text()
    _shot(page, "items")
    # The overview's accuracy links: the items the condition answered wrong at least once.
    page.goto(viewer.url)
    page.locator("#leaderboard tbody tr").last.locator("td.num a").first.click()
    page.wait_for_url("**/items?**")
    truth = _truth(study_plan)
    slug = page.locator("select[name=missed] option[selected]").inner_text()
    gen = next(c for c in study_plan.design.generate if c.slug == slug)
    missed = {i for i, (c, n) in truth[gen.id].items() if c < n}
    assert f"{len(missed)} items match" in page.locator("#count").inner_text()
    # Text search: "capital" finds the capitals items (in their text) and no other.
    page.goto(viewer.url + "items?q=CAPITAL")
    datasets = set(page.locator("#items tbody tr td:nth-child(2)").all_inner_texts())
    assert datasets == {"capitals-short"}


def test_item_page(page, viewer: ViewServer, study_plan: Plan) -> None:  # type: ignore[no-untyped-def]
    page.goto(viewer.url + "items?dataset=science-mc")
    link = page.locator("#items a.item-link").first
    item_id = link.inner_text()
    link.click()
    page.wait_for_selector("#answers")
    assert page.locator("#item-id").inner_text() == item_id
    snapshot = study_plan.items.to_pylist()
    assert any(r["item_id"] == item_id for r in snapshot)
    stored = study_plan.store.read_solutions(None, ["item_id", "epoch", "text"]).to_pylist()
    mine = {(r["condition_id"], r["epoch"]): r["text"] for r in stored if r["item_id"] == item_id}
    texts = page.locator("#answers .answer-text").all_inner_texts()
    assert sorted(texts) == sorted(mine.values())  # every condition, every epoch
    assert page.locator("#answers tbody tr").count() == 6
    assert page.locator(".message").count() >= 2  # the rendered prompt of each template
    assert page.locator("#gold").inner_text().strip() in "ABCD"
    # A diff of two answers.
    page.select_option("select[name=a]", "0:0")
    page.select_option("select[name=b]", "5:1")
    page.click("#diff-form button[type=submit]")
    page.wait_for_selector("#diff")
    assert page.locator("#diff ins, #diff del").count() > 0
    _shot(page, "item")
    assert not page.errors


def test_compare(page, viewer: ViewServer, study_plan: Plan) -> None:  # type: ignore[no-untyped-def]
    gens = study_plan.design.generate
    strong = next(c for c in gens if c.slug.startswith("strong_direct"))
    weak = next(c for c in gens if c.slug.startswith("weak_cot"))
    page.goto(viewer.url + "compare")
    page.select_option("select[name=a]", strong.id)
    page.select_option("select[name=b]", weak.id)
    page.click("#compare-form button[type=submit]")
    page.wait_for_selector("#compare")
    truth = _truth(study_plan)
    a, b = truth[strong.id], truth[weak.id]
    both = [i for i in a if i in b and a[i][1] and b[i][1]]
    a_better = sum(1 for i in both if a[i][0] / a[i][1] > b[i][0] / b[i][1])
    b_better = sum(1 for i in both if a[i][0] / a[i][1] < b[i][0] / b[i][1])
    summary = page.locator("#compare-summary").inner_text()
    assert f"did better on {a_better}," in summary and f"on {b_better}," in summary
    rows = page.locator("#compare tbody tr")
    assert rows.count() == min(20, a_better + b_better)
    assert rows.nth(0).locator(".answer").count() == 2 * study_plan.design.epochs
    _shot(page, "compare")


def test_unsafe_text_lands_during_a_run_and_never_runs(  # type: ignore[no-untyped-def]
    page, viewer: ViewServer, study_plan: Plan
) -> None:
    gen = study_plan.design.generate[0]
    judge = next(c for c in study_plan.design.grade if c.kind == "judge")
    item_id = study_plan.items.column("item_id")[0].as_py()
    page.goto(viewer.url + f"item?id={item_id}")
    before = page.locator("body").get_attribute("data-version")
    # A run under way writes a new answer (and its judge's grade) for this cell.
    common = {"item_id": item_id, "epoch": 0, "status": "ok", "run_id": "live-test"}
    study_plan.store.write_solutions(
        gen.id, [{**common, "text": PAYLOAD, "model": gen.model_id, "request_hash": "x" * 64}]
    )
    study_plan.store.write_grades(
        judge.id,
        [
            {
                **common,
                "gen_condition_id": gen.id,
                "solution_hash": text_hash(PAYLOAD),
                "score": 0.0,
                "correct": False,
                "reasoning": PAYLOAD,
                "judge_text": PAYLOAD,
                "grader": "sim/judge",
            }
        ],
    )
    deadline = time.monotonic() + 15
    while page.locator("body").get_attribute("data-version") == before:
        assert time.monotonic() < deadline, "the page did not reload when rows landed"
        time.sleep(0.2)
    page.wait_for_selector("#answers")
    answers = page.locator("#answers")
    assert PAYLOAD.splitlines()[0] in answers.inner_text()  # shown, as text
    assert "click me" in page.locator("#answers .reasoning").first.inner_text()
    assert answers.locator("img, script, a[href^='javascript']").count() == 0
    page.get_by_text("click me").first.click()
    page.goto(viewer.url + "items?q=" + urllib.request.quote("<script>window.__pwned=1</script>"))
    time.sleep(0.3)
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    assert not page.errors
    _shot(page, "unsafe-text")


def test_read_only_loopback_and_token(viewer: ViewServer, study_plan: Plan) -> None:
    listing = sorted(p.name for p in Path(study_plan.store.root.path).rglob("*"))

    def status(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> int:
        request = urllib.request.Request(url, method=method, headers=headers or {})
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            return opener.open(request, timeout=10).status
        except urllib.error.HTTPError as exc:
            return exc.code

    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert status(viewer.url + "items", method) == 405
    # Another site's page reaching 127.0.0.1 through a DNS name of its own is refused.
    assert status(viewer.url, headers={"Host": f"evil.example:{viewer.port}"}) == 403
    # Another address needs the token.
    options = ViewOptions(host="127.0.0.2", port=0, open_browser=False)
    other = ViewServer(study_plan, options, state=viewer.state)
    url = other.start()
    try:
        assert other.token and url.endswith(f"?token={other.token}")
        base = url.split("?")[0]
        assert status(base) == 401
        assert status(base + "?token=wrong") == 401
        assert status(url) == 302  # sets the cookie and drops the token from the address
        assert status(base, headers={"Authorization": f"Bearer {other.token}"}) == 200
        assert (
            status(base + "api/version", headers={"Cookie": f"itemeval_view_token={other.token}"})
            == 200
        )
    finally:
        other.stop()
    assert sorted(p.name for p in Path(study_plan.store.root.path).rglob("*")) == listing


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None
