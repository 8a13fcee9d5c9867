"""Fixtures of the viewer's tests: one small real study store for the session (the demo-like study
of the export tests, run in-process against the in-process simulator), and a browser.

The browser tests drive Debian's chromium through playwright's Python package; playwright never
downloads a browser here. Without chromium (or playwright) they skip and say how to get them."""

from __future__ import annotations

import gc
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "export"))

from export_studies import run

from itemeval.config import load_study
from itemeval.planning import Plan, make_plan

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "view"
CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser")) if p is not None), None
)
ENABLE = (
    "sudo apt-get install -y chromium && .venv/bin/pip install -e '.[dev]' "
    "(or run .ci/run, which installs chromium when it is absent)"
)


@pytest.fixture(scope="module", autouse=True)
def _earlier_objects_frozen() -> Iterator[None]:
    """The objects the test process made before this module are left out of garbage collection
    while it runs: the index's builds collect garbage several times each
    (`heap.release_unused_memory`), and in the whole suite's long-lived process each collection
    walked every earlier test's objects (the view tests took 80 s there against 23 s alone)."""
    gc.freeze()
    yield
    gc.unfreeze()


def small_study(folder: Path) -> Plan:
    """The demo-like study, run in-process once, and its plan (two epochs, 1,392 solutions)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ITEMEVAL_CACHE_DIR", str(folder / "default-cache"))
        result = run(folder)
    assert result.outcome.status == "completed", result.outcome.message
    return make_plan(load_study(result.study_path), with_pending=False)


@pytest.fixture(scope="session")
def study_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    return small_study(tmp_path_factory.mktemp("view-study"))


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if CHROMIUM is None:
        pytest.skip(f"no chromium on PATH: {ENABLE}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"playwright is not installed: {ENABLE}")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        yield launched
        launched.close()
