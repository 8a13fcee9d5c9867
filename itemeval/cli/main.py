"""`itemeval` command line: one argparse root, one module per group of commands.

Each command module exposes `register(subparsers)`, which adds its commands and sets
`func(args) -> int` on each. Errors raised on purpose (`ItemevalError`) are printed without a
traceback and mapped to their exit code; anything else is a bug and shows its traceback.

Output piped into a command that stops reading early (`itemeval estimate s.yaml --json | head`)
ends quietly, as Unix tools do: the command stops, nothing is printed, and the exit code is
141 (128 + SIGPIPE), what a shell reports for a tool that SIGPIPE ended.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence

from itemeval import __version__
from itemeval.errors import ExitCode, ItemevalError
from itemeval.secrets import redact
from itemeval.storage import access_problem

# Command groups, in the order `itemeval --help` lists them.
COMMAND_MODULES = (
    "itemeval.cli.datasets",  # validate, convert
    "itemeval.cli.study",  # init, plan, estimate
    "itemeval.cli.run",  # generate, grade, run, status
    "itemeval.cli.results",  # export, report
    "itemeval.cli.analyze",  # analyze irt
    "itemeval.cli.view",  # view
    "itemeval.cli.store",  # compact
    "itemeval.cli.importing",  # import
    "itemeval.cli.limiters",  # limiters
    "itemeval.cli.sim",  # sim-server
    "itemeval.cli.demo",  # demo
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="itemeval",
        description="Distributed, resumable, budget-safe LLM benchmark evaluations on Ray.",
    )
    parser.add_argument("--version", action="version", version=f"itemeval {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


# The exit code of a tool that SIGPIPE ended, as a shell reports it.
EXIT_BROKEN_PIPE = 128 + int(signal.SIGPIPE)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # a pipe closed early shows here, while we can still handle it
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def entry() -> None:
    """The `itemeval` command (and `python -m itemeval`): `main`, then the exit.

    Once everything is written and the output flushed, the process ends without the
    interpreter's teardown, which frees every object one by one: 0.45 s after a 20,000-item
    run (issue 14), for memory the system takes back at once. A thread that is not a daemon
    and still alive (say, a plugin's) is waited for, as the interpreter would. The process
    keeps few malloc arenas (`runtime.heap.limit_malloc_arenas`): a local run's shards run
    here. pyarrow does not import pandas to learn whether it is there (`arrow_start`). A local
    Ray the run started is not stopped one process at a time: it ends with this process
    (`runtime._cluster.process_ends_after_run`). OpenBLAS runs one thread unless the user set
    `OPENBLAS_NUM_THREADS` (decision 0056)."""
    # Before numpy loads OpenBLAS: on busy cores its threads spin waiting for each other (a
    # plan's 65,536-item dot products took 3.8 ms each with 2 threads, 0.05 ms with one).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from itemeval._util.arrow_start import skip_pandas_probe
    from itemeval._util.heap import limit_malloc_arenas
    from itemeval.runtime import process_ends_after_run

    limit_malloc_arenas()
    skip_pandas_probe()
    process_ends_after_run()
    code = main()
    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = EXIT_BROKEN_PIPE
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if any(t.is_alive() and not t.daemon for t in others):
        sys.exit(code)
    os._exit(code)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's own flush at exit does not print
    "Exception ignored ... BrokenPipeError" (the recipe in Python's `signal` docs)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (tests capture it)
        pass
    finally:
        os.close(devnull)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return int(ExitCode.BAD_INPUT)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        raise  # stdout went away: not a storage problem (see main)
    except ItemevalError as exc:
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:
        problem = access_problem(exc)
        if problem is None:
            raise  # a bug: show the traceback
        print(f"error: cannot access storage: {redact(problem)}", file=sys.stderr)
        return int(ExitCode.BAD_INPUT)
