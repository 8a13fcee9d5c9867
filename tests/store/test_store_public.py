"""`itemeval.store`'s public names import; the names it no longer exports still do, for one
release, with a warning that names their private module."""

from __future__ import annotations

import importlib

import pytest

import itemeval.store as store


def test_every_public_name_is_there() -> None:
    for name in store.__all__:
        assert getattr(store, name) is not None, name


def test_a_name_no_longer_exported_warns_and_still_imports() -> None:
    for name, module in store._DEPRECATED.items():
        assert name not in store.__all__
        with pytest.warns(DeprecationWarning, match=module):
            value = getattr(store, name)
        assert value is getattr(importlib.import_module(module), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        store.no_such_name  # noqa: B018
