"""Fixtures of the export suite: one real run of a demo-like study, shared by the tests that
only read its store (export, Every Eval Ever, report, browser)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from export_studies import Run, run


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Studies name their own cache; this keeps anything else off the user's cache too.
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "default-cache"))


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The demo-like study (`export_studies.DEMO`), run once in-process for the session."""
    folder = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ITEMEVAL_CACHE_DIR", str(folder / "default-cache"))
        result = run(folder)
    # Injected faults leave some cells in error: exit code 1 is the expected outcome.
    assert result.outcome.status == "completed", result.outcome.message
    yield result
