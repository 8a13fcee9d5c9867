"""The command's runner turns on uvloop's event loop when it is installed; the standard loop
on request (`ITEMEVAL_EVENT_LOOP=asyncio`); the same rows either way."""

from __future__ import annotations

import asyncio
import sys

import pytest
from runtime_files import physical_rows, write_study

from itemeval.config import load_study
from itemeval.errors import ExitCode
from itemeval.runtime import inline_executor
from itemeval.runtime.driver import RunOptions, run_study
from itemeval.runtime.event_loop import EVENT_LOOP_ENV, new_event_loop

uvloop = pytest.importorskip(
    "uvloop", reason="uvloop is a dependency except on Windows, where the standard loop runs"
)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ITEMEVAL_CACHE_DIR", str(tmp_path / "default-cache"))


@pytest.mark.parametrize(("setting", "uv"), [(None, True), ("auto", True), ("asyncio", False)])
def test_the_loop_is_uvloops_unless_asked_for_the_standard_one(monkeypatch, setting, uv):
    if setting is None:
        monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    else:
        monkeypatch.setenv(EVENT_LOOP_ENV, setting)
    loop = new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop) is uv
        assert loop.run_until_complete(asyncio.sleep(0, result=7)) == 7
    finally:
        loop.close()


def test_an_unknown_setting_names_the_variable(monkeypatch):
    monkeypatch.setenv(EVENT_LOOP_ENV, "trio")
    with pytest.raises(ValueError, match="ITEMEVAL_EVENT_LOOP='trio'"):
        new_event_loop()


def test_asking_for_uvloop_where_it_is_missing_says_so(monkeypatch):
    monkeypatch.setenv(EVENT_LOOP_ENV, "uvloop")
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed
    with pytest.raises(ValueError, match="uvloop is not installed"):
        new_event_loop()


@pytest.mark.parametrize("setting", ["auto", "asyncio"])
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
    assert loops and all(isinstance(loop, uvloop.Loop) is (setting == "auto") for loop in loops)
    assert physical_rows(study.store_url) == 4 * 24 * 2  # conditions x items x epochs, once
