"""docs/python-api.md runs as written: every `python` block, in order, in one namespace, from a
folder holding the repository's configs/ (as the page says)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "python-api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_the_page_has_examples():
    assert len(BLOCK.findall(PAGE.read_text())) >= 8


def test_every_example_runs(tmp_path, monkeypatch, capsys):
    (tmp_path / "configs").symlink_to(REPO / "configs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "cache"))
    namespace: dict[str, object] = {"__name__": "python_api_doc"}
    for number, block in enumerate(BLOCK.findall(PAGE.read_text()), 1):
        try:
            exec(compile(block, f"{PAGE.name} block {number}", "exec"), namespace)
        except Exception as exc:  # name the block in the failure
            pytest.fail(f"block {number} of {PAGE.name} failed: {type(exc).__name__}: {exc}")
    shown = capsys.readouterr().out
    assert "unknown endpoint 'simm'" in shown
    assert "Done. generate: 20 ok; grade: 20 ok" in shown
    assert (tmp_path / "studies" / "notebook-demo").is_dir()  # the default store, as the CLI's
