"""Connecting to Ray: an existing cluster (`--address`, or `RAY_ADDRESS` under `ray job
submit`), or a local Ray started for the run and stopped after it."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from itemeval.runtime._timeline import TIMELINE

#: The Ray namespace of every named actor itemeval creates (limiters, ledgers).
NAMESPACE = "itemeval"
#: What each worker process of a local Ray runs first (Ray imports it by this name).
WORKER_SETUP_HOOK = "itemeval._util.arrow_start.skip_pandas_probe"


#: Set by the `itemeval` command (`cli.main.entry`), whose process ends right after the run.
_PROCESS_ENDS_AFTER_RUN = False


def process_ends_after_run() -> None:
    """This process ends (`os._exit`) once the command is done, so a local Ray it started need
    not be stopped: `ray.shutdown()` took 1.2 s of a 20,000-item run's exit, and the kernel ends
    Ray's processes with this one (see `ray_cluster`)."""
    global _PROCESS_ENDS_AFTER_RUN
    _PROCESS_ENDS_AFTER_RUN = True


def _ends_with_this_process(ray: Any) -> bool:
    """Whether the local Ray this process started dies with it: Ray starts its daemons with the
    kernel's fate sharing (Linux's parent-death signal) when it can, and its workers exit when
    their raylet does. Read from Ray's own node object; anything unexpected reads False."""
    node = getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)
    return bool(getattr(node, "kernel_fate_share", False))


@dataclass(frozen=True)
class Cluster:
    cpus: int
    address: str | None  # None: a local Ray started by this process
    shared: bool  # True on a cluster that outlives this driver (limiters are detached there)


@contextmanager
def ray_cluster(address: str | None, *, quiet: bool = False) -> Iterator[Cluster]:
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is None and "RAY_AUTH_MODE" not in os.environ and "ray" not in sys.modules:
        # Token auth stays on (Ray's default for a local cluster); saying so explicitly keeps
        # Ray from warning about it on every run. Ray reads it when imported: set it first.
        os.environ["RAY_AUTH_MODE"] = "token"
    import ray

    started = False
    if not ray.is_initialized():
        options: dict[str, Any] = {
            "namespace": NAMESPACE,
            "logging_level": logging.WARNING,
            "log_to_driver": not quiet,
        }
        if address:
            ray.init(address=address, **options)
        else:
            # "local": a new Ray of our own. Without it ray.init() attaches to any Ray it finds
            # running on this machine (another user's, another run's), whatever it is. Its
            # workers start as the command does, pandas out of pyarrow's sight (`arrow_start`);
            # on a cluster, a job's runtime env is its owner's to set.
            ray.init(
                address="local",
                include_dashboard=False,
                runtime_env={"worker_process_setup_hook": WORKER_SETUP_HOOK},
                **options,
            )
        started = True
    TIMELINE.mark("ray up")
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        yield Cluster(cpus=max(1, cpus), address=address, shared=bool(address))
    finally:
        # The `itemeval` command's process ends right after the run (its rows and manifest
        # written by then; nothing of Ray's is kept), so a local Ray that dies with it is left
        # to the kernel. A library caller's process goes on, and its Ray is stopped.
        if started and not (
            address is None and _PROCESS_ENDS_AFTER_RUN and _ends_with_this_process(ray)
        ):
            ray.shutdown()
