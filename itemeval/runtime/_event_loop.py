"""The event loop a run's calls turn on in the command's process: uvloop's when installed.

A local run's calls are one CPU-bound process (issue 14), and the event loop is a large share of
what each call costs: against the same loopback server, a bare aiohttp loop spent 0.10 ms of CPU
per request on uvloop's loop and 0.13 ms on asyncio's (`benchmarks/whole_command.py` and
docs/performance.md give the command's figures). uvloop is a dependency on Linux and macOS; where
it is missing (Windows) the standard loop runs. `ITEMEVAL_EVENT_LOOP=asyncio` forces the
standard loop, to rule the loop out when chasing a problem.

Ray's worker actors keep the loop Ray gives them; only the command's own runner uses this.
"""

from __future__ import annotations

import asyncio
import os

from itemeval.errors import ConfigError, Problem

#: Set to `asyncio` to run on the standard library's loop even where uvloop is installed.
EVENT_LOOP_ENV = "ITEMEVAL_EVENT_LOOP"


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's, unless it is missing or `ITEMEVAL_EVENT_LOOP=asyncio`."""
    choice = os.environ.get(EVENT_LOOP_ENV, "").strip().lower()
    if choice not in ("", "auto", "uvloop", "asyncio"):
        raise ConfigError(
            Problem(
                f"{EVENT_LOOP_ENV}={choice!r} is not a loop itemeval knows",
                hint="set it to asyncio, uvloop or auto (the default), or unset it",
            )
        )
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise ConfigError(
                    Problem(
                        f"{EVENT_LOOP_ENV}=uvloop, but uvloop is not installed",
                        hint="pip install uvloop, or unset the variable",
                    )
                ) from None
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()
