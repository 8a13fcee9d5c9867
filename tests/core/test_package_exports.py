"""Each package's public names (its `__all__`, imported on first use) resolve, and only those."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "itemeval",
    "itemeval.calls",
    "itemeval.datasets",
    "itemeval.planning",
    "itemeval.providers",
    "itemeval.providers.limits",
    "itemeval.providers.money",
    "itemeval.simulator",
    "itemeval.results",
    "itemeval.report",
    "itemeval.export",
    "itemeval.statistics",
    "itemeval.irt",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_resolves(name: str) -> None:
    package = importlib.import_module(name)
    for public in package.__all__:
        assert getattr(package, public) is not None, f"{name}.{public}"
        assert public in dir(package)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        importlib.import_module("itemeval.calls").no_such_name  # noqa: B018


def test_a_private_name_is_not_on_the_package() -> None:
    """`itemeval.planning` was a module before 0.2.0; its private names are no longer answered."""
    planning = importlib.import_module("itemeval.planning")
    assert planning.make_plan is importlib.import_module("itemeval.planning._plan").make_plan
    with pytest.raises(AttributeError, match="selection_limit"):
        planning.selection_limit  # noqa: B018
