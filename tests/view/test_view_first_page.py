"""The viewer's first page, kept beside the store (`<store>/analysis/view.json`): a viewer
started again over an unchanged store answers `/` and `/api/version` from it before its index is
built, with the page the index renders, byte for byte; a store that changed (a new fragment),
a damaged file or `ITEMEVAL_SUMMARIES=off` has it computed from the rows."""

from __future__ import annotations

import json
import shutil
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import small_study

from itemeval.planning import Plan
from itemeval.store import SOLUTIONS
from itemeval.store.fragments import list_fragments
from itemeval.view import ViewOptions, ViewServer
from itemeval.view import _server as server_module

KEPT = "analysis/view.json"


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """A store of its own: a test here adds a fragment to it."""
    return small_study(tmp_path_factory.mktemp("view-first-page"))


def kept_file(plan: Plan) -> Path:
    return Path(plan.store.root.path) / KEPT


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as response:
        assert response.status == 200
        return str(response.read().decode())


@pytest.fixture
def held_index(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The index's build waits until the event is set (what a big store's read does)."""
    release = threading.Event()
    build = server_module.build_index

    def waiting(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(60), "the index was not released"
        return build(*args, **kwargs)

    monkeypatch.setattr(server_module, "build_index", waiting)
    yield release
    release.set()


def start(plan: Plan) -> ViewServer:
    viewer = ViewServer(plan, ViewOptions(port=0, open_browser=False, refresh_s=0))
    viewer.start()
    return viewer


def first_start(plan: Plan) -> tuple[str, dict[str, Any]]:
    """Start a viewer that reads every row; its first page and `/api/version`."""
    kept_file(plan).unlink(missing_ok=True)
    viewer = start(plan)
    try:
        assert viewer.state.ready
        page = get(viewer.url)
        version = json.loads(get(viewer.url + "api/version"))
    finally:
        viewer.stop()
    assert json.loads(kept_file(plan).read_text())["numbers"]["page"] == page
    return page, version


def test_an_unchanged_store_answers_the_first_page_before_the_index(
    plan: Plan, held_index: threading.Event
) -> None:
    held_index.set()
    page, version = first_start(plan)
    held_index.clear()
    viewer = start(plan)  # returns with the index still held
    try:
        assert not viewer.state.ready
        assert get(viewer.url) == page
        kept_version = json.loads(get(viewer.url + "api/version"))
        assert {k: kept_version[k] for k in ("version", "solutions", "grades")} == {
            k: version[k] for k in ("version", "solutions", "grades")
        }
        assert not viewer.state.ready
        held_index.set()
        assert viewer.state.index.version == version["version"]
        assert viewer.state.ready
        assert get(viewer.url) == page  # rendered from the index now: the same page
        assert "/items?page=2" in get(viewer.url + "items")
    finally:
        viewer.stop()


def test_a_changed_or_damaged_store_reads_its_rows(
    plan: Plan, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_start(plan)

    def started_ready() -> ViewServer:
        viewer = start(plan)
        viewer.stop()
        return viewer

    # damaged: computed again, and kept anew
    kept_file(plan).write_text("{not json")
    assert started_ready().state.kept_page() is None
    assert json.loads(kept_file(plan).read_text())["numbers"]["page"]
    # ITEMEVAL_SUMMARIES=off: neither read nor written
    with monkeypatch.context() as patch:
        patch.setenv("ITEMEVAL_SUMMARIES", "off")
        kept_file(plan).unlink()
        viewer = started_ready()
        assert viewer.state.ready and viewer.state.kept_page() is None
        assert not kept_file(plan).exists()
    # a fragment landed: the kept page is of another store, not shown
    first_start(plan)
    before = json.loads(kept_file(plan).read_text())["numbers"]["version"]
    partition = plan.store.partition(SOLUTIONS, plan.design.generate[0].id)
    last = list_fragments(partition)[-1]
    folder = Path(partition.path)
    shutil.copy(folder / last.name, folder / ("z" + last.name))  # sorts last: newest
    viewer = started_ready()
    assert viewer.state.kept_page() is None
    assert viewer.state.index.version != before
    assert (
        json.loads(kept_file(plan).read_text())["numbers"]["version"] == viewer.state.index.version
    )
