"""Each package's public names (its `__all__`, imported on first use) resolve, and the names of
the former module `itemeval.planning` still do."""

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


def test_the_former_planning_module_names_resolve_on_the_package() -> None:
    planning = importlib.import_module("itemeval.planning")
    plan = importlib.import_module("itemeval.planning._plan")
    assert planning.selection_limit is plan.selection_limit
    assert planning.make_plan is plan.make_plan
