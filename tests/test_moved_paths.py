"""Modules that moved keep their old import path for one release (itemeval/_moved.py)."""

from __future__ import annotations

import importlib
import sys

import pytest

from itemeval import _moved


def test_every_old_path_imports_the_module_at_its_new_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for old, new in _moved.MOVED.items():
        # Importing `pkg.compact` sets the attribute `compact` of `pkg` to the module, over the
        # function `pkg.compact` the package exports: put the package's attribute back after.
        parent, _, child = old.rpartition(".")
        monkeypatch.delitem(sys.modules, old, raising=False)
        if parent not in _moved.MOVED:
            package = importlib.import_module(parent)
            monkeypatch.setattr(package, child, getattr(package, child, None), raising=False)
        with pytest.warns(DeprecationWarning, match=new):
            aliased = importlib.import_module(old)
        assert aliased is importlib.import_module(new)
        assert aliased.__spec__ is not None and aliased.__spec__.name == new


def test_a_module_below_a_moved_package_follows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(_moved.MOVED, "itemeval.formerly_statistics", "itemeval.statistics")
    old = "itemeval.formerly_statistics._tallies"
    try:
        with pytest.warns(DeprecationWarning, match="itemeval.statistics._tallies"):
            tallies = importlib.import_module(old)
        assert tallies is importlib.import_module("itemeval.statistics._tallies")
    finally:
        sys.modules.pop(old, None)
        sys.modules.pop("itemeval.formerly_statistics", None)


def test_an_unknown_path_is_still_an_import_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("itemeval.no_such_module")
