"""`itemeval.store`'s public names import; any other name is an AttributeError."""

from __future__ import annotations

import pytest

import itemeval.store as store


def test_every_public_name_is_there() -> None:
    for name in store.__all__:
        assert getattr(store, name) is not None, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        store.no_such_name  # noqa: B018
