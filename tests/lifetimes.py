"""Whether what a function made earlier is still alive when it is called again: for tests that
hold a large structure to one at a time (one condition's index, one condition's keys)."""

from __future__ import annotations

import gc
import weakref
from types import ModuleType
from typing import Any

import pytest


def alive_at_each_call(monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str) -> list[int]:
    """Wrap `module.name`: each call first records how many of the objects the earlier calls
    returned are still alive (after a collection). The returned list fills as calls come."""
    real = getattr(module, name)
    made: list[weakref.ref] = []
    alive: list[int] = []

    def watched(*args: Any, **kwargs: Any) -> Any:
        gc.collect()
        alive.append(sum(ref() is not None for ref in made))
        result = real(*args, **kwargs)
        made.append(weakref.ref(result))
        return result

    monkeypatch.setattr(module, name, watched)
    return alive
