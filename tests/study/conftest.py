"""The study tests never read the user's response cache: each test gets an empty one."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "default-cache"))
