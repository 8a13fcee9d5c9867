"""The command's runner turns on uvloop's event loop when it is installed; the standard loop
on request (`ITEMEVAL_EVENT_LOOP=asyncio`); the same rows either way; a bad setting is bad
input, not a crash."""

from __future__ import annotations

import asyncio
import sys

import pytest
from runtime_files import physical_rows, write_study

from itemeval.config import load_study
from itemeval.errors import ConfigError, ExitCode
from itemeval.runtime import RunOptions, run_study
from itemeval.runtime import _inline_executor as inline_executor
from itemeval.runtime._event_loop import EVENT_LOOP_ENV, new_event_loop

try:
    import uvloop
except ImportError:  # Windows: no uvloop, the standard loop runs
    uvloop = None

needs_uvloop = pytest.mark.skipif(
    uvloop is None, reason="uvloop is a dependency except on Windows, where it does not exist"
)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "default-cache"))


def _is_uvloop(loop: asyncio.AbstractEventLoop) -> bool:
    return uvloop is not None and isinstance(loop, uvloop.Loop)


@pytest.mark.parametrize(
    ("setting", "uv"),
    [
        pytest.param(None, True, marks=needs_uvloop),
        pytest.param("auto", True, marks=needs_uvloop),
        pytest.param("uvloop", True, marks=needs_uvloop),
        ("asyncio", False),
    ],
)
def test_the_loop_is_uvloops_unless_asked_for_the_standard_one(monkeypatch, setting, uv):
    if setting is None:
        monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    else:
        monkeypatch.setenv(EVENT_LOOP_ENV, setting)
    loop = new_event_loop()
    try:
        assert _is_uvloop(loop) is uv
        assert loop.run_until_complete(asyncio.sleep(0, result=7)) == 7
    finally:
        loop.close()


def test_without_uvloop_the_default_is_the_standard_loop(monkeypatch):
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed
    loop = new_event_loop()
    try:
        assert type(loop).__module__.startswith("asyncio")
    finally:
        loop.close()


@pytest.mark.parametrize(
    ("setting", "says"), [("trio", "is not a loop itemeval knows"), ("uvloop", "not installed")]
)
def test_a_setting_it_cannot_honour_is_bad_input_naming_the_variable(monkeypatch, setting, says):
    monkeypatch.setenv(EVENT_LOOP_ENV, setting)
    monkeypatch.setitem(sys.modules, "uvloop", None)
    with pytest.raises(ConfigError) as info:
        new_event_loop()
    assert EVENT_LOOP_ENV in str(info.value) and says in str(info.value)
    assert info.value.exit_code == ExitCode.BAD_INPUT


@pytest.mark.parametrize("setting", [pytest.param("auto", marks=needs_uvloop), "asyncio"])
def test_a_run_writes_every_cell_once_on_either_loop(tmp_path, monkeypatch, setting):
    monkeypatch.setenv(EVENT_LOOP_ENV, setting)
    loops = []

    def recorded() -> asyncio.AbstractEventLoop:
        loops.append(new_event_loop())
        return loops[-1]

    monkeypatch.setattr(inline_executor, "new_event_loop", recorded)
    study = load_study(write_study(tmp_path, **{"facets.grader": []}))
    outcome = run_study(study, RunOptions(no_ray=True, yes=True, quiet=True))
    assert outcome.exit_code == ExitCode.OK, outcome.message
    assert loops and all(_is_uvloop(loop) is (setting == "auto") for loop in loops)
    assert physical_rows(study.store_url) == 4 * 24 * 2  # conditions x items x epochs, once
